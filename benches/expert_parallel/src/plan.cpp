#include "perfgate/expert_parallel/plan.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace perfgate::expert_parallel {
namespace {

std::size_t at(int a, int b, int gpus) { return static_cast<std::size_t>(a) * static_cast<std::size_t>(gpus) + b; }

// Token u's (local expert, weight) pairs on GPU d, in top-k order.
struct TokenOnGpu {
  std::vector<int> experts;
  std::vector<float> weights;
};

// For every (source s, destination d): the chunk's tokens of s that d needs, ascending.
using Wanted = std::vector<std::vector<int>>;  // [s * gpus + d]

Wanted find_wanted(const expert_gemm::RoutingResult& routing, int top_k, const ExchangePlan& p, int tokens_per_gpu) {
  Wanted wanted(static_cast<std::size_t>(p.gpus) * p.gpus);
  for (int s = 0; s < p.gpus; ++s)
    for (int t = p.first_token; t < p.first_token + p.tokens; ++t) {
      const std::size_t u = static_cast<std::size_t>(s) * tokens_per_gpu + t;
      std::vector<bool> hit(static_cast<std::size_t>(p.gpus), false);
      for (int j = 0; j < top_k; ++j)
        hit[static_cast<std::size_t>(gpu_of_expert(routing.expert[u * top_k + j], p.experts_per_gpu))] = true;
      for (int d = 0; d < p.gpus; ++d)
        if (hit[static_cast<std::size_t>(d)]) wanted[at(s, d, p.gpus)].push_back(t);
    }
  return wanted;
}

// Counts and the exclusive prefix sums of both buffer layouts.
void plan_offsets(const Wanted& wanted, ExchangePlan& p) {
  const std::size_t n = static_cast<std::size_t>(p.gpus) * p.gpus;
  p.counts.assign(n, 0);
  p.send_offset.assign(n, 0);
  p.recv_offset.assign(n, 0);
  p.send_rows.assign(static_cast<std::size_t>(p.gpus), 0);
  p.recv_rows.assign(static_cast<std::size_t>(p.gpus), 0);
  for (std::size_t i = 0; i < n; ++i) p.counts[i] = static_cast<std::int64_t>(wanted[i].size());
  for (int s = 0; s < p.gpus; ++s)
    for (int d = 0; d < p.gpus; ++d) {
      p.send_offset[at(s, d, p.gpus)] = p.send_rows[static_cast<std::size_t>(s)];
      p.send_rows[static_cast<std::size_t>(s)] += p.counts[at(s, d, p.gpus)];
      p.recv_offset[at(d, s, p.gpus)] = p.recv_rows[static_cast<std::size_t>(d)];
      p.recv_rows[static_cast<std::size_t>(d)] += p.counts[at(s, d, p.gpus)];
    }
}

// The send and receive row tables: row i of s for d lands at recv_offset[d][s] + i on d.
void plan_rows(const Wanted& wanted, ExchangePlan& p) {
  const auto g = static_cast<std::size_t>(p.gpus);
  p.send_token.assign(g, {});
  p.send_dest_gpu.assign(g, {});
  p.send_dest_row.assign(g, {});
  p.recv_src_gpu.assign(g, {});
  p.recv_src_row.assign(g, {});
  for (int d = 0; d < p.gpus; ++d)
    p.recv_src_gpu[static_cast<std::size_t>(d)].resize(p.recv_rows[static_cast<std::size_t>(d)]);
  for (int d = 0; d < p.gpus; ++d)
    p.recv_src_row[static_cast<std::size_t>(d)].resize(p.recv_rows[static_cast<std::size_t>(d)]);
  for (int s = 0; s < p.gpus; ++s)
    for (int d = 0; d < p.gpus; ++d) {
      const std::vector<int>& tokens = wanted[at(s, d, p.gpus)];
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        const auto send_row = static_cast<int>(p.send_offset[at(s, d, p.gpus)] + static_cast<std::int64_t>(i));
        const auto recv_row = static_cast<int>(p.recv_offset[at(d, s, p.gpus)] + static_cast<std::int64_t>(i));
        p.send_token[static_cast<std::size_t>(s)].push_back(tokens[i]);
        p.send_dest_gpu[static_cast<std::size_t>(s)].push_back(d);
        p.send_dest_row[static_cast<std::size_t>(s)].push_back(recv_row);
        p.recv_src_gpu[static_cast<std::size_t>(d)][static_cast<std::size_t>(recv_row)] = s;
        p.recv_src_row[static_cast<std::size_t>(d)][static_cast<std::size_t>(recv_row)] = send_row;
      }
    }
}

