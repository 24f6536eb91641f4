#include "app/report_text.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

namespace flashsale::app {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;  // 2027-01-15 08:00 UTC

bool Says(const std::string& text, const std::string& words) {
  return text.find(words) != std::string::npos;
}

// One line of an activity's status: the label, then the value at column 15.
std::string Line(std::string_view label, std::string_view value) {
  return fmt::format("{:<14}{}", label, value);
}

TEST(ReportTextTest, AnActivityStatusReadsAsLabelledLines) {
  const std::string body = R"({"activity":{"id":"demo","title":"Demo flash sale","kind":"counted",
    "start_ms":1799999940000,"end_ms":1800003600000,"per_user_limit":1,"open":true,
    "total_units":100,"version":1,"payment_window_ms":60000,"user_rate":{"per_second":5,"burst":10},
    "address_rate":null,"created_ms":1,"updated_ms":1},
    "redis":{"loaded":true,"remaining":97,"reserved":4,"released":1,"orders":3,"buyers":3},
    "pipeline":{"stream_length":3,"pending":0,"lag":0,"dead_letters":0},
    "persisted":{"orders":3,"units":3,"cancelled_units":0},
    "reconciliation":{"activity_id":"demo","loaded":true,"initial":100,"remaining":97,
      "not_in_db":0,"db_live":3,"cancelled_not_returned":0,"drift":0,"returned":0,"reappended":0,
      "rebuilt":false,"notes":[]},"frozen":false,"oversold_units":0})";
  const std::string text = ActivityText(body, kNow);
  EXPECT_EQ(text.find('{'), std::string::npos) << text;
  EXPECT_TRUE(Says(text, Line("activity", "demo: Demo flash sale\n"))) << text;
  EXPECT_TRUE(Says(text, Line("state", "open\n"))) << text;
  EXPECT_TRUE(Says(text, "2027-01-15 07:59 to 2027-01-15 09:00 UTC")) << text;
  EXPECT_TRUE(Says(text, Line("remaining", "97 of 100 (3 reserved now)"))) << text;
  EXPECT_TRUE(Says(text, Line("payment", "within 1 min of reserving"))) << text;
  EXPECT_TRUE(Says(text, Line("user rate", "5/s, burst 10"))) << text;
  EXPECT_TRUE(Says(text, Line("persisted", "3 orders, 3 units (0 cancelled)"))) << text;
  EXPECT_TRUE(Says(text, Line("pipeline", "stream 3, lag 0, pending 0, dead letters 0"))) << text;
  EXPECT_TRUE(Says(text, "drift 0: initial 100 = remaining 97 + not in db 0 + live in db 3"))
      << text;
  EXPECT_FALSE(Says(text, "FROZEN")) << text;
}

TEST(ReportTextTest, ALotteryShowsItsPrizesAndAFrozenSaleSaysSo) {
  const std::string body = R"({"activity":{"id":"lot","title":"Lottery","kind":"lottery",
    "start_ms":1,"end_ms":1900000000000,"per_user_limit":2,"open":false,"total_units":11,
    "version":1,"payment_window_ms":0,"prizes":[{"id":"mug","name":"A mug","weight":5,"stock":10},
    {"id":"phone","name":"A phone","weight":1,"stock":1}],"no_prize_weight":94,
    "admission":"queue","queue_capacity":500,"user_rate":null,"address_rate":null,
    "created_ms":1,"updated_ms":1},"redis":null,"redis_error":"unavailable",
    "pipeline":null,"persisted":null,"reconciliation":null,"frozen":true,"oversold_units":2})";
  const std::string text = ActivityText(body, kNow);
  EXPECT_TRUE(Says(text, Line("state", "closed\n"))) << text;
  EXPECT_TRUE(Says(text, Line("limit", "2 draws per user"))) << text;
  EXPECT_TRUE(Says(text, Line("prize", "mug \"A mug\": weight 5, stock 10"))) << text;
  EXPECT_TRUE(Says(text, Line("no prize", "weight 94"))) << text;
  EXPECT_TRUE(Says(text, Line("admission", "queue (up to 500 waiting)"))) << text;
  EXPECT_TRUE(Says(text, Line("remaining", "- (Redis: unavailable)"))) << text;
  EXPECT_TRUE(Says(text, "FROZEN")) << text;
  EXPECT_TRUE(Says(text, Line("OVERSOLD", "2 units"))) << text;
}

