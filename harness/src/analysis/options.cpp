#include "perfgate/options.hpp"

#include <algorithm>
#include <array>
#include <system_error>

namespace perfgate {
namespace {

// Level 2 or 3, then level 1: the thresholds.json's knobs, then the flags' (a flag beats every file).
std::array<const RuleKnobs*, 2> knob_levels(const RuleSources& sources, const ThresholdConfig& config) {
  return {&config, static_cast<const RuleKnobs*>(&sources.flags)};
}

template <typename T>
void take(T& value, const std::optional<T>& given) {
  if (given) value = *given;
}

}  // namespace

std::filesystem::path class_thresholds_file(const std::filesystem::path& baseline_dir,
                                            const std::string& machine_class) {
  return baseline_dir / machine_class / "thresholds.json";
}

ThresholdConfig resolve_threshold_config(const RuleSources& sources, const std::filesystem::path& class_thresholds) {
  if (sources.config) return *sources.config;  // level 2: --config, which replaces the class file
  std::error_code ec;
  if (!class_thresholds.empty() && std::filesystem::is_regular_file(class_thresholds, ec))
    return load_threshold_config(class_thresholds.string());  // level 3: the class default
  return sources.base.rule.config;
}

RuleOptions resolve_rule(const RuleSources& sources, const ThresholdConfig& config, const ComparedSides& sides) {
  RuleOptions r = sources.base.rule;  // level 4: the built-in values and the settings no file carries
  r.config = config;
  for (const RuleKnobs* knobs : knob_levels(sources, config)) {
    take(r.alpha, knobs->alpha);
    take(r.max_dispersion, knobs->max_dispersion);
    take(r.phase_impact, knobs->phase_impact);
    take(r.min_samples, knobs->min_samples);
  }
  if (sources.flags.threshold) r.threshold_override = *sources.flags.threshold;
  if (sides.interleaved) {
    r.paired_runs = sides.interleaved->paired;
    r.alpha = alpha_per_look(r.alpha, sides.interleaved->looks);
  }
  return r;
}

NoiseOptions resolve_noise(const RuleSources& sources, const ThresholdConfig& config, const ComparedSides& sides) {
  NoiseOptions n = sources.base.noise;
  for (const RuleKnobs* knobs : knob_levels(sources, config)) {
    take(n.run_noise, knobs->run_noise);
    take(n.run_noise_df, knobs->run_noise_df);
    take(n.session_noise, knobs->session_noise);
    take(n.common_mode, knobs->common_mode);
  }
  n.learned_noise = sides.learned_noise;
  if (sides.interleaved) {
    // Both sides of one session: no drift between sessions, and bands learned between sessions do not apply.
    n.session_noise = 0;
    n.learned_noise.reset();
  }
  return n;
}

SelectionOptions resolve_selection(const RuleSources& sources) { return sources.base.selection; }

HostOptions resolve_host(const RuleSources& sources, const ThresholdConfig& config) {
  HostOptions h = sources.base.host;
  for (const RuleKnobs* knobs : knob_levels(sources, config)) take(h.contention_check, knobs->contention_check);
  return h;
}

CompareOptions resolve_rule_options(const RuleSources& sources, const ComparedSides& sides) {
  const ThresholdConfig config = resolve_threshold_config(sources, sides.class_thresholds);
  CompareOptions o;
  o.rule = resolve_rule(sources, config, sides);
  o.noise = resolve_noise(sources, config, sides);
  o.selection = resolve_selection(sources);
  o.host = resolve_host(sources, config);
  o.threads = sources.base.threads;
  o.sides = sources.base.sides;
  if (sides.interleaved) o.sides.builds = true;
  return o;
}

CompareOptions resolve_rule_options(const RuleSources& sources, const std::filesystem::path& class_thresholds) {
  return resolve_rule_options(sources, ComparedSides{class_thresholds, nullptr, std::nullopt});
}

double alpha_per_look(double alpha, int looks) { return alpha / std::max(1, looks); }

}  // namespace perfgate
