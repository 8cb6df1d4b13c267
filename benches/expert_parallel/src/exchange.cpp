#include "perfgate/expert_parallel/exchange.hpp"

#include <stdexcept>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/nvtx.hpp"
#include "perfgate/expert_parallel/kernels.hpp"
#if defined(PERFGATE_HAVE_NCCL)
#include "perfgate/transfers/nccl_world.hpp"
#endif

namespace perfgate::expert_parallel {
namespace {

std::size_t at(int a, int b, int gpus) { return static_cast<std::size_t>(a) * static_cast<std::size_t>(gpus) + b; }

std::size_t rows_of(std::int64_t rows, int hidden) {
  return static_cast<std::size_t>(rows) * static_cast<std::size_t>(hidden);
}

}  // namespace

bool have_nccl() {
#if defined(PERFGATE_HAVE_NCCL)
  return true;
#else
  return false;
#endif
}

ExchangeRound::ExchangeRound(GpuSet& set, const ExchangePlan& plan, int hidden)
    : set_(set),
      plan_(plan),
      hidden_(hidden),
      row_bytes_(static_cast<std::int64_t>(hidden) * 2),
      recv_free_(plan.gpus),
      back_free_(plan.gpus) {
  if (plan.gpus != set.size()) throw std::invalid_argument("plan and GPU set differ in GPU count");
  if (hidden % 8 != 0) throw std::invalid_argument("hidden must be a multiple of 8");
  gpus_.resize(static_cast<std::size_t>(plan.gpus));
  for (int g = 0; g < plan.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    allocate(g);
    upload_tables(g);
  }
  upload_peer_pointers();
  plan_bytes();
}

void ExchangeRound::allocate(int g) {
  const auto i = static_cast<std::size_t>(g);
  gpu(g).send = DeviceBuffer<std::uint16_t>(rows_of(plan_.send_rows[i], hidden_));
  gpu(g).back = DeviceBuffer<std::uint16_t>(rows_of(plan_.send_rows[i], hidden_));
  gpu(g).recv = DeviceBuffer<std::uint16_t>(rows_of(plan_.recv_rows[i], hidden_));
  gpu(g).partial = DeviceBuffer<std::uint16_t>(rows_of(plan_.recv_rows[i], hidden_));
}

void ExchangeRound::upload_tables(int g) {
  const auto i = static_cast<std::size_t>(g);
  Gpu& d = gpu(g);
  d.send_token = expert_gemm::to_device(plan_.send_token[i]);
  d.send_dest_gpu = expert_gemm::to_device(plan_.send_dest_gpu[i]);
  d.send_dest_row = expert_gemm::to_device(plan_.send_dest_row[i]);
  d.recv_src_gpu = expert_gemm::to_device(plan_.recv_src_gpu[i]);
  d.recv_src_row = expert_gemm::to_device(plan_.recv_src_row[i]);
  d.home_begin = expert_gemm::to_device(plan_.home_begin[i]);
  d.home_rows = expert_gemm::to_device(plan_.home_rows[i]);
}

void ExchangeRound::upload_peer_pointers() {
  std::vector<void*> recv, back;
  for (Gpu& d : gpus_) {
    recv.push_back(d.recv.get());
    back.push_back(d.back.get());
  }
  for (int g = 0; g < plan_.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    gpu(g).recv_ptrs = expert_gemm::to_device(recv);
    gpu(g).back_ptrs = expert_gemm::to_device(back);
  }
}

// Dispatch: s sends counts[s][d] rows from send_offset[s][d] to d's recv_offset[d][s]; combine reverses it.
void ExchangeRound::plan_bytes() {
  const int n = plan_.gpus;
  const std::size_t cells = static_cast<std::size_t>(n) * n;
  for (Bytes* b : {&dispatch_bytes_, &combine_bytes_}) {
    b->bytes.assign(cells, 0);
    b->send_offset.assign(cells, 0);
    b->recv_offset.assign(cells, 0);
  }
  const auto rb = static_cast<std::size_t>(row_bytes_);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      const auto count = static_cast<std::size_t>(plan_.counts[at(s, d, n)]);
      dispatch_bytes_.bytes[at(s, d, n)] = count * rb;
      dispatch_bytes_.send_offset[at(s, d, n)] = static_cast<std::size_t>(plan_.send_offset[at(s, d, n)]) * rb;
      dispatch_bytes_.recv_offset[at(d, s, n)] = static_cast<std::size_t>(plan_.recv_offset[at(d, s, n)]) * rb;
      combine_bytes_.bytes[at(d, s, n)] = count * rb;
      combine_bytes_.send_offset[at(d, s, n)] = static_cast<std::size_t>(plan_.recv_offset[at(d, s, n)]) * rb;
      combine_bytes_.recv_offset[at(s, d, n)] = static_cast<std::size_t>(plan_.send_offset[at(s, d, n)]) * rb;
    }
}

