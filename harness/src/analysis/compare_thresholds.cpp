// thresholds.json (ThresholdConfig) and the threshold of a benchmark: the flag, else the file's benchmark pattern,
// suite or default, else the built-in.
#include <cmath>
#include <optional>
#include <regex>
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
    const double t = number_field(e.value(), key + "." + e.key(), source, 0, 10);
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
struct NumberKey {
  const char* name;
  std::optional<double> ThresholdConfig::*field;
  double lo, hi;
};
constexpr NumberKey kNumberKeys[] = {
    {"default", &ThresholdConfig::default_threshold, 0, 10},
    {"run_noise", &ThresholdConfig::run_noise, 0, 1},
    {"run_noise_df", &ThresholdConfig::run_noise_df, 0, 1e6},
    {"session_noise", &ThresholdConfig::session_noise, 0, 1},
    {"max_dispersion", &ThresholdConfig::max_dispersion, 0, 100},
    {"phase_impact", &ThresholdConfig::phase_impact, 0, 1},
    {"alpha", &ThresholdConfig::alpha, 1e-12, 0.5},
};

bool parse_number_key(const std::string& key, const nlohmann::json& v, const std::string& source,
                      ThresholdConfig& cfg) {
  for (const NumberKey& k : kNumberKeys) {
    if (key != k.name) continue;
    cfg.*k.field = number_field(v, key, source, k.lo, k.hi);
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

void CompareOptions::apply_config_defaults() { apply(config); }

void CompareOptions::apply(const RuleKnobs& knobs) {
  if (knobs.alpha) alpha = *knobs.alpha;
  if (knobs.run_noise) run_noise = *knobs.run_noise;
  if (knobs.run_noise_df) run_noise_df = *knobs.run_noise_df;
  if (knobs.session_noise) session_noise = *knobs.session_noise;
  if (knobs.max_dispersion) max_dispersion = *knobs.max_dispersion;
  if (knobs.phase_impact) phase_impact = *knobs.phase_impact;
  if (knobs.min_samples) min_samples = *knobs.min_samples;
  if (knobs.common_mode) common_mode = *knobs.common_mode;
  if (knobs.contention_check) contention_check = *knobs.contention_check;
}

double threshold_for(const CompareOptions& o, const std::string& name) {
  if (o.threshold_override) return *o.threshold_override;
  for (const auto& p : o.config.benchmarks)
    if (p.text == name) return p.threshold;
  for (const auto& p : o.config.benchmarks)
    if (p.valid_regex && std::regex_match(name, p.regex)) return p.threshold;
  const auto s = o.config.suites.find(suite_of_benchmark(name));
  if (s != o.config.suites.end()) return s->second;
  if (o.config.default_threshold) return *o.config.default_threshold;
  return o.threshold;
}

}  // namespace perfgate
