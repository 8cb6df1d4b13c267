#include "perfgate/expert_gemm/moe_problem.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <thread>

namespace perfgate::expert_gemm {
namespace {

// Uniform double in [0, 1) from the top 53 bits: the same on every standard library.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

float uniform(std::mt19937_64& rng, float lo, float hi) { return lo + static_cast<float>(uniform01(rng)) * (hi - lo); }

}  // namespace

const Shape& deepseek_v3() {
  static const Shape s{"deepseek-v3", 256, 7168, 2048, 8};
  return s;
}

const Shape& small_shape() {
  static const Shape s{"small", 64, 1024, 512, 4};
  return s;
}

const Shape* find_shape(const std::string& name) {
  if (name == deepseek_v3().name) return &deepseek_v3();
  if (name == small_shape().name) return &small_shape();
  return nullptr;
}

const char* routing_name(Routing routing) { return routing == Routing::uniform ? "uniform" : "zipf"; }

std::vector<float> make_router_logits(const Shape& shape, int tokens, Routing routing, std::uint64_t seed) {
  const int e_count = shape.experts;
  const int k = shape.top_k;
  if (k > e_count) throw std::invalid_argument("top_k exceeds the expert count");
  std::mt19937_64 rng(seed);

  // Popularity of each expert: Zipf(1.0) by rank, ranks assigned in a random order.
  std::vector<double> popularity(static_cast<std::size_t>(e_count), 1.0);
  if (routing == Routing::zipf) {
    std::vector<int> order(static_cast<std::size_t>(e_count));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int rank = 0; rank < e_count; ++rank) popularity[static_cast<std::size_t>(order[rank])] = 1.0 / (rank + 1);
  }

  std::vector<float> logits(static_cast<std::size_t>(tokens) * e_count);
  std::vector<double> remaining(popularity.size());
  for (int t = 0; t < tokens; ++t) {
    float* row = logits.data() + static_cast<std::size_t>(t) * e_count;
    for (int e = 0; e < e_count; ++e) row[e] = uniform(rng, -3.0f, 0.5f);
    // k distinct experts drawn without replacement, each in proportion to its popularity.
    remaining = popularity;
    double total = std::accumulate(remaining.begin(), remaining.end(), 0.0);
    for (int j = 0; j < k; ++j) {
      const double target = uniform01(rng) * total;
      double acc = 0.0;
      int chosen = -1;
      for (int e = 0; e < e_count; ++e) {
        if (remaining[static_cast<std::size_t>(e)] <= 0.0) continue;
        chosen = e;  // the last eligible expert absorbs rounding at the top end
        acc += remaining[static_cast<std::size_t>(e)];
        if (acc > target) break;
      }
      total -= remaining[static_cast<std::size_t>(chosen)];
      remaining[static_cast<std::size_t>(chosen)] = 0.0;
      row[chosen] = uniform(rng, 1.0f, 3.0f);
    }
  }
  return logits;
}

