#pragma once
// `flashsale orders export`: every order (or lottery win) of an activity, written as it arrives,
// page after page of GET /api/v1/admin/activities/{id}/orders (the export, issue 35 point 3). One
// page is in memory at a time, so the process's memory stays the same whatever the activity's
// size. It calls the admin API, as the other admin commands do, rather than opening the record:
// the command needs no database URL or password, works the same on SQLite and MySQL, and reads
// what the service would answer.

#include <cstdint>
#include <string>

#include "app/admin_commands.h"

namespace flashsale::app {

struct OrdersExport {
  std::string activity_id;
  std::string format = "csv";  // csv | json
  std::string states;          // reserved,paid,cancelled (any of them); empty: every state
  std::string output;        // a file (written as FILE.partial, renamed at the end); empty: stdout
  int64_t page_size = 5000;  // orders per page (1 to store::kMaxOrdersPerPage)
};

// CSV: the route's header row once, then every page's rows. JSON: one array, an order per line.
// Exit code 0 when every page was written; 1 when a page could not be read (the output file is
// then removed, stdout holds what was written), 2 for bad options or no admin token.
int RunOrdersExport(const OrdersExport& options, const AdminTarget& target);

}  // namespace flashsale::app
