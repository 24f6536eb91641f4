// Placeholder: filled in next.
#include <gtest/gtest.h>

TEST(ServeProcessTest, Placeholder) { EXPECT_EQ(1 + 1, 2); }
