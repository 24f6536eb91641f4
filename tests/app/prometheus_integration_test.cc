// flashsale as Prometheus sees it: a `serve --demo` and a `worker` (each with its own /metrics)
// as processes, their expositions checked by `promtool check metrics`, and Debian's prometheus
// server started on loopback (a generated config: free port, temporary storage, 1 s scrapes)
// scraping both; a purchase must show up in prometheus's query API. The sample
// deploy/prometheus/prometheus.yml, run against a single serve (a one-process install), has every
// target up and no alert pending. The alert rules and the Grafana dashboard in deploy/ must name
// only metrics the two processes expose.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_to.hpp>
#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"
#include "support/flashsale_process.h"
#include "support/http_client.h"

namespace flashsale {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FlashsaleProcess;
using testing::FreePort;
using testing::HttpClient;
using testing::ReadFile;
using testing::TempDir;

constexpr auto kStartupTimeout = seconds(30);
constexpr auto kScrapeTimeout = seconds(90);

std::string UrlEncode(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

// Runs `command` with sh; its exit code (-1 if it did not end within `timeout`), output in `log`.
int RunShell(const std::string& command, const std::string& log, milliseconds timeout) {
  auto child = base::Subprocess::Spawn({"sh", "-c", command}, log);
  if (!child.ok()) return -1;
  if (!child->Wait(timeout)) return -1;
  const auto status = child->exit_status();
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

// Metric names an exposition declares (# TYPE lines) or has samples of.
std::set<std::string> ExposedNames(const std::string& exposition) {
  std::set<std::string> names;
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      names.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (!line.empty() && line[0] != '#') {
      names.insert(line.substr(0, line.find_first_of("{ ")));
    }
  }
  return names;
}

// The flashsale_* and process_* names a PromQL expression reads (histogram series by their family).
std::vector<std::string> NamesIn(const std::string& expr) {
  static const std::regex kName("\\b(flashsale_[a-z0-9_]+|process_[a-z0-9_]+)");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kName);
       it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1];
    for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (name.size() > suffix.size() && name.ends_with(suffix)) {
        name.resize(name.size() - suffix.size());
        break;
      }
    }
    names.push_back(name);
  }
  return names;
}

class PrometheusTest : public ::testing::Test {
 protected:
  void StartFlashsale() {
    ASSERT_NO_FATAL_FAILURE(StartServe());
    worker_port_ = FreePort();
    worker_.emplace(FLASHSALE_BINARY,
                    std::vector<std::string>{"worker", "--data-dir", dir_ / "data", "--listen",
                                             fmt::format("127.0.0.1:{}", worker_port_)},
                    dir_ / "worker.log");
    ASSERT_TRUE(testing::WaitHealthy(*worker_, worker_port_, kStartupTimeout));
  }

  void StartServe() {
    serve_port_ = FreePort();
    serve_.emplace(
        FLASHSALE_BINARY,
        std::vector<std::string>{"serve", "--demo", "--data-dir", dir_ / "data", "--listen",
                                 fmt::format("127.0.0.1:{}", serve_port_), "--threads", "1"},
        dir_ / "serve.log", dir_ / "data");
    ASSERT_TRUE(testing::WaitHealthy(*serve_, serve_port_, kStartupTimeout));
  }

  std::string Metrics(uint16_t port) {
    HttpClient client("127.0.0.1", port);
    auto reply = client.Get("/metrics");
    EXPECT_EQ(reply.status, 200) << reply.error;
    return reply.body;
  }

  // The `data` object of an API reply, or an empty one when prometheus did not answer.
  json::object Data(HttpClient& prometheus, const std::string& target) {
    auto reply = prometheus.Get(target);
    if (reply.status != 200) return {};
    boost::system::error_code error;
    auto value = json::parse(reply.body, error);
    if (error || !value.is_object()) return {};
    const auto* data = value.as_object().if_contains("data");
    return data != nullptr && data->is_object() ? data->as_object() : json::object{};
  }

