#pragma once
// The one place where the rule's options are resolved (docs/architecture.md, "Options").
//
// A knob of the rule (threshold, alpha, run_noise, ...) can come from four places; the first that gives it
// wins:
//   1. a command-line flag                          (RuleSources::flags)
//   2. a thresholds.json named explicitly (--config) (RuleSources::config)
//   3. the class default: the thresholds.json of the machine class, baselines/<class>/thresholds.json
//      (for `perfgate compare`: the one beside the baseline file); read only when no --config was given
//   4. the built-in value                           (the initialisers of CompareOptions' groups)
// Settings that no thresholds.json carries (correction, interval, gate_rates, ...) are set by the caller in
// RuleSources::base, where they keep their place. Each group of CompareOptions (rule, noise, selection, host) is
// resolved by one function below; resolve_rule_options puts them together, with what the sides of the comparison
// at hand add (ComparedSides).
#include <filesystem>
#include <memory>
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

// Two sides measured in one session, in interleaved rounds (perfgate ab, the confirm step against a fresh baseline
// build): no drift between sessions separates them, and an adaptive session splits alpha over its looks.
struct Interleaving {
  bool paired = true;  // round i of one side next to round i of the other: judge per-round differences
  int looks = 1;       // looks of an adaptive session, the first included
};

// What the options of one comparison depend on besides the command's sources.
struct ComparedSides {
  // baselines/<class>/thresholds.json, read only when no --config was given; empty or absent: none.
  std::filesystem::path class_thresholds;
  // Learned between-session noise for sides of different sessions (never used for interleaved sides).
  std::shared_ptr<const LearnedNoiseTable> learned_noise;
  std::optional<Interleaving> interleaved;  // unset: the sides were measured in different sessions
};

// The thresholds.json that applies: --config, else the class file when it exists, else none. Throws InputError
// naming the file and the field for a malformed class file.
ThresholdConfig resolve_threshold_config(const RuleSources& sources, const std::filesystem::path& class_thresholds);

// One group each: the caller's base, then `config`'s knobs, then the flags', then what the sides add.
RuleOptions resolve_rule(const RuleSources& sources, const ThresholdConfig& config, const ComparedSides& sides);
NoiseOptions resolve_noise(const RuleSources& sources, const ThresholdConfig& config, const ComparedSides& sides);
SelectionOptions resolve_selection(const RuleSources& sources);
HostOptions resolve_host(const RuleSources& sources, const ThresholdConfig& config);

// The options of one comparison: every group resolved from `sources` and `sides`.
CompareOptions resolve_rule_options(const RuleSources& sources, const ComparedSides& sides);
// The same for two stored sides without learned noise (`class_thresholds` as in ComparedSides).
CompareOptions resolve_rule_options(const RuleSources& sources, const std::filesystem::path& class_thresholds);

// Alpha for each look of an adaptive session: alpha / looks (Bonferroni over the planned looks).
double alpha_per_look(double alpha, int looks);

// baselines/<class>/thresholds.json
std::filesystem::path class_thresholds_file(const std::filesystem::path& baseline_dir,
                                            const std::string& machine_class);

}  // namespace perfgate
