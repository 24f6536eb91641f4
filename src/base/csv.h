#pragma once
// CSV as RFC 4180 writes it, for the order export (issue 35, point 3): fields separated by commas,
// records ended by CRLF, a field holding a comma, a double quote, CR or LF quoted with its quotes
// doubled.
//
// The formula guard: a spreadsheet opening the file runs a cell that starts with = + - or @ as a
// formula (and some do with a leading tab or CR too), so text that came from outside (a user id)
// could call functions on the reader's machine ("CSV injection"). Guarded, such a field gets a
// leading apostrophe, which spreadsheets show as text and do not evaluate (the advice of OWASP's
// "CSV Injection" page). The apostrophe is part of the field for every other reader: a program
// wanting the exact ids reads the JSON form instead.

#include <string>
#include <string_view>

namespace flashsale::base {

// Appends `field` to `out` as one CSV field (no separator), quoted when it must be; with
// `guard_formula`, apostrophe first when it starts like a formula.
void AppendCsvField(std::string& out, std::string_view field, bool guard_formula);

// Whether a spreadsheet could read the field as a formula: it starts with = + - @, a tab or a CR.
bool LooksLikeFormula(std::string_view field);

}  // namespace flashsale::base
