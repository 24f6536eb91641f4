// flashsale: one binary, subcommands.
//   flashsale serve [settings]   the HTTP service (see `flashsale serve --help`)
//   flashsale worker [settings]  order consumers only (same settings as serve)
//   flashsale token --user ID    a bearer token for token mode
//   flashsale activity list|show|create|update|stock|open|close|delete   activities (admin API)
//   flashsale dead-letters ID [--retry ENTRY]   list or retry an activity's dead letters
//   flashsale job prewarm|reconcile|expire [ID] [--no-repair]  a job now (admin API)
//   flashsale webhooks [list|retry|key]   parked webhook deliveries, retry them, the signing key
//   flashsale orders export --activity ID [--format csv|json] [--state S,S] [--output FILE]
//                                an activity's orders, page by page from the admin API
//   flashsale load [options]     drive a sale at a running serve, report, verify (see --help)
//   flashsale config check [FILE] | config template   check a settings file; print the template
// The admin commands and load find the running serve by --url, FLASHSALE_URL, or the URL serve
// writes into its --data-dir (app/server_url.h).
//   flashsale version, flashsale --version   the version and the git commit built from
//   flashsale help [COMMAND]     the commands, or one command's options

#include <CLI/CLI.hpp>
#include <iostream>

#include "app/activity_command.h"
#include "app/admin_commands.h"
#include "app/config.h"
#include "app/load.h"
#include "app/orders_export.h"
#include "app/serve.h"
#include "base/version.h"

namespace {

namespace fs_app = flashsale::app;

// serve and worker: the service's settings (flags, environment, config file), resolved after
// parsing.
struct ServiceCommand {
  ServiceCommand(CLI::App& app, const std::string& name, const std::string& description,
                 fs_app::ServeSettings::Role role)
      : command(app.add_subcommand(name, description)),
        settings(*command, role),
        name(name),
        role(role) {}

  int Run() const {
    auto config = settings.Resolve(fs_app::EnvFromProcess);
    if (!config.ok()) {
      std::cerr << "flashsale " << name << ": " << config.error().message << "\n";
      return 2;
    }
    if (role == fs_app::ServeSettings::Role::kWorker) {
      return fs_app::RunWorker(*config, settings.Given("listen", fs_app::EnvFromProcess));
    }
    return fs_app::RunServe(*config);
  }

  CLI::App* command;
  fs_app::ServeSettings settings;
  std::string name;
  fs_app::ServeSettings::Role role;
};

struct TokenCommand {
  explicit TokenCommand(CLI::App& app)
      : command(app.add_subcommand("token", "Print a bearer token for a user (token mode)")) {
    command->add_option("--user", user_id, "The user id")->required();
    command->add_option("--ttl-s", ttl_s, "Seconds the token is valid, 1 to 31622400 (366 days)")
        ->check(CLI::Range(int64_t{1}, int64_t{366} * 86400))
        ->capture_default_str();
    command->add_option("--secret", secret, "The server secret (default: the one in --data-dir)")
        ->envname("FLASHSALE_SECRET");
    command->add_option("--data-dir", data_dir, "Where `flashsale serve` keeps its secret")
        ->envname("FLASHSALE_DATA_DIR")
        ->capture_default_str();
  }
  int Run() const { return fs_app::RunToken(user_id, ttl_s, secret, data_dir); }