// For every token of s: the rows of its combine buffer to sum (one per destination, ascending).
void plan_home(ExchangePlan& p) {
  const auto g = static_cast<std::size_t>(p.gpus);
  p.home_begin.assign(g, {});
  p.home_rows.assign(g, {});
  for (std::size_t s = 0; s < g; ++s) {
    std::vector<std::vector<int>> rows(static_cast<std::size_t>(p.tokens));
    for (std::size_t r = 0; r < p.send_token[s].size(); ++r)  // send rows are grouped by d ascending
      rows[static_cast<std::size_t>(p.send_token[s][r] - p.first_token)].push_back(static_cast<int>(r));
    p.home_begin[s].push_back(0);
    for (const std::vector<int>& token_rows : rows) {
      p.home_rows[s].insert(p.home_rows[s].end(), token_rows.begin(), token_rows.end());
      p.home_begin[s].push_back(static_cast<int>(p.home_rows[s].size()));
    }
  }
}

// The (receive row, local expert) pairs of every GPU, with their gate weights.
void plan_pairs(const expert_gemm::RoutingResult& routing, int top_k, int tokens_per_gpu, ExchangePlan& p) {
  const auto g = static_cast<std::size_t>(p.gpus);
  p.pair_begin.assign(g, {});
  p.pair_row.assign(g, {});
  p.pair_expert.assign(g, {});
  p.pair_weight.assign(g, {});
  for (int d = 0; d < p.gpus; ++d) {
    const auto dd = static_cast<std::size_t>(d);
    p.pair_begin[dd].push_back(0);
    for (std::size_t r = 0; r < p.recv_src_gpu[dd].size(); ++r) {
      const int s = p.recv_src_gpu[dd][r];
      const int t = p.send_token[static_cast<std::size_t>(s)][static_cast<std::size_t>(p.recv_src_row[dd][r])];
      const std::size_t u = static_cast<std::size_t>(s) * tokens_per_gpu + t;
      for (int j = 0; j < top_k; ++j) {
        const int e = routing.expert[u * top_k + j];
        if (gpu_of_expert(e, p.experts_per_gpu) != d) continue;
        p.pair_row[dd].push_back(static_cast<int>(r));
        p.pair_expert[dd].push_back(e - d * p.experts_per_gpu);
        p.pair_weight[dd].push_back(routing.weight[u * top_k + j]);
      }
      p.pair_begin[dd].push_back(static_cast<int>(p.pair_row[dd].size()));
    }
  }
}

}  // namespace

ExchangePlan plan_exchange(const expert_gemm::RoutingResult& routing, int experts, int top_k, int gpus,
                           int tokens_per_gpu, int first_token, int tokens) {
  if (gpus < 1 || experts % gpus != 0) throw std::invalid_argument("experts must split evenly over the GPUs");
  if (first_token < 0 || tokens < 0 || first_token + tokens > tokens_per_gpu)
    throw std::invalid_argument("token range outside the GPU's tokens");
  if (routing.expert.size() != static_cast<std::size_t>(gpus) * tokens_per_gpu * top_k)
    throw std::invalid_argument("routing does not cover gpus x tokens_per_gpu tokens");
  ExchangePlan p;
  p.gpus = gpus;
  p.experts_per_gpu = experts / gpus;
  p.first_token = first_token;
  p.tokens = tokens;
  const Wanted wanted = find_wanted(routing, top_k, p, tokens_per_gpu);
  plan_offsets(wanted, p);
  plan_rows(wanted, p);
  plan_home(p);
  plan_pairs(routing, top_k, tokens_per_gpu, p);
  return p;
}

std::vector<ExchangePlan> plan_chunks(const expert_gemm::RoutingResult& routing, int experts, int top_k, int gpus,
                                      int tokens_per_gpu, int chunks) {
  if (chunks < 1 || chunks > tokens_per_gpu) throw std::invalid_argument("chunks must be in [1, tokens]");
  std::vector<ExchangePlan> out;
  int first = 0;
  for (int c = 0; c < chunks; ++c) {
    const int n = tokens_per_gpu / chunks + (c < tokens_per_gpu % chunks ? 1 : 0);
    out.push_back(plan_exchange(routing, experts, top_k, gpus, tokens_per_gpu, first, n));
    first += n;
  }
  return out;
}

