// Sharding a run across a fleet and merging the shards of a commit (perfgate/fleet.hpp).
#include "perfgate/fleet.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "perfgate/loader.hpp"
#include "perfgate/model.hpp"
#include "perfgate/stats.hpp"
#include "perfgate/text.hpp"

namespace perfgate::history {

using nlohmann::json;

ShardSpec parse_shard(const std::string& text, const std::string& what) {
  ShardSpec s;
  const auto slash = text.find('/');
  std::size_t used_index = 0, used_count = 0;
  try {
    if (slash != std::string::npos) {
      s.index = std::stoi(text.substr(0, slash), &used_index);
      s.count = std::stoi(text.substr(slash + 1), &used_count);
    }
  } catch (const std::exception&) { s = {}; }
  if (slash == std::string::npos || used_index != slash || used_count != text.size() - slash - 1 || s.count < 1 ||
      s.index < 1 || s.index > s.count)
    throw InputError("", "", what, fmt::format("'{}' is not a shard I/N with 1 <= I <= N (e.g. 2/3)", text));
  return s;
}

ShardPlan plan_shards(std::vector<std::string> benchmarks, const std::map<std::string, double>& costs, int count) {
  std::sort(benchmarks.begin(), benchmarks.end());
  benchmarks.erase(std::unique(benchmarks.begin(), benchmarks.end()), benchmarks.end());
  if (count < 1) throw InputError("", "", "--shard", "the shard count must be at least 1");
  if (benchmarks.size() < static_cast<std::size_t>(count))
    throw InputError("", "", "--shard",
                     fmt::format("{} shards for {} benchmark{}: a shard would be empty", count, benchmarks.size(),
                                 benchmarks.size() == 1 ? "" : "s"));
  ShardPlan plan;
  std::vector<double> cost(benchmarks.size(), 0);
  std::vector<double> known;
  for (std::size_t i = 0; i < benchmarks.size(); ++i) {
    const auto it = costs.find(normalise_benchmark_name(benchmarks[i]));
    if (it != costs.end() && it->second > 0) {
      cost[i] = it->second;
      known.push_back(it->second);
    }
  }
  plan.costed = known.size();
  plan.balanced_by_cost = !known.empty();
  // A benchmark the history has not seen yet is taken to cost what a typical one does.
  const double typical = known.empty() ? 1.0 : stats::median_inplace(known);
  for (double& c : cost)
    if (c <= 0) c = typical;

  std::vector<std::size_t> order(benchmarks.size());
  std::iota(order.begin(), order.end(), 0);
  // Costliest first; ties (every benchmark, without costs) keep the name order: a round robin by name.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
  plan.shards.assign(static_cast<std::size_t>(count), {});
  plan.seconds.assign(static_cast<std::size_t>(count), 0);
  for (std::size_t i : order) {
    std::size_t target = 0;
    for (std::size_t s = 1; s < plan.seconds.size(); ++s)
      if (plan.seconds[s] < plan.seconds[target] ||
          (plan.seconds[s] == plan.seconds[target] && plan.shards[s].size() < plan.shards[target].size()))
        target = s;
    plan.shards[target].push_back(benchmarks[i]);
    plan.seconds[target] += cost[i];
  }
  for (auto& s : plan.shards) std::sort(s.begin(), s.end());
  return plan;
}

std::string exact_filter(const std::vector<std::string>& names) {
  std::string out = "^(";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? "|" : "") + regex_escape(names[i]);
  return out + ")$";
}

// ---- merge --------------------------------------------------------------------------------------

