// thresholds.json (ThresholdConfig) and the threshold of a benchmark: the flag, else the file's benchmark pattern,
// suite or default, else the built-in.
#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/compare.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/suites.hpp"

namespace perfgate {
namespace {

double number_field(const nlohmann::json& j, const std::string& key, const std::string& source, double lo, double hi) {
  if (!j.is_number()) throw InputError(source, "", key, "must be a number");
  const double v = j.get<double>();
  if (!std::isfinite(v) || v < lo || v >= hi)
    throw InputError(source, "", key, fmt::format("must be in [{}, {}), got {}", lo, hi, v));
  return v;
}

// A relative value: a fraction (0.05) or a percentage string ("5%"); a bare number of 1 or more is refused.
double relative_field(const nlohmann::json& j, const std::string& key, const std::string& source, double hi) {
  if (j.is_string()) {
    const std::optional<double> v = parse_percentage(j.get<std::string>());
    if (!v)
      throw InputError(source, "", key,
                       fmt::format("'{}' is neither a number nor a percentage such as \"5%\"", j.get<std::string>()));
    return number_field(nlohmann::json(*v), key, source, 0, hi);
  }
  const double v = number_field(j, key, source, 0, hi);
  if (std::string why = bare_relative_problem(v, "\""); !why.empty()) throw InputError(source, "", key, why);
  return v;
}

nlohmann::json parse_json_object(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(source, "", "", fmt::format("malformed JSON: {}", e.what()));
  }
  if (!j.is_object()) throw InputError(source, "", "", "the top level must be an object");
  return j;
}

ThresholdConfig::Pattern threshold_pattern(const std::string& text, double threshold) {
  ThresholdConfig::Pattern p;
  p.text = text;
  p.threshold = threshold;
  try {
    p.regex = std::regex(p.text, std::regex::ECMAScript | std::regex::optimize);
    p.valid_regex = true;
  } catch (const std::regex_error&) {
    p.valid_regex = false;  // still usable as an exact name
  }
  return p;
}

// "suites" or "benchmarks": an object of name -> threshold.
void parse_thresholds_by_name(const std::string& key, const nlohmann::json& v, const std::string& source,
                              ThresholdConfig& cfg) {
  if (!v.is_object()) throw InputError(source, "", key, "must be an object of name -> threshold");
  for (auto e = v.begin(); e != v.end(); ++e) {
    const double t = relative_field(e.value(), key + "." + e.key(), source, 10);
    if (key == "suites") {
      cfg.suites[e.key()] = t;
    } else {
      cfg.benchmarks.push_back(threshold_pattern(e.key(), t));
    }
  }
}

// "host_dependent": a non-empty string that is a valid ECMAScript regex (checked here, so that a typo fails the
// file's load, not a later comparison).
ContextPattern host_dependent_pattern(const nlohmann::json& v, const std::string& source) {
  if (!v.is_string() || v.get<std::string>().empty())
    throw InputError(source, "", "host_dependent", "must be a non-empty string (a regex over benchmark names)");
  std::string pattern = v.get<std::string>();
  try {
    std::regex regex(pattern, std::regex::ECMAScript);
    return ContextPattern{std::move(pattern), std::move(regex)};
  } catch (const std::regex_error& e) {
    throw InputError(source, "", "host_dependent", fmt::format("'{}' is no valid regex: {}", pattern, e.what()));
  }
}

// The numeric keys of thresholds.json and the range each must lie in ([lo, hi)).
// `relative`: a share such as a threshold (0.05 or "5%"; relative_field); else a plain number in [lo, hi).
struct NumberKey {
  const char* name;
  std::optional<double> ThresholdConfig::*field;
  double lo, hi;
  bool relative;
};
constexpr NumberKey kNumberKeys[] = {
    {"default", &ThresholdConfig::default_threshold, 0, 10, true},
    {"run_noise", &ThresholdConfig::run_noise, 0, 1, true},
    {"run_noise_df", &ThresholdConfig::run_noise_df, 0, 1e6, false},
    {"session_noise", &ThresholdConfig::session_noise, 0, 1, true},
    {"max_dispersion", &ThresholdConfig::max_dispersion, 0, 100, false},
    {"phase_impact", &ThresholdConfig::phase_impact, 0, 1, true},
    {"alpha", &ThresholdConfig::alpha, 1e-12, 0.5, false},
};

bool parse_number_key(const std::string& key, const nlohmann::json& v, const std::string& source,
                      ThresholdConfig& cfg) {
  for (const NumberKey& k : kNumberKeys) {
    if (key != k.name) continue;
    cfg.*k.field = k.relative ? relative_field(v, key, source, k.hi) : number_field(v, key, source, k.lo, k.hi);
    return true;
  }
  return false;
}

void parse_threshold_key(const std::string& key, const nlohmann::json& v, const std::string& source,
                         ThresholdConfig& cfg) {
  if (parse_number_key(key, v, source, cfg)) return;
  if (key == "suites" || key == "benchmarks") {
    parse_thresholds_by_name(key, v, source, cfg);
  } else if (key == "min_samples") {
    if (!v.is_number_integer() || v.get<long long>() < 2 || v.get<long long>() > 100000)
      throw InputError(source, "", key, "must be an integer >= 2");
    cfg.min_samples = static_cast<int>(v.get<long long>());
  } else if (key == "host_dependent") {
    cfg.host_dependent = host_dependent_pattern(v, source);
  } else if (key == "common_mode" || key == "contention_check") {
    if (!v.is_boolean()) throw InputError(source, "", key, "must be true or false");
    (key == "common_mode" ? cfg.common_mode : cfg.contention_check) = v.get<bool>();
  } else if (key != "comment" && key != "$comment" && key != "_comment") {  // comments: free text, ignored
    throw InputError(
        source, "", key,
        "unknown key (expected default, suites, benchmarks, run_noise, run_noise_df, session_noise, "
        "max_dispersion, phase_impact, min_samples, alpha, common_mode, contention_check, host_dependent)");
  }
}

}  // namespace

