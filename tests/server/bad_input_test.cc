// Placeholder: filled in next.
#include <gtest/gtest.h>

TEST(BadInputTest, Placeholder) { EXPECT_EQ(1 + 1, 2); }