  // The `result` array of an instant query, or an empty one when prometheus did not answer.
  json::array Query(HttpClient& prometheus, const std::string& promql) {
    const json::object data = Data(prometheus, "/api/v1/query?query=" + UrlEncode(promql));
    const auto* result = data.if_contains("result");
    return result != nullptr && result->is_array() ? result->as_array() : json::array{};
  }

  TempDir dir_{"fs-prom"};
  uint16_t serve_port_ = 0;
  uint16_t worker_port_ = 0;
  std::optional<FlashsaleProcess> serve_;
  std::optional<FlashsaleProcess> worker_;
};

TEST_F(PrometheusTest, PromtoolAcceptsTheExpositionsOfServeAndWorker) {
  ASSERT_NO_FATAL_FAILURE(StartFlashsale());
  HttpClient buyer("127.0.0.1", serve_port_);
  ASSERT_EQ(buyer.Post("/api/v1/activities/demo/purchase", "", {{"X-User-Id", "alice"}}).status,
            200);
  for (const auto& [name, port] : {std::pair{"serve", serve_port_}, {"worker", worker_port_}}) {
    const std::string exposition = Metrics(port);
    const std::string file = dir_ / fmt::format("{}.prom", name);
    std::ofstream(file) << exposition;
    const std::string log = dir_ / fmt::format("promtool-{}.log", name);
    EXPECT_EQ(RunShell("promtool check metrics < " + file, log, seconds(60)), 0) << name << ":\n"
                                                                                 << ReadFile(log);
    for (std::string_view family :
         {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
          "process_start_time_seconds", "flashsale_build_info{version=", "flashsale_redis_up 1",
          "flashsale_db_up 1", "flashsale_activity_remaining_units{activity=\"demo\"}",
          "flashsale_activity_reserved_units{activity=\"demo\"}",
          "flashsale_activity_persisted_units{activity=\"demo\"}",
          "flashsale_activity_frozen{activity=\"demo\"} 0"}) {
      EXPECT_NE(exposition.find(family), std::string::npos) << name << " lacks " << family;
    }
  }
  // The worker serves the operations routes only.
  HttpClient worker("127.0.0.1", worker_port_);
  EXPECT_EQ(worker.Get("/readyz").status, 200);
  EXPECT_EQ(worker.Get("/api/v1/activities").status, 404);
  EXPECT_EQ(worker.Post("/api/v1/activities/demo/purchase", "", {{"X-User-Id", "bob"}}).status,
            404);
}

TEST_F(PrometheusTest, PrometheusScrapesServeAndWorkerAndSeesThePurchase) {
  ASSERT_NO_FATAL_FAILURE(StartFlashsale());
  const uint16_t prometheus_port = FreePort();
  const std::string config = dir_ / "prometheus.yml";
  std::ofstream(config) << fmt::format(
      "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      "scrape_configs:\n"
      "  - job_name: flashsale\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n"
      "  - job_name: flashsale-worker\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
      serve_port_, worker_port_);
  auto prometheus = base::Subprocess::Spawn(
      {"prometheus", "--config.file=" + config, "--storage.tsdb.path=" + (dir_ / "tsdb"),
       fmt::format("--web.listen-address=127.0.0.1:{}", prometheus_port)},
      dir_ / "prometheus.log");
  ASSERT_TRUE(prometheus.ok()) << prometheus.error().message;

  HttpClient buyer("127.0.0.1", serve_port_);
  auto bought = buyer.Post("/api/v1/activities/demo/purchase", "", {{"X-User-Id", "alice"}});
  ASSERT_EQ(bought.status, 200);
  ASSERT_NE(bought.body.find("\"reserved\""), std::string::npos) << bought.body;

  HttpClient client("127.0.0.1", prometheus_port);
  const auto until = std::chrono::steady_clock::now() + kScrapeTimeout;
  double purchases = 0;
  bool worker_up = false;
  bool persisted = false;
  while (std::chrono::steady_clock::now() < until && !(purchases >= 1 && worker_up && persisted)) {
    ASSERT_TRUE(prometheus->Running()) << ReadFile(dir_ / "prometheus.log");
    auto counter =
        Query(client, R"(sum(flashsale_http_requests_total{route="purchase",status="reserved"}))");
    if (counter.size() == 1) {
      purchases = std::stod(json::value_to<std::string>(counter[0].at("value").at(1)));
    }
    auto up = Query(client, R"(up{job="flashsale-worker"} == 1)");
    worker_up = up.size() == 1;
    // The worker or serve's consumer wrote the order; both report the record's units.
    auto units = Query(client, R"(flashsale_activity_persisted_units{activity="demo"} >= 1)");
    persisted = !units.empty();
    std::this_thread::sleep_for(milliseconds(500));
  }
  EXPECT_EQ(purchases, 1) << ReadFile(dir_ / "prometheus.log");
  EXPECT_TRUE(worker_up) << "prometheus never scraped the worker";
  EXPECT_TRUE(persisted) << "prometheus never saw the order in the record";

  prometheus->Terminate(seconds(10));
  EXPECT_FALSE(prometheus->Running());
}

