#include "perfgate/options.hpp"

#include <system_error>

namespace perfgate {
namespace {

// Level 1 over everything below it: every flag that was given.
void apply_flags(CompareOptions& o, const RuleFlags& f) {
  if (f.threshold) o.threshold_override = *f.threshold;
  o.apply(f);
}

}  // namespace

std::filesystem::path class_thresholds_file(const std::filesystem::path& baseline_dir,
                                            const std::string& machine_class) {
  return baseline_dir / machine_class / "thresholds.json";
}

CompareOptions resolve_rule_options(const RuleSources& sources, const std::filesystem::path& class_thresholds) {
  CompareOptions o = sources.base;  // level 4: the built-in values
  std::error_code ec;
  if (sources.config) {
    o.config = *sources.config;  // level 2: --config, which replaces the class file
  } else if (!class_thresholds.empty() && std::filesystem::is_regular_file(class_thresholds, ec)) {
    o.config = load_threshold_config(class_thresholds.string());  // level 3: the class default
  }
  o.apply_config_defaults();
  apply_flags(o, sources.flags);  // level 1
  return o;
}

}  // namespace perfgate