namespace {

std::string shard_name(int index, int count) { return fmt::format("shard {}/{}", index, count); }

ShardOutcome collect_shard(Store& store, const std::vector<SessionSummary>& sessions, int index, int count) {
  ShardOutcome out;
  out.index = index;
  for (const auto& s : sessions)  // oldest first: the last match is the most recent run of this shard
    if (s.info.shard_index == index && s.info.shard_count == count) out.session = s;
  const std::string name = shard_name(index, count);
  if (!out.session) {
    out.problem = name + ": no session recorded for this commit (the shard did not run, or crashed before recording)";
    return out;
  }
  const std::string text = store.session_report(out.session->id);
  if (!text.empty()) out.report = json::parse(text, nullptr, false);
  if (out.report.is_discarded() || (!text.empty() && !out.report.is_object())) {
    out.report = nullptr;
    out.problem = fmt::format("{}: session {} has a report that is not JSON", name, out.session->id);
    return out;
  }
  const int code = shard_exit_code(out);
  if (code == 3)
    out.problem = fmt::format("{}: crashed: a bench failed or crashed (exit 3, session {}, host {})", name,
                              out.session->id, out.session->info.host);
  else if (code == 2)
    out.problem =
        fmt::format("{}: bad input or a reference that did not build (exit 2, session {})", name, out.session->id);
  else if (out.report.is_null())
    out.problem =
        fmt::format("{}: session {} was recorded without a report (record with --report)", name, out.session->id);
  return out;
}

std::string text_of(const json& b, const char* key) {
  return b.contains(key) && b[key].is_string() ? b[key].get<std::string>() : std::string();
}

int worst_rank(const std::string& verdict) {
  static const std::map<std::string, int> rank = {{"failed", 0}, {"regression", 1},  {"missing", 2},   {"noisy", 3},
                                                  {"new", 4},    {"improvement", 5}, {"unchanged", 6}, {"skipped", 7}};
  const auto it = rank.find(verdict);
  return it == rank.end() ? 8 : it->second;
}

}  // namespace

int shard_exit_code(const ShardOutcome& s) {
  if (s.session && s.session->info.exit_code >= 0) return s.session->info.exit_code;
  if (s.report.is_object() && s.report.contains("exit_code") && s.report["exit_code"].is_number_integer())
    return s.report["exit_code"].get<int>();
  return -1;
}

MergeResult merge_shards(Store& store, const std::string& commit, int count, const std::string& machine_class) {
  if (commit.empty()) throw InputError("", "", "--commit", "the merge needs the commit whose shards it merges");
  if (count < 1) throw InputError("", "", "--shards", "the shard count must be at least 1");
  MergeResult m;
  m.commit = commit;
  m.shard_count = count;
  const auto sessions = store.list_sessions({machine_class, commit, 0});
  std::map<std::string, int> seen;  // benchmark -> shard that reported it first
  for (int i = 1; i <= count; ++i) {
    ShardOutcome s = collect_shard(store, sessions, i, count);
    if (!s.problem.empty()) m.problems.push_back(s.problem);
    if (s.report.is_object() && s.report.contains("benchmarks") && s.report["benchmarks"].is_array())
      for (json b : s.report["benchmarks"]) {
        const std::string name = text_of(b, "name");
        if (auto [it, fresh] = seen.emplace(name, i); !fresh) {
          m.problems.push_back(fmt::format("{} is in {} and {}: the shards overlap", name,
                                           shard_name(it->second, count), shard_name(i, count)));
          continue;
        }
        b["shard"] = i;
        m.counts[text_of(b, "verdict")]++;
        m.benchmarks.push_back(std::move(b));
      }
    m.shards.push_back(std::move(s));
  }
  auto& list = m.benchmarks.get_ref<json::array_t&>();
  std::stable_sort(list.begin(), list.end(), [](const json& a, const json& b) {
    const int ra = worst_rank(text_of(a, "verdict")), rb = worst_rank(text_of(b, "verdict"));
    return ra != rb ? ra < rb : text_of(a, "name") < text_of(b, "name");
  });

  bool crashed = false, bad_input = false, regression = false, all_skipped = true;
  for (const auto& s : m.shards) {
    const int code = shard_exit_code(s);
    crashed |= !s.session || code == 3 || (s.report.is_null() && code != 2);
    bad_input |= code == 2;
    regression |= code == 1;
    all_skipped &= code == 77;
  }
  m.exit_code = crashed ? 3 : bad_input ? 2 : regression ? 1 : all_skipped ? 77 : 0;
  return m;
}

}  // namespace perfgate::history