// A one-process install as the README describes it (`flashsale serve`, nothing else) scraped with
// the shipped prometheus.yml and alerts.yml, only the serve's address and the intervals changed:
// every target it lists is up, and once the rules have been evaluated with the scrape in hand no
// alert is pending or firing (a worker target nobody listens on would be down, and
// FlashsaleTargetDown pending).
TEST_F(PrometheusTest, TheSampleConfigOnAOneProcessInstallHasEveryTargetUpAndNoAlert) {
  ASSERT_NO_FATAL_FAILURE(StartServe());
  std::string config = ReadFile(FLASHSALE_SOURCE_DIR "/deploy/prometheus/prometheus.yml");
  for (const auto& [from, to] : {std::pair<std::string, std::string>{
                                     "127.0.0.1:8080", fmt::format("127.0.0.1:{}", serve_port_)},
                                 {"scrape_interval: 15s", "scrape_interval: 1s"},
                                 {"evaluation_interval: 15s", "evaluation_interval: 1s"}}) {
    const size_t at = config.find(from);
    ASSERT_NE(at, std::string::npos) << "prometheus.yml lacks " << from;
    config.replace(at, from.size(), to);
  }
  std::ofstream(dir_ / "prometheus.yml") << config;
  std::ofstream(dir_ / "alerts.yml")
      << ReadFile(FLASHSALE_SOURCE_DIR "/deploy/prometheus/alerts.yml");
  const uint16_t prometheus_port = FreePort();
  auto prometheus =
      base::Subprocess::Spawn({"prometheus", "--config.file=" + (dir_ / "prometheus.yml"),
                               "--storage.tsdb.path=" + (dir_ / "tsdb"),
                               fmt::format("--web.listen-address=127.0.0.1:{}", prometheus_port)},
                              dir_ / "prometheus.log");
  ASSERT_TRUE(prometheus.ok()) << prometheus.error().message;

  HttpClient client("127.0.0.1", prometheus_port);
  // The group's last evaluation time, "" until there is one.
  auto last_evaluation = [&]() -> std::string {
    const json::object data = Data(client, "/api/v1/rules");
    const auto* groups = data.if_contains("groups");
    if (groups == nullptr || !groups->is_array() || groups->as_array().empty()) return "";
    const auto* at = groups->as_array()[0].as_object().if_contains("lastEvaluation");
    return at != nullptr && at->is_string() ? std::string(at->as_string()) : "";
  };
  // Every target scraped at least once (`up` has a sample of each), then one evaluation after.
  const auto until = std::chrono::steady_clock::now() + kScrapeTimeout;
  json::array up;
  std::string scraped_by;
  bool evaluated = false;
  while (std::chrono::steady_clock::now() < until && !evaluated) {
    ASSERT_TRUE(prometheus->Running()) << ReadFile(dir_ / "prometheus.log");
    if (scraped_by.empty()) {
      json::array targets = Query(client, "up");
      const json::object listed = Data(client, "/api/v1/targets");
      const auto* active = listed.if_contains("activeTargets");
      const size_t expected =
          active != nullptr && active->is_array() ? active->as_array().size() : 0;
      if (expected > 0 && targets.size() == expected) {
        up = std::move(targets);
        scraped_by = last_evaluation();
        if (scraped_by.empty()) scraped_by = "none";
      }
    } else {
      const std::string now = last_evaluation();
      evaluated = !now.empty() && now != scraped_by;
    }
    std::this_thread::sleep_for(milliseconds(300));
  }
  ASSERT_TRUE(evaluated) << "prometheus never scraped every target and evaluated the rules\n"
                         << ReadFile(dir_ / "prometheus.log");
  ASSERT_FALSE(up.empty());
  for (const auto& sample : up) {
    const auto& metric = sample.at("metric").as_object();
    EXPECT_EQ(json::value_to<std::string>(sample.at("value").at(1)), "1")
        << json::value_to<std::string>(metric.at("job")) << " at "
        << json::value_to<std::string>(metric.at("instance")) << " is down";
  }
  const json::object alerts = Data(client, "/api/v1/alerts");
  ASSERT_TRUE(alerts.contains("alerts")) << "no answer from /api/v1/alerts";
  EXPECT_TRUE(alerts.at("alerts").as_array().empty())
      << "alerts pending or firing: " << json::serialize(alerts.at("alerts"));

  prometheus->Terminate(seconds(10));
  EXPECT_FALSE(prometheus->Running());
}

