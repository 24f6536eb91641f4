// Placeholder: filled in next.
#include <gtest/gtest.h>

TEST(PipelineFaultTest, Placeholder) { EXPECT_EQ(1 + 1, 2); }
