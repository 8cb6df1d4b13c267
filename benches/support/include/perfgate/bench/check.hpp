#pragma once
// Correctness helpers: every fixture compares its result with a reference before timing.
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace perfgate::bench {

// ||got - ref||_2 / ||ref||_2, computed in double. Returns +inf on a size mismatch or a
// non-finite value in `got`, so a NaN never passes a bound.
template <typename T, typename R>
double relative_l2_error(std::span<const T> got, std::span<const R> ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0.0;
  double den = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    const double r = static_cast<double>(ref[i]);
    if (!std::isfinite(g)) return INFINITY;
    num += (g - r) * (g - r);
    den += r * r;
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

// nullopt when within bound, else a one-line message naming the quantity, the error and the bound.
template <typename T, typename R>
std::optional<std::string> check_relative_l2(std::string_view what, std::span<const T> got, std::span<const R> ref,
                                             double bound) {
  const double err = relative_l2_error(got, ref);
  if (err <= bound) return std::nullopt;
  return fmt::format("wrong result: {} relative L2 error {:.3e} exceeds bound {:.1e}", what, err, bound);
}

// Exact comparison of two buffers; reports the first differing index.
template <typename T>
std::optional<std::string> check_equal(std::string_view what, std::span<const T> got, std::span<const T> ref) {
  if (got.size() != ref.size())
    return fmt::format("wrong result: {} has {} elements, expected {}", what, got.size(), ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == ref[i])) return fmt::format("wrong result: {} differs first at element {}", what, i);
  }
  return std::nullopt;
}

}  // namespace perfgate::bench
