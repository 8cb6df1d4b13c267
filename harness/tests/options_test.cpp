// The one options layer (options.hpp): each level of "flag > --config > class thresholds.json > built-in"
// beats the ones below it, and a malformed class file is an InputError naming the file and the field.
#include "perfgate/options.hpp"

#include <fstream>

#include <gtest/gtest.h>

#include "perfgate/errors.hpp"
#include "test_support.hpp"

using perfgate::CompareOptions;
using perfgate::InputError;
using perfgate::resolve_rule_options;
using perfgate::RuleSources;
using perfgate::test_support::TempDir;

namespace {

// A class folder with a thresholds.json saying `json`; returns the file.
std::filesystem::path class_file(const TempDir& dir, const std::string& json) {
  auto file = perfgate::class_thresholds_file(dir.path, "cpu-test-2c");
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << json;
  return file;
}

}  // namespace

TEST(ResolveRuleOptions, BuiltInWhenNothingElseSpeaks) {
  const CompareOptions o = resolve_rule_options(RuleSources{}, "");
  const CompareOptions builtin;
  EXPECT_DOUBLE_EQ(o.rule.alpha, builtin.rule.alpha);
  EXPECT_DOUBLE_EQ(o.noise.run_noise, builtin.noise.run_noise);
  EXPECT_DOUBLE_EQ(o.noise.session_noise, builtin.noise.session_noise);
  EXPECT_FALSE(o.rule.threshold_override.has_value());
  EXPECT_DOUBLE_EQ(perfgate::threshold_for(o, "s/a"), builtin.rule.threshold);
}

TEST(ResolveRuleOptions, ClassFileBeatsBuiltIn) {
  TempDir dir;
  const auto file = class_file(dir, R"({"default": 0.08, "run_noise": 0.07, "session_noise": 0.1})");
  const CompareOptions o = resolve_rule_options(RuleSources{}, file);
  EXPECT_DOUBLE_EQ(o.noise.run_noise, 0.07);
  EXPECT_DOUBLE_EQ(o.noise.session_noise, 0.1);
  EXPECT_DOUBLE_EQ(perfgate::threshold_for(o, "s/a"), 0.08);
  EXPECT_EQ(o.rule.config.source, file.string());
  // A class without a thresholds.json: the built-in values.
  const CompareOptions none = resolve_rule_options(RuleSources{}, dir.path / "other" / "thresholds.json");
  EXPECT_DOUBLE_EQ(none.noise.run_noise, CompareOptions{}.noise.run_noise);
}

TEST(ResolveRuleOptions, ExplicitConfigBeatsClassFile) {
  TempDir dir;
  const auto file = class_file(dir, R"({"default": 0.08, "run_noise": 0.07})");
  RuleSources sources;
  sources.config = perfgate::parse_threshold_config(R"({"default": 0.02, "alpha": 0.01})", "given.json");
  const CompareOptions o = resolve_rule_options(sources, file);
  EXPECT_DOUBLE_EQ(perfgate::threshold_for(o, "s/a"), 0.02);
  EXPECT_DOUBLE_EQ(o.rule.alpha, 0.01);
  // --config replaces the class file as a whole: what it leaves out is built-in, not the class's.
  EXPECT_DOUBLE_EQ(o.noise.run_noise, CompareOptions{}.noise.run_noise);
  EXPECT_EQ(o.rule.config.source, "given.json");
}

TEST(ResolveRuleOptions, FlagBeatsEveryFile) {
  TempDir dir;
  const auto file = class_file(dir, R"({"default": 0.08, "run_noise": 0.07, "alpha": 0.02, "min_samples": 6})");
  RuleSources sources;
  sources.flags.threshold = 0.2;
  sources.flags.run_noise = 0.03;
  sources.flags.min_samples = 9;
  CompareOptions o = resolve_rule_options(sources, file);
  EXPECT_DOUBLE_EQ(perfgate::threshold_for(o, "s/a"), 0.2);
  EXPECT_DOUBLE_EQ(o.noise.run_noise, 0.03);
  EXPECT_EQ(o.rule.min_samples, 9);
  EXPECT_DOUBLE_EQ(o.rule.alpha, 0.02);  // no flag: the class file still speaks
  sources.config = perfgate::parse_threshold_config(R"({"alpha": 0.01})", "given.json");
  sources.flags.alpha = 0.001;
  o = resolve_rule_options(sources, file);
  EXPECT_DOUBLE_EQ(o.rule.alpha, 0.001);
}

TEST(ResolveRuleOptions, MalformedClassFileNamesFileAndField) {
  TempDir dir;
  const auto file = class_file(dir, R"({"run_noise": "five percent"})");
  try {
    resolve_rule_options(RuleSources{}, file);
    FAIL() << "a malformed thresholds.json was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file, file.string());
    EXPECT_EQ(e.field, "run_noise");
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
}
