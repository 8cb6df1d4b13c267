#include "perfgate/synthetic/synthetic.hpp"

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>
#include <stdexcept>

namespace perfgate::synthetic {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

double parse_fraction(const std::string& what, const std::string& text) {
  std::size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) { throw std::invalid_argument(what + ": not a number: '" + text + "'"); }
  if (used != text.size()) throw std::invalid_argument(what + ": not a number: '" + text + "'");
  return value;
}

void check_regex(const std::string& what, const std::string& regex) {
  if (regex.empty()) return;
  try {
    std::regex re(regex);
  } catch (const std::regex_error& e) {
    throw std::invalid_argument(what + ": bad regex '" + regex + "': " + e.what());
  }
}

}  // namespace

Config Config::from_env() {
  Config c;
  const std::string s = env_or_empty("PERFGATE_SYNTHETIC_SLOWDOWN");
  if (!s.empty()) c.slowdown = parse_fraction("PERFGATE_SYNTHETIC_SLOWDOWN", s);
  c.slowdown_filter = env_or_empty("PERFGATE_SYNTHETIC_SLOWDOWN_FILTER");
  c.slowdown_phase = env_or_empty("PERFGATE_SYNTHETIC_SLOWDOWN_PHASE");
  c.fail_filter = env_or_empty("PERFGATE_SYNTHETIC_FAIL");
  c.crash_filter = env_or_empty("PERFGATE_SYNTHETIC_CRASH");
  c.hang_filter = env_or_empty("PERFGATE_SYNTHETIC_HANG");
  c.validate();
  return c;
}

void Config::apply_flags(std::vector<std::string>& args) {
  std::vector<std::string> rest;
  for (const auto& a : args) {
    auto value_of = [&](const std::string& flag) -> std::optional<std::string> {
      const std::string prefix = "--" + flag + "=";
      if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
      return std::nullopt;
    };
    if (auto v = value_of("slowdown")) {
      slowdown = parse_fraction("--slowdown", *v);
    } else if (auto f = value_of("slowdown_filter")) {
      slowdown_filter = *f;
    } else if (auto p = value_of("slowdown_phase")) {
      slowdown_phase = *p;
    } else {
      rest.push_back(a);
    }
  }
  args = std::move(rest);
  validate();
}

void Config::validate() const {
  if (!std::isfinite(slowdown) || slowdown <= -1.0 || slowdown > 100.0)
    throw std::invalid_argument("slowdown must be a fraction in (-1, 100], got " + std::to_string(slowdown));
  check_regex("slowdown filter", slowdown_filter);
  check_regex("PERFGATE_SYNTHETIC_FAIL", fail_filter);
  check_regex("PERFGATE_SYNTHETIC_CRASH", crash_filter);
  check_regex("PERFGATE_SYNTHETIC_HANG", hang_filter);
}

bool name_matches(const std::string& regex, const std::string& name) {
  if (regex.empty()) return false;
  return std::regex_search(name, std::regex(regex));
}

std::uint64_t planned_units(const Config& config, const std::string& benchmark_name, std::uint64_t base_units,
                            const std::string& phase) {
  if (config.slowdown == 0.0) return base_units;
  if (!config.slowdown_filter.empty() && !name_matches(config.slowdown_filter, benchmark_name)) return base_units;
  if (!config.slowdown_phase.empty() && config.slowdown_phase != phase) return base_units;
  const double scaled = std::round(static_cast<double>(base_units) * (1.0 + config.slowdown));
  return scaled < 1.0 ? 1 : static_cast<std::uint64_t>(scaled);
}

std::uint64_t run_chain(std::uint64_t units, std::uint64_t seed) {
  std::uint64_t x = seed;
  for (std::uint64_t i = 0; i < units; ++i) {
    x = x * kChainMul + kChainAdd;
    // An empty asm with x as in/out operand keeps the compiler from collapsing the chain.
    asm volatile("" : "+r"(x));
  }
  return x;
}

std::uint64_t chain_reference(std::uint64_t units, std::uint64_t seed) {
  // Brown's LCG jump-ahead: compose (mul, add) with itself by squaring.
  std::uint64_t acc_mul = 1, acc_add = 0;
  std::uint64_t cur_mul = kChainMul, cur_add = kChainAdd;
  for (std::uint64_t n = units; n > 0; n >>= 1) {
    if ((n & 1U) != 0) {
      acc_mul *= cur_mul;
      acc_add = acc_add * cur_mul + cur_add;
    }
    cur_add = (cur_mul + 1) * cur_add;
    cur_mul *= cur_mul;
  }
  return acc_mul * seed + acc_add;
}

Walk::Walk(std::uint32_t slots, std::uint64_t seed) : next_(slots), order_(slots) {
  if (slots == 0) throw std::invalid_argument("Walk needs at least one slot");
  std::iota(order_.begin(), order_.end(), 0U);
  std::mt19937_64 rng(seed);
  std::shuffle(order_.begin() + 1, order_.end(), rng);  // the cycle starts at slot order_[0] == 0
  for (std::size_t k = 0; k < slots; ++k) next_[order_[k]] = order_[(k + 1) % slots];
}

std::uint32_t Walk::run(std::uint64_t units) const {
  std::uint32_t at = order_[0];
  const std::uint32_t* next = next_.data();
  for (std::uint64_t i = 0; i < units; ++i) at = next[at];
  return at;
}

std::uint32_t Walk::reference(std::uint64_t units) const { return order_[units % order_.size()]; }

}  // namespace perfgate::synthetic