  CLI::App* command;
  std::string user_id;
  int64_t ttl_s = 3600;
  std::string secret;
  std::string data_dir = "./flashsale-data";
};

// The admin subcommands call the admin API of a running serve: found by --url, FLASHSALE_URL or
// the URL serve writes into its data directory.
void AddTargetOptions(CLI::App* command, fs_app::AdminTarget& target) {
  command->add_option("--url", target.url,
                      "The running flashsale serve, http://host:port (default: FLASHSALE_URL, "
                      "else the URL serve wrote into <data-dir>/url, else http://127.0.0.1:8080)");
  command
      ->add_option("--admin-token", target.admin_token,
                   "Admin token (default: <data-dir>/admin-token)")
      ->envname("FLASHSALE_ADMIN_TOKEN");
  command
      ->add_option("--data-dir", target.data_dir,
                   "Where `flashsale serve` keeps its admin token and its URL")
      ->envname("FLASHSALE_DATA_DIR")
      ->capture_default_str();
}

// The target, and how the answer is printed.
void AddAdminOptions(CLI::App* command, fs_app::AdminTarget& target) {
  AddTargetOptions(command, target);
  // Text for people on a terminal, JSON for programs in a pipe (as kubectl and redis-cli do).
  auto* json = command->add_flag(
      "--json", target.json, "Print the API's JSON (the default when stdout is not a terminal)");
  command
      ->add_flag("--text", target.text,
                 "Print text for people (the default on a terminal), also in a pipe")
      ->excludes(json);
}

// An activity id as the first argument (as `activity show ID`); `--activity ID`, the older
// form, is still understood (hidden from the help).
void AddActivityArgument(CLI::App* command, std::string& activity_id, std::string_view what) {
  command->add_option("activity", activity_id, std::string(what));
  command->add_option("--activity", activity_id)->group("");
}

// A command that needs an activity: 2 after saying so when none was given.
bool NeedsActivity(const std::string& activity_id, std::string_view command) {
  if (!activity_id.empty()) return true;
  std::cerr << "flashsale " << command << ": needs an activity id (flashsale " << command
            << " ID)\n";
  return false;
}

struct DeadLettersCommand {
  DeadLettersCommand(CLI::App& app, fs_app::AdminTarget& target)
      : command(app.add_subcommand(
            "dead-letters",
            "An activity's dead-lettered order intents: list them, or put one back (--retry)")),
        target(target) {
    AddActivityArgument(command, activity_id, "The activity");
    command->add_option("--retry", retry_id,
                        "Put this dead letter (its id) back on the order stream");
    AddAdminOptions(command, target);
  }
  int Run() const {
    if (!NeedsActivity(activity_id, "dead-letters")) return 2;
    return fs_app::RunDeadLetters(activity_id, retry_id, target);
  }

  CLI::App* command;
  const fs_app::AdminTarget& target;
  std::string activity_id;
  std::string retry_id;
};

struct ActivitySubcommand {
  ActivitySubcommand(CLI::App& app, fs_app::AdminTarget& target)
      : command(app.add_subcommand(
            "activity",
            "Sales and lotteries: list [--json], show ID, create FILE (JSON; - for stdin), update "
            "ID FILE, stock ID N | stock ID --items A,B, open ID, close ID, delete ID")),
        target(target) {
    command
        ->add_option("action", values.action,
                     "list | show | create | update | stock | open | close | delete")
        ->required();
    command->add_option("argument", values.argument,
                        "The activity id, or the JSON file for create");
    command->add_option("rest", values.rest,
                        "update: the JSON file of the fields to change; stock: the units to add");
    command->add_option("--items", values.items, "stock: the item ids to add (itemised stock)")
        ->delimiter(',');
    AddAdminOptions(command, target);
  }
  int Run() const { return fs_app::RunActivityCommand(values, target); }

  CLI::App* command;
  const fs_app::AdminTarget& target;
  fs_app::ActivityCommand values;
};

struct JobCommand {
  JobCommand(CLI::App& app, fs_app::AdminTarget& target)
      : command(app.add_subcommand(
            "job",
            "Run a job now, once across all instances: prewarm, reconcile or expire; prints its "
            "report")),
        target(target) {
    command->add_option("job", job, "prewarm | reconcile | expire")
        ->required()
        ->check(CLI::IsMember({"prewarm", "reconcile", "expire"}));
    AddActivityArgument(command, activity_id, "Only this activity (default: all)");
    command->add_flag("--no-repair", no_repair, "reconcile: report only, repair nothing");
    AddAdminOptions(command, target);
  }
  int Run() const { return fs_app::RunJobNow(job, activity_id, !no_repair, target); }