RoutingResult route_cpu(const Shape& shape, int tokens, std::span<const float> logits) {
  const int e_count = shape.experts;
  const int k = shape.top_k;
  RoutingResult r;
  r.expert.resize(static_cast<std::size_t>(tokens) * k);
  r.weight.resize(r.expert.size());
  r.counts.assign(static_cast<std::size_t>(e_count), 0);
  std::vector<int> idx(static_cast<std::size_t>(e_count));
  for (int t = 0; t < tokens; ++t) {
    const float* row = logits.data() + static_cast<std::size_t>(t) * e_count;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [row](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += std::exp(static_cast<double>(row[idx[j]]) - row[idx[0]]);
    for (int j = 0; j < k; ++j) {
      const std::size_t at = static_cast<std::size_t>(t) * k + j;
      r.expert[at] = idx[j];
      r.weight[at] = static_cast<float>(std::exp(static_cast<double>(row[idx[j]]) - row[idx[0]]) / sum);
      ++r.counts[static_cast<std::size_t>(idx[j])];
    }
  }
  return r;
}

RoutingStats routing_stats(std::span<const int> counts) {
  RoutingStats s;
  long total = 0;
  for (int c : counts) {
    total += c;
    if (c > 0) ++s.active_experts;
    s.max_rows = std::max(s.max_rows, c);
  }
  s.mean_rows = counts.empty() ? 0.0 : static_cast<double>(total) / static_cast<double>(counts.size());
  s.max_over_mean = s.mean_rows > 0 ? s.max_rows / s.mean_rows : 0.0;
  return s;
}

std::vector<Bucket> plan_buckets(std::span<const int> counts, const BucketOptions& options) {
  std::vector<Bucket> buckets;
  const int granule = std::max(1, options.granule);
  auto pad_of = [granule](int rows) {
    return rows <= 256 ? (rows + granule - 1) / granule * granule : (rows + 63) / 64 * 64;
  };
  auto add = [&buckets](int pad, int expert, int offset) {
    auto it = std::find_if(buckets.begin(), buckets.end(), [pad](const Bucket& b) { return b.pad_rows == pad; });
    if (it == buckets.end()) {
      buckets.push_back(Bucket{pad, {}, {}});
      it = buckets.end() - 1;
    }
    it->experts.push_back(expert);
    it->row_offset.push_back(offset);
  };
  for (int e = 0; e < static_cast<int>(counts.size()); ++e) {
    const int rows = counts[static_cast<std::size_t>(e)];
    if (rows <= 0) continue;
    int offset = 0;
    if (options.chunk_rows > 0) {
      for (; rows - offset >= options.chunk_rows; offset += options.chunk_rows) add(options.chunk_rows, e, offset);
    }
    if (rows - offset > 0) add(pad_of(rows - offset), e, offset);
  }
  std::sort(buckets.begin(), buckets.end(), [](const Bucket& x, const Bucket& y) { return x.pad_rows > y.pad_rows; });
  return buckets;
}

// Every expert's region right after the previous one's: expert e's rows start where e - 1's `rows` end.
template <typename Rows>
RowLayout back_to_back_layout(std::span<const Rows> rows) {
  RowLayout l;
  l.slot_base.resize(rows.size());
  std::int64_t at = 0;
  for (std::size_t e = 0; e < rows.size(); ++e) {
    l.slot_base[e] = static_cast<int>(at);
    at += rows[e];
  }
  l.total_rows = at;
  return l;
}

RowLayout compact_layout(std::span<const int> counts) { return back_to_back_layout(counts); }

RowLayout padded_layout(std::span<const int> counts, int pad_rows) {
  RowLayout l;
  l.slot_base.resize(counts.size());
  for (std::size_t e = 0; e < counts.size(); ++e) l.slot_base[e] = static_cast<int>(e) * pad_rows;
  l.total_rows = static_cast<std::int64_t>(counts.size()) * pad_rows;
  return l;
}

RowLayout bucket_layout(std::span<const int> counts, const std::vector<Bucket>& buckets) {
  // An expert's region: the end of its last piece (pieces of one expert tile its rows in order).
  std::vector<std::int64_t> extent(counts.size(), 0);
  for (const Bucket& b : buckets) {
    for (std::size_t i = 0; i < b.experts.size(); ++i) {
      auto& x = extent[static_cast<std::size_t>(b.experts[i])];
      x = std::max<std::int64_t>(x, static_cast<std::int64_t>(b.row_offset[i]) + b.pad_rows);
    }
  }
  return back_to_back_layout(std::span<const std::int64_t>(extent));
}

Work count_work(const Shape& shape, int tokens, std::span<const int> counts) {
  const double h = shape.hidden;
  const double inter = shape.intermediate;
  double rows = 0;
  int active = 0;
  for (int c : counts) {
    rows += c;
    if (c > 0) ++active;
  }
  Work w;
  w.flops_gate_up = 2.0 * rows * (2.0 * inter) * h;
  w.flops_down = 2.0 * rows * h * inter;
  w.weight_bytes_gate_up = 2.0 * active * (2.0 * inter) * h;
  w.weight_bytes_down = 2.0 * active * h * inter;
  w.act_bytes_gate_up = 2.0 * rows * (h + 2.0 * inter);
  w.act_bytes_down = 2.0 * rows * (inter + h);
  w.io_bytes = 2.0 * tokens * h * 2.0 + 4.0 * tokens * shape.experts;
  return w;
}

PlantedExperts choose_planted_experts(std::span<const int> counts, double fraction) {
  if (!(fraction >= 0.0 && fraction <= 1.0))
    throw std::invalid_argument("choose_planted_experts: fraction must be in [0, 1]");
  std::int64_t total = 0;
  for (int c : counts) {
    if (c < 0) throw std::invalid_argument("choose_planted_experts: negative row count");
    total += c;
  }
  PlantedExperts out;
  if (total == 0 || fraction == 0.0) return out;
  // first_by[s]: the expert whose addition first reached a subset sum of s rows (experts in index
  // order, so following first_by back from s visits strictly lower experts); -1: not reachable yet.
  std::vector<int> first_by(static_cast<std::size_t>(total) + 1, -1);
  std::vector<bool> reachable(static_cast<std::size_t>(total) + 1, false);
  reachable[0] = true;
  for (std::size_t e = 0; e < counts.size(); ++e) {
    const auto w = static_cast<std::int64_t>(counts[e]);
    if (w == 0) continue;
    for (std::int64_t s = total; s >= w; --s) {
      const auto su = static_cast<std::size_t>(s);
      if (!reachable[su] && reachable[su - static_cast<std::size_t>(w)]) {
        reachable[su] = true;
        first_by[su] = static_cast<int>(e);
      }
    }
  }
  const double target = fraction * static_cast<double>(total);
  std::int64_t best = 0;
  for (std::int64_t s = 1; s <= total; ++s) {
    if (!reachable[static_cast<std::size_t>(s)]) continue;
    if (std::abs(static_cast<double>(s) - target) < std::abs(static_cast<double>(best) - target)) best = s;
  }
  for (std::int64_t s = best; s > 0;) {
    const int e = first_by[static_cast<std::size_t>(s)];
    out.experts.push_back(e);
    s -= counts[static_cast<std::size_t>(e)];
  }
  std::sort(out.experts.begin(), out.experts.end());
  out.rows = best;
  out.flop_share = static_cast<double>(best) / static_cast<double>(total);
  return out;
}

std::uint16_t float_to_bf16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value = 0.0f;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

namespace {

// fp64 dot product of two fp32 rows. Eight independent partial sums: the compiler vectorises them without
// reassociating one sum (no -ffast-math), which makes the reference several times faster.
double dot(const float* a, const float* b, std::size_t n) {
  constexpr std::size_t kLanes = 8;
  double lane[kLanes] = {};
  std::size_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (std::size_t l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(a[c + l]) * static_cast<double>(b[c + l]);
  double sum = 0.0;
  for (; c < n; ++c) sum += static_cast<double>(a[c]) * static_cast<double>(b[c]);
  for (double v : lane) sum += v;
  return sum;
}

// One expert's contribution to every (token, slot) routed to it: contrib[at * H + c] for slot `at`.
void reference_expert(const Shape& shape, int tokens, int e, std::span<const std::uint16_t> x,
                      std::span<const std::uint16_t> gate_up, std::span<const std::uint16_t> down,
                      const RoutingResult& routing, std::vector<float>& wgu, std::vector<float>& wd,
                      std::vector<float>& xf, std::vector<float>& act, std::vector<double>& contrib) {
  const std::size_t h = static_cast<std::size_t>(shape.hidden);
  const std::size_t inter = static_cast<std::size_t>(shape.intermediate);
  const int k = shape.top_k;
  const std::uint16_t* src_gu = gate_up.data() + static_cast<std::size_t>(e) * 2 * inter * h;
  const std::uint16_t* src_d = down.data() + static_cast<std::size_t>(e) * h * inter;
  for (std::size_t i = 0; i < wgu.size(); ++i) wgu[i] = bf16_to_float(src_gu[i]);
  for (std::size_t i = 0; i < wd.size(); ++i) wd[i] = bf16_to_float(src_d[i]);
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < k; ++j) {
      const std::size_t at = static_cast<std::size_t>(t) * k + j;
      if (routing.expert[at] != e) continue;
      for (std::size_t c = 0; c < h; ++c) xf[c] = bf16_to_float(x[static_cast<std::size_t>(t) * h + c]);
      for (std::size_t i = 0; i < inter; ++i) {
        const double g = dot(xf.data(), wgu.data() + i * h, h);
        const double u = dot(xf.data(), wgu.data() + (inter + i) * h, h);
        // The GPU stores gate and up in bf16, computes SiLU(gate) * up in fp32 and stores that in bf16
        // (so the activation is exact in fp32).
        const double gb = bf16_to_float(float_to_bf16(static_cast<float>(g)));
        const double ub = bf16_to_float(float_to_bf16(static_cast<float>(u)));
        act[i] = bf16_to_float(float_to_bf16(static_cast<float>(gb / (1.0 + std::exp(-gb)) * ub)));
      }
      const double w = routing.weight[at];
      for (std::size_t c = 0; c < h; ++c) {
        const double d = dot(act.data(), wd.data() + c * inter, inter);
        contrib[at * h + c] = w * bf16_to_float(float_to_bf16(static_cast<float>(d)));
      }
    }
  }
}

}  // namespace

