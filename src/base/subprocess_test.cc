#include "base/subprocess.h"

#include <gtest/gtest.h>

TEST(SubprocessTest, Placeholder) { EXPECT_EQ(1 + 1, 2); }
