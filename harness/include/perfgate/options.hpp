#pragma once
// The one place where the rule's options are resolved (docs/architecture.md, "Options").
//
// A knob of the rule (threshold, alpha, run_noise, ...) can come from four places; the first that gives it
// wins:
//   1. a command-line flag                          (RuleSources::flags)
//   2. a thresholds.json named explicitly (--config) (RuleSources::config)
//   3. the class default: the thresholds.json of the machine class, baselines/<class>/thresholds.json
//      (for `perfgate compare`: the one beside the baseline file); read only when no --config was given
//   4. the built-in value                           (CompareOptions' initialisers)
// Settings that no thresholds.json carries (correction, interval, gate_rates, ...) are set by the caller in
// RuleSources::base, where they keep their place.
#include <filesystem>
#include <optional>

#include "perfgate/compare.hpp"

namespace perfgate {

// The knobs that thresholds.json can also set, as the command line gave them (unset: no flag).
struct RuleFlags : RuleKnobs {
  std::optional<double> threshold;  // --threshold: beats every entry of every thresholds.json
};

// Everything a comparison's options are resolved from, except the class file, which depends on the machine
// class of the suite at hand (resolve_rule_options' second argument).
struct RuleSources {
  CompareOptions base;                    // built-in values plus the settings no thresholds.json carries
  std::optional<ThresholdConfig> config;  // --config FILE, loaded (load_threshold_config) by the caller
  RuleFlags flags;
};

// The options of one comparison: `class_thresholds` (baselines/<class>/thresholds.json; may be empty or
// absent) is read only when no --config was given. Throws InputError naming the file and the field for a
// malformed class file.
CompareOptions resolve_rule_options(const RuleSources& sources, const std::filesystem::path& class_thresholds);

// baselines/<class>/thresholds.json
std::filesystem::path class_thresholds_file(const std::filesystem::path& baseline_dir,
                                            const std::string& machine_class);

}  // namespace perfgate