int recv_src_token(const ExchangePlan& plan, int g, int row) {
  const auto i = static_cast<std::size_t>(g);
  const auto r = static_cast<std::size_t>(row);
  return plan
      .send_token[static_cast<std::size_t>(plan.recv_src_gpu[i][r])][static_cast<std::size_t>(plan.recv_src_row[i][r])];
}

PullTables pull_tables(const ExchangePlan& plan, int g) {
  const auto i = static_cast<std::size_t>(g);
  PullTables t;
  for (std::size_t r = 0; r < plan.recv_src_gpu[i].size(); ++r)
    t.recv_src_token.push_back(recv_src_token(plan, g, static_cast<int>(r)));
  for (int row : plan.home_rows[i]) {
    t.term_gpu.push_back(plan.send_dest_gpu[i][static_cast<std::size_t>(row)]);
    t.term_row.push_back(plan.send_dest_row[i][static_cast<std::size_t>(row)]);
  }
  return t;
}

std::int64_t planted_count(std::int64_t count, double fraction) {
  return std::llround(fraction * static_cast<double>(count));
}

std::vector<int> planted_rows(const ExchangePlan& plan, int g, Side side, double fraction) {
  std::vector<int> rows;
  for (int p = 0; p < plan.gpus; ++p) {
    const bool send = side == Side::send;
    const std::int64_t count = plan.counts[send ? at(g, p, plan.gpus) : at(p, g, plan.gpus)];
    const std::int64_t first = send ? plan.send_offset[at(g, p, plan.gpus)] : plan.recv_offset[at(g, p, plan.gpus)];
    for (std::int64_t k = 0; k < planted_count(count, fraction); ++k) rows.push_back(static_cast<int>(first + k));
  }
  return rows;
}

PlantedTable planted_table(const ExchangePlan& plan, int g, Side side, double fraction) {
  PlantedTable t;
  const bool send = side == Side::send;
  for (int p = 0; p < plan.gpus; ++p) {
    const std::int64_t count = plan.counts[send ? at(g, p, plan.gpus) : at(p, g, plan.gpus)];
    const std::int64_t first = send ? plan.send_offset[at(g, p, plan.gpus)] : plan.recv_offset[at(g, p, plan.gpus)];
    const std::int64_t planted = planted_count(count, fraction);
    t.block_offset.push_back(static_cast<std::int64_t>(t.rows.size()));
    for (std::int64_t k = 0; k < count; ++k) t.rows.push_back(static_cast<int>(first + k));
    for (std::int64_t k = 0; k < planted; ++k) t.rows.push_back(static_cast<int>(first + k));
    t.planted += planted;
  }
  return t;
}

PlantedSums planted_sums(const ExchangePlan& plan, int g, double fraction) {
  const std::vector<int>& begin = plan.home_begin[static_cast<std::size_t>(g)];
  PlantedSums s;
  s.planted = planted_count(plan.tokens, fraction);
  s.begin.push_back(0);
  const auto add = [&](int t) {
    for (int i = begin[static_cast<std::size_t>(t)]; i < begin[static_cast<std::size_t>(t) + 1]; ++i)
      s.term.push_back(i);
    s.begin.push_back(static_cast<int>(s.term.size()));
    s.out.push_back(t);
  };
  for (int t = 0; t < plan.tokens; ++t) add(t);
  for (std::int64_t t = 0; t < s.planted; ++t) add(static_cast<int>(t));
  return s;
}

namespace {

// g's remote receive rows as push_sum sends them: by home token, then by home, starting at g's next peer.
std::vector<int> push_sum_order(const ExchangePlan& plan, int g) {
  const auto i = static_cast<std::size_t>(g);
  std::vector<int> rows;
  for (std::size_t r = 0; r < plan.recv_src_gpu[i].size(); ++r)
    if (plan.recv_src_gpu[i][r] != g) rows.push_back(static_cast<int>(r));
  const auto key = [&](int r) {
    const int home = plan.recv_src_gpu[i][static_cast<std::size_t>(r)];
    return std::pair(recv_src_token(plan, g, r), (home - g - 1 + plan.gpus) % plan.gpus);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](int a, int b) { return key(a) < key(b); });
  return rows;
}

