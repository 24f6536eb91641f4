// Issue 35, point 3: the export, GET /api/v1/admin/activities/{id}/orders, over real HTTP against
// a real server whose SQLite record is written by a second connection as the order pipeline
// would. The CSV is read back by Python's csv module (a reader nobody here wrote), with user ids
// that hold commas, quotes, line breaks and spreadsheet formulas (the record takes any text).

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstdio>
#include <fstream>
#include <set>

#include "server/server_fixture.h"
#include "store/sqlite_store.h"

namespace flashsale::server {
namespace {

namespace json = boost::json;
using testing::RedisServer;
using testing::ServerFixture;

constexpr std::string_view kHeader =
    "order_id,activity_id,user_id,quantity,items,prize,draw_no,state,refund_due,compensation_due,"
    "created_ms,persisted_ms,paid_ms,cancelled_ms";

const std::string kCommaQuoteBreak = "a,\"b\"\nc";
const std::string kHyperlink = "=HYPERLINK(\"http://evil.example\",\"x\")";

class OrdersHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }
  void SetUp() override {
    server_ = std::make_unique<ServerFixture>(*redis_);
    auto record = store::SqliteStore::Open(server_->data_dir() + "/flashsale.db");
    ASSERT_TRUE(record.ok()) << record.error().ToString();
    record_ = std::move(*record);
    ASSERT_EQ(Admin("POST", "/api/v1/admin/activities", R"({"id":"shop","stock":100,
                    "per_user_limit":5})")
                  .status,
              201);
    ASSERT_EQ(Admin("POST", "/api/v1/admin/activities", R"({"id":"luck","kind":"lottery",
                    "prizes":[{"id":"gold","name":"Gold","weight":1,"stock":3}]})")
                  .status,
              201);
    // o1 and o2 paid, o3 cancelled (expired), o4 and o5 reserved; w1 a lottery's win.
    std::vector<store::OrderRecord> orders = {
        Order("o1", "alice", 1000, {"C1", "C2"}), Order("o2", kCommaQuoteBreak, 1001),
        Order("o3", kHyperlink, 1002), Order("o4", "-2+3", 1003), Order("o5", "@SUM(1)", 1004)};
    orders[0].quantity = 2;
    store::OrderRecord win = Order("w1", "bob", 1005, {"gold"});
    win.activity_id = "luck";
    win.draw_no = 1;
    orders.push_back(win);
    ASSERT_TRUE(record_->InsertOrders(orders, 1500).ok());
    ASSERT_EQ(*record_->PayOrder("o1", 2000), store::PayOutcome::kPaid);
    ASSERT_EQ(*record_->PayOrder("o2", 2001), store::PayOutcome::kPaid);
    ASSERT_EQ(record_->CancelUnpaid("shop", 1003, 10, 3000)->size(), 1u);  // o3
  }

  static store::OrderRecord Order(const std::string& id, const std::string& user,
                                  int64_t created_ms, std::vector<std::string> items = {}) {
    return {.order_id = id,
            .activity_id = "shop",
            .user_id = user,
            .quantity = 1,
            .items = std::move(items),
            .created_ms = created_ms,
            .stream_id = "1-" + id};
  }

  testing::HttpResult Admin(std::string_view method, const std::string& target,
                            std::string_view body = {},
                            std::map<std::string, std::string> headers = {}) {
    for (auto& [name, value] : server_->Admin()) headers[name] = value;
    return server_->Client().Request(method, target, body, headers, std::chrono::seconds(30));
  }

  // The reply's JSON page; fails the test unless it is a 200 in JSON.
  json::object JsonPage(const std::string& target,
                        std::map<std::string, std::string> headers = {}) {
    auto reply = Admin("GET", target, {}, std::move(headers));
    EXPECT_EQ(reply.status, 200) << reply.body;
    EXPECT_EQ(reply.headers["content-type"], "application/json") << target;
    boost::system::error_code error;
    json::value value = json::parse(reply.body, error);
    if (error || !value.is_object()) {
      ADD_FAILURE() << target << ": not JSON: " << reply.body;
      return {};
    }
    const json::value& next = value.as_object().at("next");
    EXPECT_EQ(reply.headers.contains("x-next-cursor"), next.is_string()) << target;
    if (next.is_string()) {
      EXPECT_EQ(reply.headers["x-next-cursor"], next.as_string());
    }
    return value.as_object();
  }

  // `csv` read by Python's csv module: its rows.
  std::vector<std::vector<std::string>> PythonRows(const std::string& csv) {
    const std::string file = server_->data_dir() + "/page.csv";
    std::ofstream(file, std::ios::binary) << csv;
    const std::string command =
        "python3 -c 'import csv, json, sys; "
        "print(json.dumps(list(csv.reader(open(sys.argv[1], newline=\"\", encoding=\"utf-8\"), "
        "strict=True))))' " +
        file;
    std::FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "cannot run python3";
      return {};
    }
    std::string out;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
    const int status = ::pclose(pipe);
    EXPECT_EQ(status, 0) << "python3's csv module refused it:\n" << csv;
    std::vector<std::vector<std::string>> rows;
    boost::system::error_code error;
    const json::value parsed = json::parse(out, error);
    if (error) {
      ADD_FAILURE() << "python3 printed " << out;
      return rows;
    }
    for (const auto& row : parsed.as_array()) {
      rows.emplace_back();
      for (const auto& field : row.as_array()) rows.back().emplace_back(field.as_string());
    }
    return rows;
  }

  static RedisServer* redis_;
  std::unique_ptr<ServerFixture> server_;
  std::unique_ptr<store::SqliteStore> record_;
};
RedisServer* OrdersHttpTest::redis_ = nullptr;