TEST_F(PrometheusTest, AlertRulesAndDashboardNameOnlyExposedMetrics) {
  ASSERT_NO_FATAL_FAILURE(StartFlashsale());
  std::set<std::string> exposed = ExposedNames(Metrics(serve_port_));
  exposed.merge(ExposedNames(Metrics(worker_port_)));

  // Every rule's expr, on its line or folded over the lines below (`expr: >-`).
  std::vector<std::string> exprs;
  std::istringstream rules(ReadFile(FLASHSALE_SOURCE_DIR "/deploy/prometheus/alerts.yml"));
  size_t folded_indent = std::string::npos;  // the folded expr's key column while in one
  for (std::string line; std::getline(rules, line);) {
    const size_t indent = line.find_first_not_of(' ');
    if (folded_indent != std::string::npos) {
      if (indent != std::string::npos && indent > folded_indent) {
        exprs.back() += " " + line.substr(indent);
        continue;
      }
      folded_indent = std::string::npos;
    }
    const size_t at = line.find("expr:");
    if (at == std::string::npos) continue;
    const std::string rest = line.substr(at + 5);
    if (rest == " >-" || rest == " >" || rest == " |" || rest == " |-") {
      folded_indent = at;
      exprs.emplace_back();
    } else {
      exprs.push_back(rest);
    }
  }
  EXPECT_GE(exprs.size(), 10U);

  boost::system::error_code error;
  const auto dashboard =
      json::parse(ReadFile(FLASHSALE_SOURCE_DIR "/deploy/grafana/flashsale-dashboard.json"), error);
  ASSERT_FALSE(error) << "the dashboard is not JSON: " << error.message();
  size_t dashboard_exprs = 0;
  for (const auto& panel : dashboard.at("panels").as_array()) {
    for (const auto& target : panel.at("targets").as_array()) {
      exprs.push_back(json::value_to<std::string>(target.at("expr")));
      ++dashboard_exprs;
    }
  }
  EXPECT_GE(dashboard_exprs, 10U);
  for (const std::string& expr : exprs) {
    const auto names = NamesIn(expr);
    EXPECT_FALSE(names.empty() && expr.find("up{") == std::string::npos)
        << "names no flashsale metric: " << expr;
    for (const std::string& name : names) {
      EXPECT_TRUE(exposed.contains(name)) << name << " (in " << expr << ") is not exposed";
    }
  }
}

}  // namespace
}  // namespace flashsale
