#include "redis/embedded_server.h"

#include <gtest/gtest.h>

TEST(EmbeddedServerTest, Placeholder) { EXPECT_EQ(1 + 1, 2); }