TEST_F(OrdersHttpTest, JsonPagesFollowTheCursorThroughEveryOrder) {
  std::vector<std::string> ids;
  std::string target = "/api/v1/admin/activities/shop/orders?limit=2";
  int pages = 0;
  for (;;) {
    json::object page = JsonPage(target);
    ++pages;
    for (const auto& order : page.at("orders").as_array()) {
      ids.emplace_back(order.at("order_id").as_string());
    }
    if (page.at("next").is_null() || pages > 10) break;
    target = "/api/v1/admin/activities/shop/orders?limit=2&after=" +
             std::string(page.at("next").as_string());
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(ids, (std::vector<std::string>{"o1", "o2", "o3", "o4", "o5"}));

  json::object all = JsonPage("/api/v1/admin/activities/shop/orders");
  const json::array& orders = all.at("orders").as_array();
  ASSERT_EQ(orders.size(), 5u);
  const json::object& o1 = orders[0].as_object();
  EXPECT_EQ(o1.at("user_id").as_string(), "alice");
  EXPECT_EQ(o1.at("quantity").as_int64(), 2);
  EXPECT_EQ(json::serialize(o1.at("items")), R"(["C1","C2"])");
  EXPECT_TRUE(o1.at("prize").is_null());
  EXPECT_TRUE(o1.at("draw_no").is_null());
  EXPECT_EQ(o1.at("state").as_string(), "paid");
  EXPECT_EQ(o1.at("created_ms").as_int64(), 1000);
  EXPECT_EQ(o1.at("persisted_ms").as_int64(), 1500);
  EXPECT_EQ(o1.at("paid_ms").as_int64(), 2000);
  EXPECT_TRUE(o1.at("cancelled_ms").is_null());
  EXPECT_FALSE(o1.at("refund_due").as_bool());
  const json::object& o3 = orders[2].as_object();
  EXPECT_EQ(o3.at("user_id").as_string(), kHyperlink) << "JSON carries ids as they are";
  EXPECT_EQ(o3.at("state").as_string(), "cancelled");
  EXPECT_EQ(o3.at("cancelled_ms").as_int64(), 3000);
  EXPECT_TRUE(o3.at("paid_ms").is_null());
  EXPECT_EQ(orders[1].at("user_id").as_string(), kCommaQuoteBreak);

  // A lottery's win: its prize and draw number.
  json::object luck = JsonPage("/api/v1/admin/activities/luck/orders");
  ASSERT_EQ(luck.at("orders").as_array().size(), 1u);
  const json::object& win = luck.at("orders").as_array()[0].as_object();
  EXPECT_EQ(win.at("prize").as_string(), "gold");
  EXPECT_EQ(win.at("draw_no").as_int64(), 1);
  EXPECT_TRUE(win.at("items").as_array().empty());
  EXPECT_EQ(win.at("activity_id").as_string(), "luck");
}

TEST_F(OrdersHttpTest, CsvByAcceptOrFormatReadsBackInPythonsCsvModule) {
  auto reply = Admin("GET", "/api/v1/admin/activities/shop/orders", {}, {{"Accept", "text/csv"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.headers["content-type"], "text/csv; charset=utf-8; header=present");
  EXPECT_FALSE(reply.headers.contains("x-next-cursor")) << "one page holds them all";
  EXPECT_TRUE(reply.body.starts_with(std::string(kHeader) + "\r\n")) << reply.body;
  const auto rows = PythonRows(reply.body);
  ASSERT_EQ(rows.size(), 6u) << reply.body;
  const std::vector<std::string> o1 = {"o1",   "shop",  "alice", "2",    "C1 C2", "",     "",
                                       "paid", "false", "false", "1000", "1500",  "2000", ""};
  EXPECT_EQ(rows[1], o1);
  EXPECT_EQ(rows[2][2], kCommaQuoteBreak) << "comma, quotes and line break survive";
  EXPECT_EQ(rows[3][2], "'" + kHyperlink) << "a formula is guarded";
  EXPECT_EQ(rows[3][7], "cancelled");
  EXPECT_EQ(rows[3][12], "");
  EXPECT_EQ(rows[3][13], "3000");
  EXPECT_EQ(rows[4][2], "'-2+3");
  EXPECT_EQ(rows[5][2], "'@SUM(1)");
  for (const auto& row : rows) EXPECT_EQ(row.size(), 14u);

  // format= wins over Accept, both ways; Accept's q values count.
  auto by_format = Admin("GET", "/api/v1/admin/activities/shop/orders?format=csv", {},
                         {{"Accept", "application/json"}});
  EXPECT_EQ(by_format.body, reply.body);
  JsonPage("/api/v1/admin/activities/shop/orders?format=json", {{"Accept", "text/csv"}});
  JsonPage("/api/v1/admin/activities/shop/orders",
           {{"Accept", "text/csv;q=0.5, application/json"}});
  auto preferred = Admin("GET", "/api/v1/admin/activities/shop/orders", {},
                         {{"Accept", "application/json;q=0.4, text/csv;q=0.9"}});
  EXPECT_EQ(preferred.body, reply.body);

  // Pages of 2 by X-Next-Cursor, the header row on each: the same rows.
  std::vector<std::vector<std::string>> paged;
  std::string target = "/api/v1/admin/activities/shop/orders?format=csv&limit=2";
  for (int page = 0; page < 10; ++page) {
    auto part = Admin("GET", target);
    ASSERT_EQ(part.status, 200) << part.body;
    auto part_rows = PythonRows(part.body);
    ASSERT_FALSE(part_rows.empty());
    EXPECT_EQ(part_rows[0], rows[0]) << "the header row";
    paged.insert(paged.end(), part_rows.begin() + 1, part_rows.end());
    if (!part.headers.contains("x-next-cursor")) break;
    target = "/api/v1/admin/activities/shop/orders?format=csv&limit=2&after=" +
             part.headers["x-next-cursor"];
  }
  EXPECT_EQ(paged, std::vector<std::vector<std::string>>(rows.begin() + 1, rows.end()));
}

TEST_F(OrdersHttpTest, StateFilters) {
  const auto ids = [&](const std::string& query) {
    std::vector<std::string> found;
    const json::object page = JsonPage("/api/v1/admin/activities/shop/orders" + query);
    for (const auto& order : page.at("orders").as_array()) {
      found.emplace_back(order.at("order_id").as_string());
    }
    return found;
  };
  EXPECT_EQ(ids("?state=paid"), (std::vector<std::string>{"o1", "o2"}));
  EXPECT_EQ(ids("?state=paid%2Ccancelled"), (std::vector<std::string>{"o1", "o2", "o3"}));
  EXPECT_EQ(ids("?state=cancelled,reserved&limit=1&format=json").size(), 1u);
  EXPECT_EQ(ids("?state=reserved"), (std::vector<std::string>{"o4", "o5"}));
}

TEST_F(OrdersHttpTest, OnlyAnOperatorReadsAndABadQueryOrCursorIsA400) {
  EXPECT_EQ(server_->Client().Get("/api/v1/admin/activities/shop/orders").status, 401);
  EXPECT_EQ(server_->Client()
                .Get("/api/v1/admin/activities/shop/orders", ServerFixture::User("alice"))
                .status,
            401);
  EXPECT_EQ(Admin("GET", "/api/v1/admin/activities/nope/orders").status, 404);
  const std::string shop_cursor = [&] {
    auto page = Admin("GET", "/api/v1/admin/activities/shop/orders?limit=1");
    return page.headers["x-next-cursor"];
  }();
  ASSERT_FALSE(shop_cursor.empty());
  for (const std::string& query : std::vector<std::string>{
           "?limit=0", "?limit=10001", "?limit=x", "?state=won", "?state=", "?state=paid,",
           "?format=xml", "?after=", "?after=%25%25", "?after=bm9wZQ",
           "?after=" + shop_cursor + "A", "?limit=5&", "?limit=1&limit=2", "?cursor=x"}) {
    auto reply = Admin("GET", "/api/v1/admin/activities/shop/orders" + query);
    EXPECT_EQ(reply.status, 400) << query << ": " << reply.body;
  }
  // A cursor of another activity's pages is refused, saying why.
  auto other = Admin("GET", "/api/v1/admin/activities/luck/orders?after=" + shop_cursor);
  EXPECT_EQ(other.status, 400) << other.body;
  EXPECT_NE(other.body.find("cursor"), std::string::npos) << other.body;
}

}  // namespace
}  // namespace flashsale::server
