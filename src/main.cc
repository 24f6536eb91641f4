// flashsale: one binary, subcommands.
//   flashsale serve [settings]   the HTTP service (see `flashsale serve --help`)
//   flashsale worker [settings]  order consumers only (same settings as serve)
//   flashsale token --user ID    a bearer token for token mode
//   flashsale dead-letters --activity ID [--retry ENTRY]   list or retry dead letters (admin API)
//   flashsale activity list|show ID|create FILE|open ID|close ID   activities (admin API)
//   flashsale job prewarm|reconcile|expire [--activity ID] [--no-repair]  a job now (admin API)
//   flashsale load [options]     drive a sale at a running serve, report, verify (see --help)
//   flashsale version, flashsale --version   the version and the git commit built from
//   flashsale help [COMMAND]     the commands, or one command's options

#include <CLI/CLI.hpp>
#include <iostream>

#include "app/config.h"
#include "app/load.h"
#include "app/serve.h"
#include "base/version.h"

int main(int argc, char** argv) {
  using namespace flashsale;
  CLI::App app{"flashsale: flash sales and lotteries that never oversell, lose or double an order"};
  app.require_subcommand(1);
  const std::string version_text =
      fmt::format("flashsale {} (commit {})", base::Version(), base::Commit());
  app.set_version_flag("--version", version_text, "Print the version and the commit, and exit");

  auto* serve = app.add_subcommand("serve", "Run the HTTP service");
  app::ServeSettings settings(*serve);

  auto* worker = app.add_subcommand(
      "worker", "Run order consumers only: persist order intents from Redis to the database");
  app::ServeSettings worker_settings(*worker);

  auto* token = app.add_subcommand("token", "Print a bearer token for a user (token mode)");
  std::string user_id;
  int64_t ttl_s = 3600;
  std::string secret;
  std::string data_dir = "./flashsale-data";
  token->add_option("--user", user_id, "The user id")->required();
  token->add_option("--ttl-s", ttl_s, "Seconds the token is valid")->capture_default_str();
  token->add_option("--secret", secret, "The server secret (default: the one in --data-dir)")
      ->envname("FLASHSALE_SECRET");
  token->add_option("--data-dir", data_dir, "Where `flashsale serve` keeps its secret")
      ->envname("FLASHSALE_DATA_DIR")
      ->capture_default_str();

  // The admin subcommands call the admin API of a running serve.
  app::AdminTarget target;
  const auto admin_options = [&target](CLI::App* command) {
    command->add_option("--url", target.base_url, "The running flashsale serve")
        ->capture_default_str();
    command
        ->add_option("--admin-token", target.admin_token,
                     "Admin token (default: <data-dir>/admin-token)")
        ->envname("FLASHSALE_ADMIN_TOKEN");
    command->add_option("--data-dir", target.data_dir, "Where `flashsale serve` keeps its token")
        ->envname("FLASHSALE_DATA_DIR")
        ->capture_default_str();
  };

  auto* dead = app.add_subcommand(
      "dead-letters", "List an activity's dead-lettered order intents, or put one back");
  std::string activity_id;
  std::string retry_id;
  dead->add_option("--activity", activity_id, "The activity")->required();
  dead->add_option("--retry", retry_id, "Put this dead letter (its id) back on the order stream");
  admin_options(dead);

  auto* activity = app.add_subcommand(
      "activity",
      "Sales and lotteries: list, show ID, create FILE (JSON; - for stdin), open ID, "
      "close ID");
  std::string action;
  std::string argument;
  activity->add_option("action", action, "list | show | create | open | close")->required();
  activity->add_option("argument", argument, "The activity id, or the JSON file for create");
  admin_options(activity);

  auto* job = app.add_subcommand(
      "job",
      "Run a job now, once across all instances: prewarm, reconcile or expire; prints its "
      "report");
  std::string job_name;
  std::string job_activity;
  bool no_repair = false;
  job->add_option("job", job_name, "prewarm | reconcile | expire")->required();
  job->add_option("--activity", job_activity, "Only this activity (default: all)");
  job->add_flag("--no-repair", no_repair, "reconcile: report only, repair nothing");
  admin_options(job);

  auto* load = app.add_subcommand(
      "load",
      "Drive a sale at a running flashsale; report throughput, latency and outcomes; "
      "verify the sale against Redis and the database");
  app::LoadCommand load_command(*load);

  app.add_subcommand("version", "Print the version and the commit");
  auto* help = app.add_subcommand("help", "Print the commands, or a command's options");
  std::string help_topic;
  help->add_option("command", help_topic, "The command to explain");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // Prints the help or the problem; help is success, a usage error exits 2 like a bad setting.
    return app.exit(error) == 0 ? 0 : 2;
  }

  if (serve->parsed()) {
    auto config = settings.Resolve(app::EnvFromProcess);
    if (!config.ok()) {
      std::cerr << "flashsale serve: " << config.error().message << "\n";
      return 2;
    }
    return app::RunServe(*config);
  }
  if (worker->parsed()) {
    auto config = worker_settings.Resolve(app::EnvFromProcess);
    if (!config.ok()) {
      std::cerr << "flashsale worker: " << config.error().message << "\n";
      return 2;
    }
    return app::RunWorker(*config, worker_settings.Given("listen", app::EnvFromProcess));
  }
  if (token->parsed()) return app::RunToken(user_id, ttl_s, secret, data_dir);
  if (dead->parsed()) return app::RunDeadLetters(activity_id, retry_id, target);
  if (activity->parsed()) return app::RunActivity(action, argument, target);
  if (job->parsed()) return app::RunJobNow(job_name, job_activity, !no_repair, target);
  if (load->parsed()) return load_command.Run();
  if (help->parsed()) {
    // app.help() would describe the parsed subcommand (help itself): format the whole app.
    const std::string overview =
        app.get_formatter()->make_help(&app, "flashsale", CLI::AppFormatMode::Normal);
    if (help_topic.empty()) {
      std::cout << overview;
      return 0;
    }
    const CLI::App* topic = nullptr;
    for (const CLI::App* command : app.get_subcommands({})) {
      if (command->get_name() == help_topic) topic = command;
    }
    if (topic == nullptr || topic == help) {
      std::cerr << "flashsale help: no command '" << help_topic << "'\n" << overview;
      return 2;
    }
    std::cout << topic->help("flashsale");
    return 0;
  }
  std::cout << version_text << "\n";
  return 0;
}