void add_push_sum_row(const ExchangePlan& plan, int g, int row, int token, PushSumTables& t) {
  const auto i = static_cast<std::size_t>(g);
  t.send_row.push_back(row);
  t.send_dest_gpu.push_back(plan.recv_src_gpu[i][static_cast<std::size_t>(row)]);
  t.send_dest_row.push_back(plan.recv_src_row[i][static_cast<std::size_t>(row)]);
  t.send_token.push_back(token);
}

}  // namespace

PushSumTables push_sum_tables(const ExchangePlan& plan, int g, double fraction) {
  const auto i = static_cast<std::size_t>(g);
  PushSumTables t;
  for (int r : push_sum_order(plan, g)) add_push_sum_row(plan, g, r, recv_src_token(plan, g, r) - plan.first_token, t);
  for (int r : planted_rows(plan, g, Side::recv, fraction))
    if (plan.recv_src_gpu[i][static_cast<std::size_t>(r)] != g) add_push_sum_row(plan, g, r, -1, t);
  t.planted = static_cast<std::int64_t>(t.send_row.size()) - (plan.recv_rows[i] - plan.counts[at(g, g, plan.gpus)]);
  const PullTables pull = pull_tables(plan, g);
  t.remote_terms.assign(static_cast<std::size_t>(plan.tokens), 0);
  for (int tok = 0; tok < plan.tokens; ++tok)
    for (int k = plan.home_begin[i][static_cast<std::size_t>(tok)];
         k < plan.home_begin[i][static_cast<std::size_t>(tok) + 1]; ++k) {
      const auto term = static_cast<std::size_t>(k);
      const bool local = pull.term_gpu[term] == g;
      t.term.push_back(local ? -(pull.term_row[term] + 1) : plan.home_rows[i][term]);
      t.remote_terms[static_cast<std::size_t>(tok)] += local ? 0 : 1;
    }
  return t;
}

Traffic traffic(const ExchangePlan& plan, std::int64_t row_bytes) { return traffic(std::span(&plan, 1), row_bytes); }

Traffic traffic(std::span<const ExchangePlan> chunks, std::int64_t row_bytes) {
  Traffic t;
  if (chunks.empty()) return t;
  const int g = chunks.front().gpus;
  t.sent_remote.assign(static_cast<std::size_t>(g), 0.0);
  t.recv_remote.assign(static_cast<std::size_t>(g), 0.0);
  for (const ExchangePlan& p : chunks)
    for (int s = 0; s < g; ++s)
      for (int d = 0; d < g; ++d) {
        const double bytes = static_cast<double>(p.counts[at(s, d, g)]) * static_cast<double>(row_bytes);
        if (s == d) {
          t.local += bytes;
          continue;
        }
        t.sent_remote[static_cast<std::size_t>(s)] += bytes;
        t.recv_remote[static_cast<std::size_t>(d)] += bytes;
      }
  t.mean_sent_remote = std::accumulate(t.sent_remote.begin(), t.sent_remote.end(), 0.0) / g;
  t.max_remote = std::max(*std::max_element(t.sent_remote.begin(), t.sent_remote.end()),
                          *std::max_element(t.recv_remote.begin(), t.recv_remote.end()));
  return t;
}

std::vector<std::int64_t> expert_rows_per_gpu(std::span<const int> expert_counts, int gpus) {
  if (gpus < 1 || expert_counts.size() % static_cast<std::size_t>(gpus) != 0)
    throw std::invalid_argument("experts must split evenly over the GPUs");
  const std::size_t per_gpu = expert_counts.size() / static_cast<std::size_t>(gpus);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(gpus), 0);
  for (std::size_t e = 0; e < expert_counts.size(); ++e) rows[e / per_gpu] += expert_counts[e];
  return rows;
}

Straggler find_straggler(std::span<const std::int64_t> rows_per_gpu) {
  Straggler s;
  if (rows_per_gpu.empty()) return s;
  const auto it = std::max_element(rows_per_gpu.begin(), rows_per_gpu.end());  // first maximum
  s.gpu = static_cast<int>(it - rows_per_gpu.begin());
  s.rows = *it;
  s.mean_rows = static_cast<double>(std::accumulate(rows_per_gpu.begin(), rows_per_gpu.end(), std::int64_t{0})) /
                static_cast<double>(rows_per_gpu.size());
  s.over_mean = s.mean_rows > 0 ? static_cast<double>(s.rows) / s.mean_rows : 0.0;
  return s;
}

}  // namespace perfgate::expert_parallel