void ExchangeRound::pack(const std::vector<const std::uint16_t*>& x) {
  for (int g = 0; g < plan_.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    launch_gather_rows(x[static_cast<std::size_t>(g)], gpu(g).send_token.get(),
                       plan_.send_rows[static_cast<std::size_t>(g)], hidden_, gpu(g).send.get(), set_.comm(g));
  }
}

void ExchangeRound::copy_rows(bool back) {
  const Bytes& b = back ? combine_bytes_ : dispatch_bytes_;
  const int n = plan_.gpus;
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      if (b.bytes[at(s, d, n)] == 0) continue;
      const auto* from = reinterpret_cast<const char*>(back ? gpu(s).partial.get() : gpu(s).send.get());
      auto* to = reinterpret_cast<char*>(back ? gpu(d).back.get() : gpu(d).recv.get());
      set_.join(s, set_.peer(s, d), set_.comm(s));
      PERFGATE_CUDA_CHECK(cudaMemcpyPeerAsync(to + b.recv_offset[at(d, s, n)], d, from + b.send_offset[at(s, d, n)], s,
                                              b.bytes[at(s, d, n)], set_.peer(s, d)));
    }
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d)
      if (b.bytes[at(s, d, n)] != 0) set_.join(s, set_.comm(s), set_.peer(s, d));
}

void ExchangeRound::nccl_exchange([[maybe_unused]] bool back) {
#if defined(PERFGATE_HAVE_NCCL)
  const Bytes& b = back ? combine_bytes_ : dispatch_bytes_;
  std::vector<const void*> from;
  std::vector<void*> to;
  for (Gpu& d : gpus_) {
    from.push_back(back ? d.partial.get() : d.send.get());
    to.push_back(back ? d.back.get() : d.recv.get());
  }
  transfers::nccl::all_to_all_v(plan_.gpus, from.data(), to.data(), b.bytes.data(), b.send_offset.data(),
                                b.recv_offset.data(), set_.comm_streams().data());
#else
  throw std::runtime_error("this build has no NCCL");
#endif
}

void ExchangeRound::scatter_rows(bool back, const std::vector<const std::uint16_t*>& x) {
  const int n = plan_.gpus;
  for (int g = 0; g < n; ++g) {
    const auto i = static_cast<std::size_t>(g);
    const std::size_t next = at(g, (g + 1) % n, n);
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    if (back) {  // partial rows, grouped by source GPU, back to the rows their home sent them from
      launch_scatter_to_peers(gpu(g).partial.get(), nullptr, gpu(g).recv_src_gpu.get(), gpu(g).recv_src_row.get(),
                              plan_.recv_rows[i], plan_.recv_offset[next], hidden_,
                              reinterpret_cast<std::uint16_t* const*>(gpu(g).back_ptrs.get()), set_.comm(g));
    } else {  // x's rows, grouped by destination GPU, gathered by token
      launch_scatter_to_peers(x[i], gpu(g).send_token.get(), gpu(g).send_dest_gpu.get(), gpu(g).send_dest_row.get(),
                              plan_.send_rows[i], plan_.send_offset[next], hidden_,
                              reinterpret_cast<std::uint16_t* const*>(gpu(g).recv_ptrs.get()), set_.comm(g));
    }
  }
}

void ExchangeRound::write_to_peers(bool back, Exchange kind, const std::vector<const std::uint16_t*>& x) {
  GpuEvents& free = back ? back_free_ : recv_free_;
  for (int g = 0; g < plan_.gpus; ++g) free.wait_all(g, set_.comm(g));
  if (kind == Exchange::copy_engine) {
    if (!back) pack(x);
    copy_rows(back);
  } else {
    scatter_rows(back, x);
  }
  set_.comm_barrier();  // every receiver waits for every sender's writes
}

void ExchangeRound::dispatch(Exchange kind, const std::vector<const std::uint16_t*>& x) {
  bench::NvtxRange range("EP_Dispatch");
  if (kind == Exchange::nccl) {
    pack(x);
    nccl_exchange(false);  // NCCL orders each receiver's stream after its data arrived
  } else {
    write_to_peers(false, kind, x);
  }
}

void ExchangeRound::combine(Exchange kind, const std::vector<std::uint16_t*>& out) {
  bench::NvtxRange range("EP_Combine");
  for (int g = 0; g < plan_.gpus; ++g) recv_free_.record(g, set_.comm(g));
  if (kind == Exchange::nccl) {
    nccl_exchange(true);
  } else {
    write_to_peers(true, kind, {});
  }
  reduce_home(out);
  for (int g = 0; g < plan_.gpus; ++g) back_free_.record(g, set_.comm(g));
}

void ExchangeRound::reduce_home(const std::vector<std::uint16_t*>& out) {
  for (int g = 0; g < plan_.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    std::uint16_t* rows = out[static_cast<std::size_t>(g)] + rows_of(plan_.first_token, hidden_);
    launch_row_sum(gpu(g).back.get(), gpu(g).home_begin.get(), gpu(g).home_rows.get(), nullptr, plan_.tokens, hidden_,
                   rows, set_.comm(g));
  }
}

}  // namespace perfgate::expert_parallel