TEST(ReportTextTest, TheListIsATable) {
  const std::string body = R"({"activities":[{"activity":{"id":"a","title":"First","kind":"counted",
    "start_ms":1,"end_ms":1700000000000,"per_user_limit":1,"open":true,"total_units":5},
    "redis":{"remaining":5,"reserved":0,"released":0}},
    {"activity":{"id":"later","title":"Later","kind":"items","start_ms":1900000000000,
    "end_ms":1900003600000,"per_user_limit":2,"open":true,"total_units":3},"redis":null}]})";
  const std::string text = ActivityTableText(body, kNow);
  EXPECT_EQ(text.rfind("ID     KIND     STATE           REMAINING", 0), 0u) << text;
  EXPECT_TRUE(Says(text, "\na      counted  ended           5          0  ")) << text;
  EXPECT_TRUE(Says(text, "\nlater  items    open, upcoming  -          -  ")) << text;
}

TEST(ReportTextTest, JobReportsSayPerActivityWhatHappened) {
  const std::string reconcile = R"({"job":"reconcile","fence":7,"activities":[
    {"activity_id":"demo","loaded":true,"initial":10,"remaining":6,"not_in_db":1,"db_live":2,
     "cancelled_not_returned":0,"drift":1,"returned":0,"reappended":2,"rebuilt":false,
     "notes":["one note"]}]})";
  std::string text = JobReportText(reconcile);
  EXPECT_TRUE(Says(text, "reconcile (fence 7): 1 activity\n")) << text;
  EXPECT_TRUE(Says(text, "  demo  drift 1: initial 10 = remaining 6 + not in db 1 + live in db 2"))
      << text;
  EXPECT_TRUE(Says(text, "repaired: 2 appended again; one note")) << text;
  text = JobReportText(R"({"job":"prewarm","fence":1,"activities":[
    {"activity_id":"a","action":"loaded","units":5},
    {"activity_id":"b","action":"none","why":"loaded already"}]})");
  EXPECT_TRUE(Says(text, "  a  loaded 5 units\n  b  none: loaded already\n")) << text;
  text = JobReportText(R"({"job":"expire","fence":2,"activities":[
    {"activity_id":"p","payment_window_ms":60000,"cancelled":2,"units_returned":2,
     "not_returned_yet":0}]})");
  EXPECT_TRUE(Says(text, "  p  2 orders cancelled, 2 units returned, 0 not returned yet")) << text;
}

TEST(ReportTextTest, DeadLettersAreATableOrSayThereAreNone) {
  EXPECT_EQ(DeadLettersText(R"({"activity_id":"demo","dead_letters":[]})"),
            "demo: no dead letters\n");
  const std::string text = DeadLettersText(R"({"activity_id":"demo","dead_letters":[
    {"id":"1800000000000-0","original_id":"1-0","error":"database refused","deliveries":"5",
     "dead_ms":"1800000000000","o":"01ORDER|ann|1|"}]})");
  EXPECT_TRUE(Says(text, "demo: 1 dead letter (flashsale dead-letters demo --retry ID puts one"))
      << text;
  EXPECT_TRUE(Says(text,
                   "1800000000000-0  01ORDER  ann   5           2027-01-15 08:00  database "
                   "refused"))
      << text;
  EXPECT_EQ(DeadLettersText(R"({"dead_id":"5-0","stream_id":"9-0"})"),
            "put dead letter 5-0 back on the order stream as 9-0\n");
}

TEST(ReportTextTest, OtherAnswersAreTheirWordsAndTheUnknownComesBackAsItIs) {
  EXPECT_EQ(AnswerText(R"({"status":"deleted","activity_id":"oops"})"), "deleted oops\n");
  EXPECT_EQ(AnswerText(R"({"status":"not_found","error":"no activity 'x'"})"),
            "not_found: no activity 'x'\n");
  EXPECT_EQ(ActivityText("not json", kNow), "not json\n");
  EXPECT_EQ(JobReportText(R"({"other":1})"), "{\"other\":1}\n");
}

}  // namespace
}  // namespace flashsale::app
