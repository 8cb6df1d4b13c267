#pragma once
// Formatting helpers shared by report_*.cpp (not part of the public API).
#include <string>
#include <vector>

#include "perfgate/report.hpp"

namespace perfgate::report_detail {

std::string sig3(double v);                         // 3 significant digits, fixed notation
std::string si(double v, const std::string& unit);  // 831 TFLOP/s
std::string percent(double v);                      // +12.3%
std::string interval(const MetricComparison& m);    // [+1.0%, +3.5%] / n/a / "" (not gated)
std::string p_value(double p);
// "amx_peak 41.0% (was 40.2%), hbm 12.0%"; entries joined by `separator` (Markdown tables: "<br>", one per
// line, so five ceilings make a cell five lines tall instead of a narrow column a dozen lines tall).
std::string ceiling_summary(const BenchmarkComparison& b, const std::string& separator = ", ");
bool has_phases(const BenchmarkComparison& b);
std::string binary_for(const ComparisonReport& r, const BenchmarkComparison& b, const ReportOptions& o);
std::vector<std::string> nvtx_ranges_for(const ComparisonReport& r, const std::string& suite);
std::string counts_text(const VerdictCounts& c);
using perfgate::code_span;  // text.hpp

}  // namespace perfgate::report_detail
