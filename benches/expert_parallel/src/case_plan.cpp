#include "perfgate/expert_parallel/case_plan.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace perfgate::expert_parallel {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

// "key:123" -> 123 (nullopt on another key or a bad number).
std::optional<int> int_param(std::string_view part, std::string_view key) {
  if (part.size() <= key.size() + 1 || part.substr(0, key.size()) != key || part[key.size()] != ':') return {};
  int v = 0;
  const std::string_view digits = part.substr(key.size() + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc{} || end != digits.data() + digits.size() || v <= 0) return {};
  return v;
}

std::optional<Exchange> parse_exchange(std::string_view s) {
  for (Exchange x : {Exchange::nccl, Exchange::copy_engine, Exchange::kernel, Exchange::pull, Exchange::push_sum})
    if (s == exchange_name(x)) return x;
  return {};
}

std::optional<expert_gemm::Routing> parse_routing(std::string_view part) {
  for (auto r : {expert_gemm::Routing::uniform, expert_gemm::Routing::zipf})
    if (part == fmt::format("routing:{}", expert_gemm::routing_name(r))) return r;
  return {};
}

// The trailing gpus:G/tokens:T/routing:R of every name.
bool parse_tail(const std::vector<std::string_view>& parts, std::size_t first, CaseDesc& c) {
  if (parts.size() != first + 3) return false;
  const auto gpus = int_param(parts[first], "gpus");
  const auto tokens = int_param(parts[first + 1], "tokens");
  const auto routing = parse_routing(parts[first + 2]);
  if (!gpus || !tokens || !routing) return false;
  c.gpus = *gpus;
  c.tokens = *tokens;
  c.routing = *routing;
  return true;
}

std::optional<CaseDesc> parse_layer(const std::vector<std::string_view>& parts) {
  CaseDesc c;
  c.op = Op::layer;
  if (parts.size() < 4 || parts[3].substr(0, 9) != "exchange:") return {};
  const auto x = parse_exchange(parts[3].substr(9));
  if (!x) return {};
  c.exchange = *x;
  std::size_t tail = 4;
  if (parts[2] == "pipelined" || parts[2] == "pipelined_ce") {
    const auto chunks = parts.size() > 4 ? int_param(parts[4], "chunks") : std::nullopt;
    if (!chunks || (parts[2] == "pipelined_ce" && !overlaps_on_copy_engines(c.exchange))) return {};
    c.schedule = parts[2] == "pipelined" ? Schedule::pipelined : Schedule::pipelined_ce;
    c.chunks = *chunks;
    tail = 5;
  } else if (parts[2] != "serial") {
    return {};
  }
  return parse_tail(parts, tail, c) ? std::optional(c) : std::nullopt;
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::dispatch: return "dispatch";
    case Op::combine: return "combine";
    default: return "layer";
  }
}

const char* exchange_name(Exchange exchange) {
  switch (exchange) {
    case Exchange::nccl: return "nccl";
    case Exchange::copy_engine: return "copy_engine";
    case Exchange::kernel: return "kernel";
    case Exchange::pull: return "pull";
    default: return "push_sum";
  }
}

const char* schedule_name(Schedule schedule) {
  switch (schedule) {
    case Schedule::serial: return "serial";
    case Schedule::pipelined: return "pipelined";
    default: return "pipelined_ce";
  }
}

bool overlaps_on_copy_engines(Exchange exchange) {
  return exchange == Exchange::kernel || exchange == Exchange::pull || exchange == Exchange::push_sum;
}

int gpus_to_register(int visible_gpus) { return std::max(2, visible_gpus); }

std::vector<int> token_counts() { return {128, 512, 4096}; }

std::vector<int> pipeline_chunks() { return {2, 3, 4}; }