namespace {

// The whole of `text` as a finite number, else nullopt ("5 %", "5x" and "" are not numbers).
std::optional<double> whole_number(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) { return std::nullopt; }
  if (used != text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<double> parse_percentage(const std::string& text) {
  if (text.size() < 2 || text.back() != '%') return std::nullopt;
  const std::optional<double> v = whole_number(text.substr(0, text.size() - 1));
  if (!v) return std::nullopt;
  return *v / 100;
}

std::optional<double> parse_relative(const std::string& text, std::string& why) {
  if (const std::optional<double> share = parse_percentage(text)) return share;
  const std::optional<double> v = whole_number(text);
  why = v ? bare_relative_problem(*v, "")
          : fmt::format("'{}' is not a number: a fraction (0.05) or a percentage (5%)", text);
  if (!why.empty()) return std::nullopt;
  return v;
}

// "5" meant as 5% would be 500%, a threshold no realistic slowdown reaches; "500%" says it is meant.
std::string bare_relative_problem(double value, const char* quote) {
  if (value < 1) return std::string();
  return fmt::format(
      "{0} would be {1}%: the value is relative (0.05 = 5%); write {2} or {3}{0}%{3}, or {3}{1}%{3} if "
      "that is meant",
      value, value * 100, value / 100, quote);
}

ThresholdConfig parse_threshold_config(const std::string& text, const std::string& source) {
  ThresholdConfig cfg;
  cfg.source = source;
  const nlohmann::json j = parse_json_object(text, source);
  for (auto it = j.begin(); it != j.end(); ++it) parse_threshold_key(it.key(), it.value(), source, cfg);
  return cfg;
}

ThresholdConfig load_threshold_config(const std::string& file) {
  return parse_threshold_config(read_config_file(file, "threshold config", 16u << 20), file);
}

double threshold_for(const CompareOptions& o, const std::string& name, const std::string& suite) {
  if (o.rule.threshold_override) return *o.rule.threshold_override;
  for (const auto& p : o.rule.config.benchmarks)
    if (p.text == name) return p.threshold;
  for (const auto& p : o.rule.config.benchmarks)
    if (p.valid_regex && std::regex_match(name, p.regex)) return p.threshold;
  for (const std::string& named : {suite, suite_of_benchmark(name)}) {
    const auto s = o.rule.config.suites.find(named);
    if (!named.empty() && s != o.rule.config.suites.end()) return s->second;
  }
  if (o.rule.config.default_threshold) return *o.rule.config.default_threshold;
  return o.rule.threshold;
}

namespace {

bool pattern_applies(const ThresholdConfig::Pattern& p, const std::string& name) {
  return p.text == name || (p.valid_regex && std::regex_match(name, p.regex));
}

// The suite an entry names literally, before its first '/' ("expert_gemm" of "expert_gemm/ffn/.*"); "" when that part
// is a regex of its own.
std::string literal_suite(const std::string& entry) {
  const std::string first = suite_of_benchmark(entry);
  return first.find_first_of("()[]{}.*+?|^$\\") == std::string::npos ? first : "";
}

}  // namespace

std::vector<std::string> unmatched_thresholds(const CompareOptions& o, const std::vector<std::string>& names,
                                              const std::set<std::string>& suites) {
  const ThresholdConfig& cfg = o.rule.config;
  std::vector<std::string> unmatched;
  if (o.rule.threshold_override) return unmatched;
  for (const auto& p : cfg.benchmarks) {
    const bool applies = std::any_of(names.begin(), names.end(), [&](const auto& n) { return pattern_applies(p, n); });
    if (!applies && (cfg.for_this_comparison || suites.contains(literal_suite(p.text))))
      unmatched.push_back("benchmarks '" + p.text + "'");
  }
  if (cfg.for_this_comparison)
    for (const auto& [suite, threshold] : cfg.suites)
      if (!suites.contains(suite)) unmatched.push_back("suites '" + suite + "'");
  return unmatched;
}

ReportedOptions reported_options(const CompareOptions& o) {
  ReportedOptions r;
  r.alpha = o.rule.alpha;
  r.default_threshold = o.rule.threshold_override ? *o.rule.threshold_override
                                                  : o.rule.config.default_threshold.value_or(o.rule.threshold);
  r.threshold_from_flag = o.rule.threshold_override.has_value();
  r.threshold_config = o.rule.config.source;
  r.correction = o.rule.correction;
  r.interval = o.rule.interval;
  r.run_noise = o.noise.run_noise;
  r.run_noise_df = o.noise.run_noise_df;
  r.session_noise = o.noise.session_noise;
  r.cpu_run_noise = o.noise.cpu_run_noise;
  r.paired_runs = o.rule.paired_runs;
  r.common_mode = o.noise.common_mode;
  r.contention_check = o.host.contention_check;
  r.max_dispersion = o.rule.max_dispersion;
  r.min_phase_share = o.selection.min_phase_share;
  r.phase_impact = o.rule.phase_impact;
  r.min_samples = o.rule.min_samples;
  r.throttle_clock_share = o.host.throttle_clock_share;
  if (o.noise.learned_noise) r.learned_noise_source = o.noise.learned_noise->source;
  r.sides = o.sides;
  return r;
}

}  // namespace perfgate
