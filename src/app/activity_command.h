#pragma once
// `flashsale activity ...`: the admin API's activities from the command line, against a running
// serve. On a terminal `list` prints a table and the other actions the activity's status as
// text; in a pipe or with --json, the API's JSON (app/admin_commands.h).
//   list                     every activity: id, kind, state, remaining, reserved now, total, ...
//   show ID                  one activity's status
//   create FILE|-            the JSON body of POST /api/v1/admin/activities (- for stdin)
//   update ID FILE|-         the JSON body of PATCH /api/v1/admin/activities/ID
//   stock ID N               add N units (counted stock)
//   stock ID --items A,B     add item ids (itemised stock)
//   open ID | close ID       open or close (pause) the sale
//   delete ID                delete an activity that sold nothing (DELETE .../activities/ID)

#include <string>
#include <vector>

#include "app/admin_commands.h"

namespace flashsale::app {

struct ActivityCommand {
  std::string action;
  std::string argument;            // the activity id, or the JSON file of create
  std::vector<std::string> rest;   // update: the JSON file; stock: the units
  std::vector<std::string> items;  // stock --items
};

// The process exit code: 0 on a 2xx answer, 1 on another answer or no answer, 2 on bad usage.
int RunActivityCommand(const ActivityCommand& command, const AdminTarget& target);

}  // namespace flashsale::app