std::string case_name(const CaseDesc& c) {
  const std::string tail =
      fmt::format("gpus:{}/tokens:{}/routing:{}", c.gpus, c.tokens, expert_gemm::routing_name(c.routing));
  if (c.op != Op::layer) return fmt::format("expert_parallel/{}/{}/{}", op_name(c.op), exchange_name(c.exchange), tail);
  if (c.schedule == Schedule::serial)
    return fmt::format("expert_parallel/layer/serial/exchange:{}/{}", exchange_name(c.exchange), tail);
  return fmt::format("expert_parallel/layer/{}/exchange:{}/chunks:{}/{}", schedule_name(c.schedule),
                     exchange_name(c.exchange), c.chunks, tail);
}

std::optional<CaseDesc> parse_case_name(std::string_view name) {
  const std::vector<std::string_view> parts = split(name, '/');
  if (parts.size() < 3 || parts[0] != "expert_parallel") return {};
  if (parts[1] == "layer") return parse_layer(parts);
  CaseDesc c;
  if (parts[1] == "dispatch") {
    c.op = Op::dispatch;
  } else if (parts[1] == "combine") {
    c.op = Op::combine;
  } else {
    return {};
  }
  const auto x = parse_exchange(parts[2]);
  if (!x || (c.op == Op::dispatch && *x == Exchange::push_sum)) return {};
  c.exchange = *x;
  return parse_tail(parts, 3, c) ? std::optional(c) : std::nullopt;
}

std::vector<CaseDesc> plan_cases(int gpus, bool with_nccl) {
  std::vector<Exchange> exchanges = {Exchange::copy_engine, Exchange::kernel, Exchange::pull, Exchange::push_sum};
  if (with_nccl) exchanges.insert(exchanges.begin(), Exchange::nccl);
  std::vector<CaseDesc> out;
  auto add = [&out](CaseDesc c) {
    c.name = case_name(c);
    out.push_back(std::move(c));
  };
  for (Op op : {Op::dispatch, Op::combine})
    for (Exchange x : exchanges) {
      if (op == Op::dispatch && x == Exchange::push_sum) continue;
      for (int t : token_counts())
        for (auto r : {expert_gemm::Routing::uniform, expert_gemm::Routing::zipf})
          add({.name = {}, .op = op, .exchange = x, .gpus = gpus, .tokens = t, .routing = r});
    }
  // The layer: serial (one chunk), then pipelined with every chunk count.
  std::vector<std::pair<Schedule, int>> schedules = {{Schedule::serial, 1}};
  for (int chunks : pipeline_chunks()) schedules.emplace_back(Schedule::pipelined, chunks);
  for (int chunks : pipeline_chunks()) schedules.emplace_back(Schedule::pipelined_ce, chunks);
  for (const auto& [s, chunks] : schedules)
    for (Exchange x : exchanges) {
      if (s == Schedule::pipelined_ce && !overlaps_on_copy_engines(x)) continue;
      for (int t : token_counts())
        for (auto r : {expert_gemm::Routing::uniform, expert_gemm::Routing::zipf})
          add({.name = {},
               .op = Op::layer,
               .exchange = x,
               .schedule = s,
               .chunks = chunks,
               .gpus = gpus,
               .tokens = t,
               .routing = r});
    }
  return out;
}

namespace {

// An environment setting's whole number in [lo, hi]; unset or empty: fallback. Throws std::invalid_argument naming
// the variable and what it expects otherwise.
int parse_setting(const char* text, const char* var, int fallback, int lo, int hi, std::string_view expected) {
  if (text == nullptr || *text == '\0') return fallback;
  const std::string_view s(text);
  int v = lo - 1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v < lo || v > hi)
    throw std::invalid_argument(fmt::format("{}='{}': expected {}", var, s, expected));
  return v;
}

}  // namespace

int parse_overlap_ctas(const char* text) {
  return parse_setting(text, kOverlapCtasVar, kDefaultOverlapCtas, 0, 100000, "a CTA count >= 0 (0 = no cap)");
}

int parse_receiver_percent(const char* text) {
  return parse_setting(text, kReceiverPercentVar, kDefaultReceiverPercent, 1, 99,
                       "the percent of CTAs that sum, 1 to 99");
}

std::vector<std::string> read_case_list(std::istream& in) {
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    out.push_back(line.substr(first, last - first + 1));
  }
  return out;
}

}  // namespace perfgate::expert_parallel