  CLI::App* command;
  const fs_app::AdminTarget& target;
  std::string job;
  std::string activity_id;
  bool no_repair = false;
};

// `flashsale webhooks [list|retry|key]`: parked webhook deliveries, retrying them, and the key
// receivers check signatures with.
struct WebhooksCommand {
  WebhooksCommand(CLI::App& app, fs_app::AdminTarget& target)
      : command(app.add_subcommand(
            "webhooks",
            "Webhook deliveries that kept failing: list (default), retry [--receiver URL]; key: "
            "the key receivers check X-Flashsale-Signature with (hex)")),
        target(target) {
    command->add_option("action", action, "list | retry | key")
        ->check(CLI::IsMember({"list", "retry", "key"}));
    command->add_option("--receiver", receiver, "retry: only this receiver's URL");
    command
        ->add_option("--secret", secret, "key: the server secret (default: the one in --data-dir)")
        ->envname("FLASHSALE_SECRET");
    AddAdminOptions(command, target);
  }
  int Run() const {
    if (action == "key") return fs_app::RunWebhookKey(secret, target.data_dir);
    return fs_app::RunWebhooks(action, receiver, target);
  }

  CLI::App* command;
  const fs_app::AdminTarget& target;
  std::string action = "list";
  std::string receiver;
  std::string secret;
};

// `flashsale orders export --activity ID`: every order or win of an activity, CSV or JSON, to
// stdout or a file, read a page at a time from the admin API (app/orders_export.h).
struct OrdersCommand {
  OrdersCommand(CLI::App& app, fs_app::AdminTarget& target)
      : command(app.add_subcommand("orders", "An activity's orders: export them (CSV or JSON)")),
        target(target) {
    command->require_subcommand(1);
    export_command = command->add_subcommand(
        "export",
        "Every order or lottery win of an activity (user, quantity, items or prize, state, "
        "times), read a page at a time and written as it arrives");
    export_command->add_option("--activity,activity", values.activity_id, "The activity")
        ->required();
    export_command->add_option("--format", values.format, "csv | json")
        ->check(CLI::IsMember({"csv", "json"}))
        ->capture_default_str();
    export_command
        ->add_option("--state", states,
                     "Only orders in these states: reserved, paid, cancelled (comma-separated)")
        ->delimiter(',')
        ->check(CLI::IsMember({"reserved", "paid", "cancelled"}));
    export_command->add_option("--output,-o", values.output,
                               "Write to this file (default: stdout); written as FILE.partial and "
                               "renamed once complete");
    export_command->add_option("--page-size", values.page_size, "Orders per request, 1 to 10000")
        ->check(CLI::Range(int64_t{1}, int64_t{10000}))
        ->capture_default_str();
    AddTargetOptions(export_command, target);
  }
  int Run() {
    for (const std::string& state : states) {
      values.states += (values.states.empty() ? "" : ",") + state;
    }
    return fs_app::RunOrdersExport(values, target);
  }

  CLI::App* command;
  CLI::App* export_command;
  const fs_app::AdminTarget& target;
  fs_app::OrdersExport values;
  std::vector<std::string> states;
};

// `flashsale config check [FILE]` (as nginx -t: OK and 0, or every problem and 1) and
// `flashsale config template` (the commented settings file, as the package installs it).
struct ConfigCommand {
  explicit ConfigCommand(CLI::App& app)
      : command(app.add_subcommand(
            "config", "The settings file: check one, or print the template with every setting")) {
    command->require_subcommand(1);
    check = command->add_subcommand(
        "check",
        "Check a settings file and the FLASHSALE_ variables as serve and worker would: print OK "
        "and exit 0, or every problem and exit 1");
    check->add_option("file", file,
                      "The TOML file (default: FLASHSALE_CONFIG, else "
                      "/etc/flashsale/flashsale.toml)");
    print_template = command->add_subcommand(
        "template",
        "Print a settings file with every setting commented out at its default, with its help "
        "(the packaged /etc/flashsale/flashsale.toml)");
  }

