#include "benchmark_flags.hpp"

#include <array>
#include <string_view>

#include <fmt/format.h>

namespace perfgate::cli {
namespace {

struct FlagHint {
  std::string_view flag;
  std::string_view perfgate_option;  // takes the flag's value; empty where the hint is the whole answer
  std::string_view why;
};

// perfgate passes these to every bench process itself, so the runner owns them.
constexpr std::array kHints{
    FlagHint{"--benchmark_repetitions", "--repetitions", "perfgate passes it to every bench process"},
    FlagHint{"--benchmark_min_time", "--min-time", "seconds; perfgate passes it to every bench process"},
    FlagHint{"--benchmark_min_warmup_time", "--warmup", "perfgate passes it to every bench process"},
    FlagHint{"--benchmark_out", "",
             "perfgate writes each process's JSON itself: the raw files under --report-dir's raw/, the run files "
             "under its runs/"},
    FlagHint{"--benchmark_out_format", "", "perfgate always reads JSON"},
    FlagHint{"--benchmark_format", "", "perfgate always reads JSON; the terminal shows its own summary"},
    FlagHint{"--benchmark_enable_random_interleaving", "",
             "perfgate interleaves the repetitions of every process by default (--no-interleave turns it off)"},
    FlagHint{"--benchmark_report_aggregates_only", "",
             "perfgate needs every repetition's time, not only their mean, median and spread"},
    FlagHint{"--benchmark_display_aggregates_only", "",
             "perfgate needs every repetition's time, not only their mean, median and spread"},
};

std::string_view flag_name(std::string_view arg) { return arg.substr(0, arg.find('=')); }

std::string_view flag_value(std::string_view arg) {
  const auto eq = arg.find('=');
  return eq == std::string_view::npos ? std::string_view() : arg.substr(eq + 1);
}

// "0.5s" is Google Benchmark 1.8's spelling of seconds; perfgate's --min-time takes the number.
std::string_view without_seconds_suffix(std::string_view value) {
  return !value.empty() && value.back() == 's' ? value.substr(0, value.size() - 1) : value;
}

std::string pass_through(std::string_view arg, std::string_view why) {
  return fmt::format("{} {}: --bench-arg={} passes it to every bench process", arg, why, arg);
}

std::string hint_for(std::string_view arg, std::string_view next) {
  const std::string_view name = flag_name(arg);
  // Google Benchmark 1.8's "100x": an iteration count, which perfgate's --min-time (seconds) cannot say.
  if (name == "--benchmark_min_time" && !flag_value(arg).empty() && flag_value(arg).back() == 'x')
    return pass_through(arg, "is an iteration count, and perfgate's --min-time is seconds");
  for (const FlagHint& h : kHints) {
    if (name != h.flag) continue;
    if (h.perfgate_option.empty()) return fmt::format("{} is not for perfgate's runner: {}", arg, h.why);
    // "--benchmark_repetitions 3" is not Google Benchmark's spelling, but the value is plain to see.
    const std::string_view value = flag_value(arg).empty() && !next.empty() && next[0] != '-' ? next : flag_value(arg);
    return fmt::format("{} is perfgate's {} {} ({})", arg, h.perfgate_option,
                       value.empty() ? std::string_view("VALUE") : without_seconds_suffix(value), h.why);
  }
  return pass_through(arg, "is not one of perfgate's options");
}

}  // namespace

std::vector<std::string> google_benchmark_flag_hints(int argc, char** argv) {
  std::vector<std::string> hints;
  // Only the commands that run bench processes; compare and the others read files.
  const std::string_view command = argc > 1 ? argv[1] : "";
  if (command != "run" && command != "ab" && command != "bisect") return hints;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    // --benchmark_filter is an alias perfgate accepts; a flag given as --bench-arg's value is already passed on.
    if (arg.rfind("--benchmark_", 0) != 0 || flag_name(arg) == "--benchmark_filter") continue;
    if (i > 1 && std::string_view(argv[i - 1]) == "--bench-arg") continue;
    hints.push_back(hint_for(arg, i + 1 < argc ? argv[i + 1] : ""));
  }
  return hints;
}

}  // namespace perfgate::cli
