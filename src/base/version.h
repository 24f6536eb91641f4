#pragma once
// The build's identity: the project version (CMake's project(VERSION)) and the git commit the
// binary was built from, captured at build time by cmake/version_run.cmake ("unknown" when built
// outside a git checkout, e.g. from a tarball; "-dirty" when tracked files had changes).

#include <string_view>

namespace flashsale::base {

std::string_view Version();
std::string_view Commit();

}  // namespace flashsale::base
