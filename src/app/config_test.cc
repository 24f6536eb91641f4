#include "app/config.h"

#include <gtest/gtest.h>

TEST(ConfigTest, Placeholder) { EXPECT_EQ(flashsale::app::ServeConfig{}.listen, "127.0.0.1:8080"); }
