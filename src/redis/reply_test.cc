#include "redis/reply.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <string_view>

namespace flashsale::redis {
namespace {

// Replies from a pooled reader, one RESP text at a time.
class PooledReaderTest : public ::testing::Test {
 protected:
  PooledReaderTest() : reader_(CreatePooledReader()) {}
  ~PooledReaderTest() override { redisReaderFree(reader_); }

  Reply Read(std::string_view wire) {
    EXPECT_EQ(redisReaderFeed(reader_, wire.data(), wire.size()), REDIS_OK);
    void* raw = nullptr;
    EXPECT_EQ(redisReaderGetReply(reader_, &raw), REDIS_OK);
    EXPECT_NE(raw, nullptr) << wire;
    return Reply(static_cast<redisReply*>(raw));
  }

  redisReader* reader_;
};

TEST_F(PooledReaderTest, ReadsEveryTypeNested) {
  // Read twice: the second reply is built from the memory the first gave back.
  for (int round = 0; round < 2; ++round) {
    Reply reply = Read("*6\r\n:42\r\n$3\r\nabc\r\n$-1\r\n+OK\r\n*2\r\n:-7\r\n$0\r\n\r\n*0\r\n");
    ASSERT_TRUE(reply.is_array());
    ASSERT_EQ(reply.size(), 6u);
    EXPECT_EQ(reply[0].integer(), 42);
    EXPECT_EQ(reply[1].str(), "abc");
    EXPECT_TRUE(reply[2].is_nil());
    EXPECT_TRUE(reply[3].is_status());
    EXPECT_EQ(reply[3].str(), "OK");
    ASSERT_TRUE(reply[4].is_array());
    EXPECT_EQ(reply[4][0].integer(), -7);
    EXPECT_EQ(reply[4][1].str(), "");
    EXPECT_EQ(reply[5].size(), 0u);
  }
}

TEST_F(PooledReaderTest, ErrorsAndLongStrings) {
  Reply error = Read("-NOSCRIPT No matching script\r\n");
  EXPECT_TRUE(error.is_error());
  EXPECT_EQ(error.str(), "NOSCRIPT No matching script");
  const std::string long_text(10000, 'z');  // past the pooled sizes
  Reply text = Read("$10000\r\n" + long_text + "\r\n");
  EXPECT_EQ(text.str(), long_text);
}

TEST_F(PooledReaderTest, AReplySplitAcrossFeedsIsReadWhole) {
  const std::string_view wire = "*2\r\n$5\r\nhello\r\n:1\r\n";
  ASSERT_EQ(redisReaderFeed(reader_, wire.data(), 9), REDIS_OK);
  void* raw = nullptr;
  ASSERT_EQ(redisReaderGetReply(reader_, &raw), REDIS_OK);
  EXPECT_EQ(raw, nullptr);  // not whole yet
  Reply reply = Read(wire.substr(9));
  ASSERT_EQ(reply.size(), 2u);
  EXPECT_EQ(reply[0].str(), "hello");
  EXPECT_EQ(reply[1].integer(), 1);
}

TEST_F(PooledReaderTest, AReplyOfHiredisOwnFunctionsIsReleasedToo) {
  redisReader* plain = redisReaderCreate();
  const std::string_view wire = "*1\r\n$2\r\nhi\r\n";
  ASSERT_EQ(redisReaderFeed(plain, wire.data(), wire.size()), REDIS_OK);
  void* raw = nullptr;
  ASSERT_EQ(redisReaderGetReply(plain, &raw), REDIS_OK);
  redisReaderFree(plain);
  {
    Reply reply(static_cast<redisReply*>(raw));
    EXPECT_EQ(reply[0].str(), "hi");
  }
  // Its malloc blocks went to the pool; the next pooled reply may be built from them.
  Reply next = Read("*1\r\n$2\r\nho\r\n");
  EXPECT_EQ(next[0].str(), "ho");
}

}  // namespace
}  // namespace flashsale::redis