  int Run() const {
    if (print_template->parsed()) {
      std::cout << fs_app::ConfigFileTemplate();
      return 0;
    }
    std::string path = file;
    if (path.empty()) {
      const std::optional<std::string> named = fs_app::EnvFromProcess("FLASHSALE_CONFIG");
      path = named && !named->empty() ? *named : "/etc/flashsale/flashsale.toml";
    }
    const std::vector<std::string> problems = fs_app::CheckConfig(path, fs_app::EnvFromProcess);
    if (problems.empty()) {
      std::cout << path << ": OK\n";
      return 0;
    }
    for (const std::string& problem : problems) std::cerr << problem << "\n";
    std::cerr << path << ": " << problems.size()
              << (problems.size() == 1 ? " problem" : " problems") << "\n";
    return 1;
  }

  CLI::App* command;
  CLI::App* check;
  CLI::App* print_template;
  std::string file;
};

struct HelpCommand {
  explicit HelpCommand(CLI::App& app)
      : command(app.add_subcommand("help", "Print the commands, or a command's options")) {
    command->add_option("command", topic, "The command to explain");
  }

  int Run(CLI::App& app) const {
    // app.help() would describe the parsed subcommand (help itself): format the whole app.
    const std::string overview =
        app.get_formatter()->make_help(&app, "flashsale", CLI::AppFormatMode::Normal);
    if (topic.empty()) {
      std::cout << overview;
      return 0;
    }
    const CLI::App* found = nullptr;
    for (const CLI::App* subcommand : app.get_subcommands({})) {
      if (subcommand->get_name() == topic) found = subcommand;
    }
    if (found == nullptr || found == command) {
      std::cerr << "flashsale help: no command '" << topic << "'\n" << overview;
      return 2;
    }
    std::cout << found->help("flashsale");
    return 0;
  }

  CLI::App* command;
  std::string topic;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashsale: flash sales and lotteries that never oversell, lose or double an order"};
  app.require_subcommand(1);
  const std::string version_text = fmt::format(
      "flashsale {} (commit {})", flashsale::base::Version(), flashsale::base::Commit());
  app.set_version_flag("--version", version_text, "Print the version and the commit, and exit");

  const ServiceCommand serve(app, "serve", "Run the HTTP service",
                             fs_app::ServeSettings::Role::kServe);
  const ServiceCommand worker(
      app, "worker", "Run order consumers only: persist order intents from Redis to the database",
      fs_app::ServeSettings::Role::kWorker);
  const TokenCommand token(app);
  fs_app::AdminTarget target;
  const DeadLettersCommand dead(app, target);
  const ActivitySubcommand activity(app, target);
  const JobCommand job(app, target);
  const WebhooksCommand webhooks(app, target);
  OrdersCommand orders(app, target);
  auto* load = app.add_subcommand(
      "load",
      "Drive a sale at a running flashsale; report throughput, latency and outcomes; "
      "verify the sale against Redis and the database");
  const fs_app::LoadCommand load_command(*load);
  const ConfigCommand config(app);
  app.add_subcommand("version", "Print the version and the commit");
  const HelpCommand help(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // Prints the help or the problem; help is success, a usage error exits 2 like a bad setting.
    return app.exit(error) == 0 ? 0 : 2;
  }
  if (serve.command->parsed()) return serve.Run();
  if (worker.command->parsed()) return worker.Run();
  if (token.command->parsed()) return token.Run();
  if (dead.command->parsed()) return dead.Run();
  if (activity.command->parsed()) return activity.Run();
  if (job.command->parsed()) return job.Run();
  if (webhooks.command->parsed()) return webhooks.Run();
  if (orders.command->parsed()) return orders.Run();
  if (load->parsed()) return load_command.Run();
  if (config.command->parsed()) return config.Run();
  if (help.command->parsed()) return help.Run(app);
  std::cout << version_text << "\n";
  return 0;
}
