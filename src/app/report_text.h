#pragma once
// What the admin API answers, as text for people: the admin subcommands (`flashsale activity`,
// `job`, `dead-letters`) print these on a terminal and the API's JSON otherwise (or with
// --json), as kubectl and redis-cli do. Each function takes the API's JSON body as it came; a
// body it does not understand comes back unchanged, so nothing the server said is ever lost.
// Times are shown in UTC, to the minute.

#include <cstdint>
#include <string>
#include <string_view>

namespace flashsale::app {

// GET /api/v1/admin/activities: one line per activity (id, kind, state, remaining, reserved now,
// total, limit, window, title) under a header line. `now_ms` decides "ended" and "upcoming".
std::string ActivityTableText(std::string_view body, int64_t now_ms);

// One activity's status (GET, POST, PATCH of /api/v1/admin/activities/{id} and its actions):
// "label  value" lines for its definition, its units in Redis and in the record, the order
// pipeline and the last reconciliation.
std::string ActivityText(std::string_view body, int64_t now_ms);

// POST /api/v1/admin/jobs/{job}: the job and its fence, then one line per activity.
std::string JobReportText(std::string_view body);

// GET .../{id}/dead-letters: a table of the dead letters (or a line saying there are none);
// POST .../{entry}/retry: what was put back where.
std::string DeadLettersText(std::string_view body);

// Any other answer (deleted, an error): its words on one line, e.g. "deleted demo" or
// "not_found: no activity 'x'".
std::string AnswerText(std::string_view body);

// "2026-01-31 10:00" (UTC), or the number itself when it is not a time.
std::string UtcMinute(int64_t ms);

}  // namespace flashsale::app
