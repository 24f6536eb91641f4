#include "app/orders_export.h"

#include <fmt/format.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "app/admin_client.h"
#include "app/report_text.h"
#include "app/server_url.h"
#include "core/activity.h"
#include "store/store.h"

namespace flashsale::app {

namespace {

constexpr auto kPageTimeout = std::chrono::seconds(60);

// Where the export goes: stdout, or FILE.partial renamed to FILE once complete.
class Output {
 public:
  explicit Output(std::string path) : path_(std::move(path)) {}
  ~Output() {
    if (file_ != nullptr && file_ != stdout) {
      std::fclose(file_);
      std::remove(Partial().c_str());  // not finished: no file that looks complete
    }
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  bool Open() {
    file_ = path_.empty() ? stdout : std::fopen(Partial().c_str(), "wb");
    return file_ != nullptr;
  }
  bool Write(std::string_view bytes) {
    return bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), file_) == bytes.size();
  }
  // Flushes and closes; the file renamed into place. False (errno set) when that failed.
  bool Finish() {
    if (file_ == stdout) return std::fflush(stdout) == 0;
    std::FILE* file = file_;
    file_ = nullptr;
    const bool closed = std::fclose(file) == 0;
    if (closed && std::rename(Partial().c_str(), path_.c_str()) == 0) return true;
    const int error = errno;
    std::remove(Partial().c_str());
    errno = error;
    return false;
  }
  std::string Partial() const { return path_ + ".partial"; }
  std::string Name() const { return path_.empty() ? "stdout" : path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// A page's orders appended to `out` as JSON, an order per line after the first: false when the
// page is not {"orders": [...], "next": ...}. The next cursor into `next`, `count` raised by the
// page's orders.
bool AppendJsonPage(std::string_view body, bool& first, std::string& out, std::string& next,
                    int64_t& count) {
  boost::system::error_code ec;
  const boost::json::value page = boost::json::parse(body, ec);
  const boost::json::object* object = ec ? nullptr : page.if_object();
  const boost::json::value* orders = object ? object->if_contains("orders") : nullptr;
  const boost::json::value* cursor = object ? object->if_contains("next") : nullptr;
  if (orders == nullptr || !orders->is_array() || cursor == nullptr) return false;
  for (const boost::json::value& order : orders->as_array()) {
    ++count;
    out.append(first ? "\n" : ",\n");
    first = false;
    out.append(boost::json::serialize(order));
  }
  next = cursor->is_string() ? std::string(cursor->as_string()) : std::string();
  return true;
}

// The records (rows) of CSV text: its line ends outside quotes.
int64_t CsvRecords(std::string_view text) {
  int64_t records = 0;
  bool quoted = false;
  for (const char c : text) {
    if (c == '"') quoted = !quoted;
    if (c == '\n' && !quoted) ++records;
  }
  return records;
}

}  // namespace

int RunOrdersExport(const OrdersExport& options, const AdminTarget& target) {
  if (!core::IsValidActivityId(options.activity_id)) {
    std::cerr << "flashsale orders export: '" << options.activity_id << "' is not an activity id\n";
    return 2;
  }
  if (options.format != "csv" && options.format != "json") {
    std::cerr << "flashsale orders export: --format takes csv or json\n";
    return 2;
  }
  if (options.page_size < 1 || options.page_size > store::kMaxOrdersPerPage) {
    std::cerr << "flashsale orders export: --page-size takes 1 to " << store::kMaxOrdersPerPage
              << "\n";
    return 2;
  }
  const std::string token = AdminTokenOf(target);
  if (token.empty()) return 2;
  const ServerUrl url = FindServerUrl(target.url, target.data_dir, EnvFromProcess);
  Output output(options.output);
  if (!output.Open()) {
    std::cerr << "flashsale orders export: cannot write " << output.Partial() << ": "
              << std::strerror(errno) << "\n";
    return 1;
  }
  const bool csv = options.format == "csv";
  std::string base = fmt::format("/api/v1/admin/activities/{}/orders?format={}&limit={}",
                                 options.activity_id, options.format, options.page_size);
  if (!options.states.empty()) base += "&state=" + options.states;

  std::string cursor;
  std::string header;  // CSV: the first page's header row, written once
  std::string chunk;
  bool first = true;
  int64_t pages = 0;
  int64_t orders = 0;
  if (!csv && !output.Write("[")) return 1;
  do {
    const std::string path = cursor.empty() ? base : base + "&after=" + cursor;
    auto answer = CallAdmin(url.url, "GET", path, token, {}, kPageTimeout);
    if (!answer.ok()) {
      std::cerr << answer.error().message << " " << WhereTheUrlCameFrom(url, target.data_dir)
                << "\n";
      return 1;
    }
    if (answer->status != 200) {
      std::cerr << "HTTP " << answer->status << ": " << AnswerText(answer->body);
      return 1;
    }
    ++pages;
    std::string_view body = answer->body;
    chunk.clear();
    if (csv) {
      const size_t end = body.find('\n');
      const std::string_view row = body.substr(0, end == std::string_view::npos ? end : end + 1);
      if (header.empty()) {
        header = row;
      } else if (row != header) {
        std::cerr << "flashsale orders export: page " << pages
                  << " has other columns than the first; export again\n";
        return 1;
      } else {
        body.remove_prefix(row.size());
      }
      cursor = std::move(answer->next_cursor);
    } else if (!AppendJsonPage(body, first, chunk, cursor, orders)) {
      std::cerr << "flashsale orders export: page " << pages
                << " is not a page of orders: " << AnswerText(answer->body);
      return 1;
    }
    if (csv) orders += CsvRecords(body) - (pages == 1 ? 1 : 0);  // the header row, once
    if (!output.Write(csv ? body : std::string_view(chunk))) {
      std::cerr << "flashsale orders export: cannot write " << output.Name() << ": "
                << std::strerror(errno) << "\n";
      return 1;
    }
  } while (!cursor.empty());
  if ((!csv && !output.Write(first ? "]\n" : "\n]\n")) || !output.Finish()) {
    std::cerr << "flashsale orders export: cannot write " << output.Name() << ": "
              << std::strerror(errno) << "\n";
    return 1;
  }
  if (!options.output.empty()) {
    std::cerr << "activity " << options.activity_id << ": " << orders << " order(s) in " << pages
              << " page(s) written to " << options.output << "\n";
  }
  return 0;
}

}  // namespace flashsale::app
