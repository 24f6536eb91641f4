#include "store/mysql/events.h"

#include <string>
#include <vector>

namespace flashsale::store::mysql {

using base::ErrorCode;
using base::MakeError;

namespace {

constexpr size_t kMaxEventsPerInsert = 500;  // rows of one multi-row INSERT

}  // namespace

base::Status WriteEvents(Connection& conn, std::span<const records::EventDraft> events,
                         int64_t now_ms) {
  if (events.empty()) return {};
  const auto count = static_cast<int64_t>(events.size());
  Statement bump(conn, std::string(records::kBumpEventSeq), "number events");
  if (auto run = bump.Execute({count}); !run) return run;
  Statement read(conn, std::string(records::kReadEventSeq), "number events");
  if (auto run = read.Execute(std::span<const Param>()); !run) return run;
  if (read.rows().empty()) return MakeError(ErrorCode::kInternal, "no order_event_seq row");
  int64_t seq = read.rows()[0].Int(0) - count;
  // The ids must outlive the parameters that view them.
  std::vector<std::string> ids;
  ids.reserve(events.size());
  for (const records::EventDraft& event : events) {
    ids.push_back(records::EventId(event.order_id, event.state));
  }
  std::vector<Param> params;
  for (size_t start = 0; start < events.size(); start += kMaxEventsPerInsert) {
    const size_t end = std::min(events.size(), start + kMaxEventsPerInsert);
    std::string sql(records::kInsertEvent);
    for (size_t i = start + 1; i < end; ++i) sql += ", (?, ?, ?, ?, ?, ?)";
    params.clear();
    for (size_t i = start; i < end; ++i) {
      const records::EventDraft& event = events[i];
      params.insert(params.end(),
                    {Param(++seq), Param(std::string_view(ids[i])), Param(event.order_id),
                     Param(event.activity_id), Param(event.state), Param(now_ms)});
    }
    Statement insert(conn, std::move(sql), "write events");
    if (auto run = insert.Execute(params); !run) {
      // A number taken already: on Galera, a writer on another node took the same numbers (the
      // lock row does not lock across nodes) and its events were applied here first. The same
      // conflict certification finds at COMMIT: reported as one (ER_LOCK_DEADLOCK, 1213), so the
      // call runs again on the numbers as they are now (MySqlStore::Run). Event ids cannot clash
      // (each change happens once; RecordRefused skips those written).
      if (run.error().code == ErrorCode::kAlreadyExists) {
        return conn.Fail("write events", 1213, run.error().message);
      }
      return run;
    }
  }
  return {};
}

}  // namespace flashsale::store::mysql
