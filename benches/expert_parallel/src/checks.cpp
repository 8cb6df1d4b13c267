#include "perfgate/expert_parallel/checks.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "perfgate/bench/check.hpp"
#include "perfgate/bench/cuda.hpp"
#include "perfgate/expert_gemm/moe_kernels.hpp"

namespace perfgate::expert_parallel {
namespace eg = expert_gemm;
namespace {

std::vector<std::uint16_t> download(const std::uint16_t* data, int g, std::size_t count) {
  std::vector<std::uint16_t> host(count);
  PERFGATE_CUDA_CHECK(cudaSetDevice(g));
  if (count > 0) PERFGATE_CUDA_CHECK(cudaMemcpy(host.data(), data, count * 2, cudaMemcpyDeviceToHost));
  return host;
}

std::size_t hidden() { return static_cast<std::size_t>(eg::deepseek_v3().hidden); }

// Receive rows of GPU d that differ from the x rows the plan sent there: the first one, described.
std::optional<std::string> compare_received(const ExchangePlan& plan, int d, const std::vector<std::uint16_t>& recv,
                                            const std::vector<std::vector<std::uint16_t>>& x) {
  const std::size_t h = hidden();
  const auto dd = static_cast<std::size_t>(d);
  for (std::size_t r = 0; r < plan.recv_src_gpu[dd].size(); ++r) {
    const auto s = static_cast<std::size_t>(plan.recv_src_gpu[dd][r]);
    const auto t = static_cast<std::size_t>(plan.send_token[s][static_cast<std::size_t>(plan.recv_src_row[dd][r])]);
    if (std::memcmp(recv.data() + r * h, x[s].data() + t * h, h * 2) != 0)
      return fmt::format("wrong result: dispatch: GPU {} receive row {} is not token {} of GPU {}", d, r, t, s);
  }
  return std::nullopt;
}

// The CPU sum of token t's partial rows (the rows its destinations sent back), rounded to bf16.
std::vector<float> cpu_combine(const ExchangePlan& plan, int s, int t,
                               const std::vector<std::vector<std::uint16_t>>& partial) {
  const std::size_t h = hidden();
  const auto ss = static_cast<std::size_t>(s);
  std::vector<float> acc(h, 0.0f);
  const auto i = static_cast<std::size_t>(t - plan.first_token);
  for (int k = plan.home_begin[ss][i]; k < plan.home_begin[ss][i + 1]; ++k) {
    const auto row = static_cast<std::size_t>(plan.home_rows[ss][static_cast<std::size_t>(k)]);
    const auto d = static_cast<std::size_t>(plan.send_dest_gpu[ss][row]);
    const auto r = static_cast<std::size_t>(plan.send_dest_row[ss][row]);
    for (std::size_t c = 0; c < h; ++c) acc[c] += eg::bf16_to_float(partial[d][r * h + c]);
  }
  for (float& v : acc) v = eg::bf16_to_float(eg::float_to_bf16(v));
  return acc;
}

// Every GPU's partial rows, filled with random bf16 on the device and downloaded.
std::vector<std::vector<std::uint16_t>> random_partials(ExchangeRound& round) {
  std::vector<std::vector<std::uint16_t>> partial;
  const ExchangePlan& plan = round.plan();
  for (int g = 0; g < plan.gpus; ++g) {
    const std::size_t count = static_cast<std::size_t>(plan.recv_rows[static_cast<std::size_t>(g)]) * hidden();
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    if (count > 0)
      eg::launch_fill_random_bf16(round.partial(g), count, 77 + static_cast<std::uint64_t>(g), 1.0f, nullptr);
    PERFGATE_CUDA_CHECK(cudaDeviceSynchronize());
    partial.push_back(download(round.partial(g), g, count));
  }
  return partial;
}

// Expert e's gate|up ([2I, H]) and down ([H, I]) weights, appended to the host buffers.
void append_expert(int gpus, int e, std::vector<std::uint16_t>& gate_up, std::vector<std::uint16_t>& down) {
  const int per_gpu = eg::deepseek_v3().experts / gpus;
  const int g = gpu_of_expert(e, per_gpu);
  const eg::ExpertWeights& w = local_weights(gpus, g);
  const auto gu = download(w.gate_up(e - g * per_gpu), g, w.gate_up_elements());
  const auto dn = download(w.down(e - g * per_gpu), g, w.down_elements());
  gate_up.insert(gate_up.end(), gu.begin(), gu.end());
  down.insert(down.end(), dn.begin(), dn.end());
}

// fp64 reference of token t of GPU g: its eight experts' FFNs, weighted by the gates.
std::vector<double> reference_token(const Problem& problem, int g, int t) {
  eg::Shape shape = eg::deepseek_v3();
  const auto k = static_cast<std::size_t>(shape.top_k);
  const std::size_t u =
      static_cast<std::size_t>(g) * static_cast<std::size_t>(problem.tokens) + static_cast<std::size_t>(t);
  eg::RoutingResult r;  // the token's experts renumbered 0..k-1
  std::vector<std::uint16_t> gate_up, down;
  for (std::size_t j = 0; j < k; ++j) {
    append_expert(problem.gpus, problem.routing.expert[u * k + j], gate_up, down);
    r.expert.push_back(static_cast<int>(j));
    r.weight.push_back(problem.routing.weight[u * k + j]);
    r.counts.push_back(1);
  }
  shape.experts = shape.top_k;
  const auto x =
      download(problem.x[static_cast<std::size_t>(g)].get() + static_cast<std::size_t>(t) * hidden(), g, hidden());
  return eg::reference_ffn(shape, 1, x, gate_up, down, r);
}

}  // namespace

void poison_outputs(const Problem& problem) {
  for (int g = 0; g < problem.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    const auto& out = problem.out[static_cast<std::size_t>(g)];
    eg::launch_fill_bf16(out.get(), out.size(), 0x7FC0, nullptr);  // NaN: an unwritten row fails
    PERFGATE_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

std::optional<std::string> check_dispatch(GpuSet& set, ExchangeRound& round, Exchange kind, const Problem& problem) {
  const ExchangePlan& plan = round.plan();
  for (int g = 0; g < plan.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    const std::size_t bytes = static_cast<std::size_t>(plan.recv_rows[static_cast<std::size_t>(g)]) * hidden() * 2;
    if (bytes > 0) PERFGATE_CUDA_CHECK(cudaMemset(round.recv(g), 0xFF, bytes));
  }
  set.synchronize();
  round.dispatch(kind, problem.x_ptrs());
  set.synchronize();
  std::vector<std::vector<std::uint16_t>> x;
  for (int g = 0; g < plan.gpus; ++g)
    x.push_back(
        download(problem.x[static_cast<std::size_t>(g)].get(), g, problem.x[static_cast<std::size_t>(g)].size()));
  for (int d = 0; d < plan.gpus; ++d) {
    const auto recv =
        download(round.recv(d), d, static_cast<std::size_t>(plan.recv_rows[static_cast<std::size_t>(d)]) * hidden());
    if (auto err = compare_received(plan, d, recv, x)) return err;
  }
  return std::nullopt;
}

std::optional<std::string> check_combine(GpuSet& set, ExchangeRound& round, Exchange kind, const Problem& problem) {
  const ExchangePlan& plan = round.plan();
  set.synchronize();  // no earlier combine still reads the partial rows that random_partials overwrites
  const auto partial = random_partials(round);
  poison_outputs(problem);
  round.combine(kind, problem.out_ptrs());
  set.synchronize();
  const int step = std::max(1, plan.tokens / 64);
  for (int s = 0; s < plan.gpus; ++s) {
    const auto out =
        download(problem.out[static_cast<std::size_t>(s)].get(), s, problem.out[static_cast<std::size_t>(s)].size());
    std::vector<float> got, want;
    for (int t = plan.first_token; t < plan.first_token + plan.tokens; t += step) {
      const auto ref = cpu_combine(plan, s, t, partial);
      want.insert(want.end(), ref.begin(), ref.end());
      for (std::size_t c = 0; c < hidden(); ++c)
        got.push_back(eg::bf16_to_float(out[static_cast<std::size_t>(t) * hidden() + c]));
    }
    if (auto err = bench::check_relative_l2<float, float>(fmt::format("combine output of GPU {}", s), got, want, 1e-3))
      return err;
  }
  return std::nullopt;
}

std::optional<std::string> check_layer_sample(const Problem& problem, const std::vector<std::pair<int, int>>& sample) {
  std::vector<float> got;
  std::vector<double> want;
  for (const auto& [g, t] : sample) {
    const auto ref = reference_token(problem, g, t);
    want.insert(want.end(), ref.begin(), ref.end());
    const auto out =
        download(problem.out[static_cast<std::size_t>(g)].get() + static_cast<std::size_t>(t) * hidden(), g, hidden());
    for (std::uint16_t v : out) got.push_back(eg::bf16_to_float(v));
  }
  return bench::check_relative_l2<float, double>("layer output (sampled tokens)", got, want, 2e-2);
}

}  // namespace perfgate::expert_parallel
