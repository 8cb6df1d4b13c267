#pragma once
// Statistics for the regression rule (docs/statistics.md): Mann-Whitney U with tie correction
// (exact null distribution for small samples, as scipy.stats.mannwhitneyu method='auto'),
// distribution-free intervals for a shift (Hodges-Lehmann / Bauer order statistics) and a seeded
// percentile bootstrap of the median ratio, robust dispersion, and multiple-comparison control.
// Everything here is deterministic: no global state other than a thread-safe cache of exact
// Mann-Whitney null distributions.
#include <cstdint>
#include <span>
#include <vector>

namespace perfgate::stats {

enum class Alternative { two_sided, less, greater };  // as scipy: 'greater' = x stochastically greater than y
enum class MwuMethod { automatic, exact, asymptotic };

struct MannWhitneyResult {
  double u1 = 0;       // U statistic of the first sample (scipy's `statistic`)
  double u2 = 0;       // n1*n2 - u1
  double p_value = 1;  // for the requested alternative, clipped to [0, 1]
  double z = 0;        // standardised statistic (asymptotic method; 0 for exact)
  bool exact = false;  // which method produced p_value
  bool ties = false;   // the pooled sample has tied values
};

// scipy.stats.mannwhitneyu(x, y, use_continuity, alternative, method) semantics, scipy 1.10:
// 'automatic' is exact when min(n1, n2) <= 8 and there are no ties, asymptotic (normal approximation
// with tie-corrected variance and the continuity correction) otherwise. Empty inputs give p = 1.
MannWhitneyResult mann_whitney_u(std::span<const double> x, std::span<const double> y,
                                 Alternative alternative = Alternative::two_sided,
                                 MwuMethod method = MwuMethod::automatic, bool use_continuity = true);

// Exact null distribution of U for sample sizes (n1, n2): P(U >= u) and P(U <= u). Cached per size
// pair; sizes up to n1*n2 <= 40000 (above that, use the normal approximation).
double mwu_exact_sf(long u, int n1, int n2);
double mwu_exact_cdf(long u, int n1, int n2);

// Standard normal and Student t helpers.
double normal_cdf(double z);
double normal_sf(double z);
double normal_quantile(double p);                // inverse CDF, p in (0, 1)
double student_t_quantile(double p, double df);  // inverse CDF; df = +inf gives normal_quantile
double student_t_cdf(double t, double df);
// student_t_quantile memoised per thread (the engine asks for the same few (p, df) pairs millions of times).
double student_t_quantile_cached(double p, double df);

// An estimate with a two-sided interval. For a shift: values in the units of the inputs.
struct Interval {
  double estimate = 0;
  double lower = 0;
  double upper = 0;
  bool bounded = true;  // false when the samples are too small for the requested confidence
};

// Hodges-Lehmann estimate of the shift `y - x` (median of all pairwise differences y_j - x_i) and the
// distribution-free interval of Bauer (1972): the k-th smallest and k-th largest pairwise difference,
// k from the exact Mann-Whitney null distribution (normal approximation for large samples). Under a
// location-shift model its coverage is >= `confidence` for continuous data.
// Pass logarithms to get an interval of the ratio (exp of the bounds).
Interval hodges_lehmann_shift(std::span<const double> x, std::span<const double> y, double confidence);

// The order statistic k (1-based) such that [D_(k), D_(n1 n2 + 1 - k)] is the `confidence` interval
// above; 0 when no k achieves it (too few samples).
long hodges_lehmann_rank(int n1, int n2, double confidence);

// Percentile bootstrap of median(y) / median(x): `resamples` resamples of each side with replacement,
// from a seeded generator (same seed, same answer). Inputs must be > 0 for a meaningful ratio.
Interval bootstrap_median_ratio(std::span<const double> x, std::span<const double> y, double confidence,
                                int resamples = 2000, std::uint64_t seed = 0x5eed5eedULL);

// Descriptive helpers.
double median(std::span<const double> values);       // NaN for empty input
double median_inplace(std::vector<double>& values);  // reorders values
double mad(std::span<const double> values);          // median absolute deviation (unscaled)
// Robust coefficient of variation: 1.4826 * MAD / |median| (0 when the median is 0 or n < 2).
double robust_cv(std::span<const double> values);

// Multiple-comparison control. Both return adjusted p-values in the input order (NaN stays NaN and
// does not count as a hypothesis): reject hypothesis i at level alpha when adjusted[i] <= alpha.
std::vector<double> benjamini_hochberg(std::span<const double> p_values);  // FDR (step-up)
std::vector<double> holm(std::span<const double> p_values);                // FWER (step-down)

// A small, fast, seedable generator (splitmix64) used by the bootstrap and by the tests' simulations.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform();                      // [0, 1)
  double normal();                       // standard normal (Box-Muller)
  std::uint64_t below(std::uint64_t n);  // uniform in [0, n)

 private:
  std::uint64_t state_;
};

}  // namespace perfgate::stats
