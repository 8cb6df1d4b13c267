#include "perfgate/bench/setup_profile.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace perfgate::bench {
namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point g_start = Clock::now();

struct Entry {
  std::string label;
  double seconds = 0;
  int count = 0;
};

struct Profile {
  std::mutex mutex;
  std::vector<Entry> entries;  // first-seen order, so the line reads like the process's timeline
};

Profile& profile() {
  static Profile p;
  return p;
}

}  // namespace

double seconds_since_start() { return std::chrono::duration<double>(Clock::now() - g_start).count(); }

SetupSpan::SetupSpan(const char* label) : label_(label), start_s_(seconds_since_start()) {}
SetupSpan::~SetupSpan() { add_setup_time(label_, seconds_since_start() - start_s_); }

void add_setup_time(const char* label, double seconds) {
  Profile& p = profile();
  const std::lock_guard<std::mutex> lock(p.mutex);
  for (auto& e : p.entries) {
    if (e.label == label) {
      e.seconds += seconds;
      ++e.count;
      return;
    }
  }
  p.entries.push_back({label, seconds, 1});
}

std::string setup_profile_line() {
  Profile& p = profile();
  const std::lock_guard<std::mutex> lock(p.mutex);
  if (p.entries.empty()) return {};
  std::string out = fmt::format("perfgate setup profile: {:.2f} s since start", seconds_since_start());
  for (const auto& e : p.entries) out += fmt::format("; {} {:.3f} s ({}x)", e.label, e.seconds, e.count);
  return out;
}

void report_setup_profile() {
  const char* v = std::getenv("PERFGATE_SETUP_PROFILE");
  if (v == nullptr || std::string_view(v).empty() || std::string_view(v) == "0") return;
  const std::string line = setup_profile_line();
  if (!line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace perfgate::bench