std::vector<double> reference_ffn(const Shape& shape, int tokens, std::span<const std::uint16_t> x,
                                  std::span<const std::uint16_t> gate_up, std::span<const std::uint16_t> down,
                                  const RoutingResult& routing) {
  const std::size_t h = static_cast<std::size_t>(shape.hidden);
  const std::size_t inter = static_cast<std::size_t>(shape.intermediate);
  const int k = shape.top_k;
  std::vector<int> active;
  for (int e = 0; e < shape.experts; ++e)
    if (routing.counts[static_cast<std::size_t>(e)] > 0) active.push_back(e);
  // Experts in parallel (each widens its weights to fp32 once); every (token, slot) belongs to one expert,
  // so the workers write disjoint parts of `contrib`. It is the check of every process (once per variant),
  // and it was most of a filtered bench process's time when it ran on one core.
  std::vector<double> contrib(static_cast<std::size_t>(tokens) * k * h, 0.0);
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    std::vector<float> wgu(2 * inter * h), wd(h * inter), xf(h), act(inter);
    for (std::size_t i = next++; i < active.size(); i = next++)
      reference_expert(shape, tokens, active[i], x, gate_up, down, routing, wgu, wd, xf, act, contrib);
  };
  const std::size_t threads =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, std::max<std::size_t>(active.size(), 1));
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  std::vector<double> y(static_cast<std::size_t>(tokens) * h, 0.0);
  for (std::size_t t = 0; t < static_cast<std::size_t>(tokens); ++t)
    for (std::size_t j = 0; j < static_cast<std::size_t>(k); ++j)
      for (std::size_t c = 0; c < h; ++c) y[t * h + c] += contrib[(t * k + j) * h + c];
  return y;
}

}  // namespace perfgate::expert_gemm
