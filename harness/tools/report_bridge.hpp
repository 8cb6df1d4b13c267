#pragma once
// How `perfgate run` / `perfgate ab` render a ComparisonReport: through the report writers of
// libperfgate (report_*.cpp), so run, ab and compare print the same tables.
#include <string>

#include "perfgate/compare.hpp"

namespace perfgate::cli {

std::string markdown_report(const ComparisonReport& report, const std::string& title);
std::string json_report(const ComparisonReport& report);
void print_terminal_report(const ComparisonReport& report);

}  // namespace perfgate::cli
