#include "base/csv.h"

#include <gtest/gtest.h>

namespace flashsale::base {
namespace {

std::string Field(std::string_view text, bool guard = false) {
  std::string out;
  AppendCsvField(out, text, guard);
  return out;
}

TEST(Csv, PlainFieldsAreWrittenAsTheyAre) {
  EXPECT_EQ(Field("alice"), "alice");
  EXPECT_EQ(Field(""), "");
  EXPECT_EQ(Field("a b.c:d_e"), "a b.c:d_e");
}

TEST(Csv, FieldsWithACommaQuoteOrLineBreakAreQuotedWithTheirQuotesDoubled) {
  EXPECT_EQ(Field("a,b"), "\"a,b\"");
  EXPECT_EQ(Field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(Field("one\ntwo"), "\"one\ntwo\"");
  EXPECT_EQ(Field("one\r\ntwo"), "\"one\r\ntwo\"");
  EXPECT_EQ(Field("\""), "\"\"\"\"");
}

TEST(Csv, TheFormulaGuardPutsAnApostropheBeforeWhatASpreadsheetWouldRun) {
  for (const char* formula : {"=1+2", "+1", "-1", "@SUM(A1)", "\tx", "\rx"}) {
    EXPECT_TRUE(LooksLikeFormula(formula)) << formula;
    EXPECT_EQ(Field(formula, true).find('\''), Field(formula, true).find_first_not_of('"'))
        << formula;
  }
  EXPECT_EQ(Field("=HYPERLINK(\"http://x\",\"y\")", true),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"");
  EXPECT_EQ(Field("-1", true), "'-1");
  EXPECT_EQ(Field("-1", false), "-1") << "only when asked";
  EXPECT_EQ(Field("a=b", true), "a=b") << "only at the start";
  EXPECT_FALSE(LooksLikeFormula(""));
  EXPECT_FALSE(LooksLikeFormula("alice"));
}

}  // namespace
}  // namespace flashsale::base
