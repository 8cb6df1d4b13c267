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

// table[rows[k]] for every k.
std::vector<int> pick(const std::vector<int>& table, const std::vector<int>& rows) {
  std::vector<int> out;
  out.reserve(rows.size());
  for (int r : rows) out.push_back(table[static_cast<std::size_t>(r)]);
  return out;
}

template <typename T>
std::uint16_t* const* rows_ptrs(const DeviceBuffer<T>& ptrs) {
  return reinterpret_cast<std::uint16_t* const*>(ptrs.get());
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
      back_free_(plan.gpus),
      partial_free_(plan.gpus) {
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
  const PullTables pull = pull_tables(plan_, g);
  d.pull_src_token = expert_gemm::to_device(pull.recv_src_token);
  d.pull_term_gpu = expert_gemm::to_device(pull.term_gpu);
  d.pull_term_row = expert_gemm::to_device(pull.term_row);
}

void ExchangeRound::upload_peer_pointers() {
  std::vector<void*> recv, back, partial;
  for (Gpu& d : gpus_) {
    recv.push_back(d.recv.get());
    back.push_back(d.back.get());
    partial.push_back(d.partial.get());
  }
  for (int g = 0; g < plan_.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    gpu(g).recv_ptrs = expert_gemm::to_device(recv);
    gpu(g).back_ptrs = expert_gemm::to_device(back);
    gpu(g).partial_ptrs = expert_gemm::to_device(partial);
  }
}

// A synchronous upload, but only when a caller passes other x buffers than last time: never inside a timed
// loop, which dispatches the same problem's x again and again.
void ExchangeRound::upload_x(const std::vector<const std::uint16_t*>& x) {
  if (x == uploaded_x_) return;
  std::vector<void*> ptrs;
  for (const std::uint16_t* p : x) ptrs.push_back(const_cast<std::uint16_t*>(p));  // a table of addresses only
  for (int g = 0; g < plan_.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    gpu(g).x_ptrs = expert_gemm::to_device(ptrs);
  }
  uploaded_x_ = x;
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

void ExchangeRound::copy_rows(bool back, bool planted) {
  const Bytes& b = planted ? planted_bytes_[back ? 1 : 0] : back ? combine_bytes_ : dispatch_bytes_;
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
  std::vector<const void*> from;
  std::vector<void*> to;
  for (Gpu& d : gpus_) {
    from.push_back(back ? d.partial.get() : d.send.get());
    to.push_back(back ? d.back.get() : d.recv.get());
  }
  std::vector<const Bytes*> calls = {back ? &combine_bytes_ : &dispatch_bytes_};
  if (planted_for(Exchange::nccl)) calls.push_back(&planted_bytes_[back ? 1 : 0]);  // the same rows again
  for (const Bytes* b : calls)
    transfers::nccl::all_to_all_v(plan_.gpus, from.data(), to.data(), b->bytes.data(), b->send_offset.data(),
                                  b->recv_offset.data(), set_.comm_streams().data());
#else
  throw std::runtime_error("this build has no NCCL");
#endif
}

void ExchangeRound::scatter_rows(bool back, const std::vector<const std::uint16_t*>& x, int max_ctas) {
  const int n = plan_.gpus;
  for (int g = 0; g < n; ++g) {
    const auto i = static_cast<std::size_t>(g);
    const std::size_t next = at(g, (g + 1) % n, n);
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    if (back) {  // partial rows, grouped by source GPU, back to the rows their home sent them from
      launch_scatter_to_peers(gpu(g).partial.get(), nullptr, gpu(g).recv_src_gpu.get(), gpu(g).recv_src_row.get(),
                              plan_.recv_rows[i], plan_.recv_offset[next], hidden_, rows_ptrs(gpu(g).back_ptrs),
                              set_.comm(g), max_ctas);
    } else {  // x's rows, grouped by destination GPU, gathered by token
      launch_scatter_to_peers(x[i], gpu(g).send_token.get(), gpu(g).send_dest_gpu.get(), gpu(g).send_dest_row.get(),
                              plan_.send_rows[i], plan_.send_offset[next], hidden_, rows_ptrs(gpu(g).recv_ptrs),
                              set_.comm(g), max_ctas);
    }
  }
}

// Planted rows: a = source row (x's token, or the partial row), b = destination GPU, c = its row there.
void ExchangeRound::scatter_planted(bool back, const std::vector<const std::uint16_t*>& x, int max_ctas) {
  for (int g = 0; g < plan_.gpus; ++g) {
    const Planted& p = gpu(g).planted[back ? 1 : 0];
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    launch_scatter_to_peers(back ? gpu(g).partial.get() : x[static_cast<std::size_t>(g)], p.a.get(), p.b.get(),
                            p.c.get(), p.rows, 0, hidden_, rows_ptrs(back ? gpu(g).back_ptrs : gpu(g).recv_ptrs),
                            set_.comm(g), max_ctas);
  }
}

void ExchangeRound::write_to_peers(bool back, Exchange kind, const std::vector<const std::uint16_t*>& x, int max_ctas) {
  GpuEvents& free = back ? back_free_ : recv_free_;
  for (int g = 0; g < plan_.gpus; ++g) free.wait_all(g, set_.comm(g));
  if (kind == Exchange::copy_engine) {
    if (!back) pack(x);
    copy_rows(back, false);
    if (planted_for(kind)) copy_rows(back, true);
  } else {
    scatter_rows(back, x, max_ctas);
    if (planted_for(kind)) scatter_planted(back, x, max_ctas);
  }
  set_.comm_barrier();  // every receiver waits for every sender's writes, the planted ones included
}

// x of every GPU is read by its peers: the barrier orders each reader after whatever each sender queued
// before on its comm stream. Each GPU writes only its own receive buffer, whose one reader (its own experts)
// the layer joins into the same comm stream before combine, so no event is needed for it, and when the pull
// returns each GPU's comm stream already holds its rows: no barrier after.
void ExchangeRound::pull_dispatch(const std::vector<const std::uint16_t*>& x, int max_ctas) {
  upload_x(x);
  set_.comm_barrier();
  const int n = plan_.gpus;
  for (int g = 0; g < n; ++g) {
    const auto i = static_cast<std::size_t>(g);
    Gpu& d = gpu(g);
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    // Starting with the next peer's rows, as the push kernel does: the GPUs' first reads hit different senders.
    launch_pull_rows(rows_ptrs(d.x_ptrs), d.recv_src_gpu.get(), d.pull_src_token.get(), nullptr, plan_.recv_rows[i],
                     plan_.recv_offset[at(g, (g + 1) % n, n)], hidden_, d.recv.get(), set_.comm(g), max_ctas);
    if (!planted_for(Exchange::pull)) continue;
    const Planted& p = d.planted[0];  // a = source GPU, b = its token, c = the receive row
    launch_pull_rows(rows_ptrs(d.x_ptrs), p.a.get(), p.b.get(), p.c.get(), p.rows, 0, hidden_, d.recv.get(),
                     set_.comm(g), max_ctas);
  }
}

// The partial rows of every GPU are read by the home GPUs: the barrier orders each home after every GPU's
// comm stream, into which the layer joined the experts that wrote them. Their next writer (the same chunk's
// experts, next layer pass) waits for partial_free_, recorded here once each home is done reading.
void ExchangeRound::pull_combine(const std::vector<std::uint16_t*>& out, int max_ctas) {
  set_.comm_barrier();
  for (int g = 0; g < plan_.gpus; ++g) {
    Gpu& d = gpu(g);
    std::uint16_t* rows = out[static_cast<std::size_t>(g)] + rows_of(plan_.first_token, hidden_);
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    launch_pull_sum(rows_ptrs(d.partial_ptrs), d.home_begin.get(), d.pull_term_gpu.get(), d.pull_term_row.get(),
                    plan_.tokens, hidden_, rows, set_.comm(g), max_ctas);
    if (planted_for(Exchange::pull))  // the first tokens' sums again: the same bits into the same rows
      launch_pull_sum(rows_ptrs(d.partial_ptrs), d.home_begin.get(), d.pull_term_gpu.get(), d.pull_term_row.get(),
                      d.planted[1].rows, hidden_, rows, set_.comm(g), max_ctas);
    partial_free_.record(g, set_.comm(g));
  }
}

void ExchangeRound::dispatch(Exchange kind, const std::vector<const std::uint16_t*>& x, int max_ctas) {
  bench::NvtxRange range("EP_Dispatch");
  if (kind == Exchange::nccl) {
    pack(x);
    nccl_exchange(false);  // NCCL orders each receiver's stream after its data arrived
  } else if (kind == Exchange::pull) {
    pull_dispatch(x, max_ctas);
  } else {
    write_to_peers(false, kind, x, max_ctas);
  }
}

void ExchangeRound::combine(Exchange kind, const std::vector<std::uint16_t*>& out, int max_ctas) {
  bench::NvtxRange range("EP_Combine");
  for (int g = 0; g < plan_.gpus; ++g) recv_free_.record(g, set_.comm(g));
  if (kind == Exchange::pull) return pull_combine(out, max_ctas);  // no combine buffer, no separate sum
  if (kind == Exchange::nccl) {
    nccl_exchange(true);
  } else {
    write_to_peers(true, kind, {}, max_ctas);
  }
  reduce_home(out, max_ctas);
  for (int g = 0; g < plan_.gpus; ++g) back_free_.record(g, set_.comm(g));
}

void ExchangeRound::plant(Exchange kind, double fraction) {
  if (kind == plant_kind_ && fraction == plant_fraction_) return;
  plant_kind_ = kind;
  plant_fraction_ = fraction;
  for (int g = 0; g < plan_.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    plant_tables(g, false);
    plant_tables(g, true);
  }
  const auto rb = static_cast<std::size_t>(row_bytes_);
  for (int k = 0; k < 2; ++k) {  // the first planted_count rows of every block, at the block's offsets
    planted_bytes_[k] = k == 0 ? dispatch_bytes_ : combine_bytes_;
    for (std::size_t& bytes : planted_bytes_[k].bytes)
      bytes = static_cast<std::size_t>(planted_count(static_cast<std::int64_t>(bytes / rb), fraction)) * rb;
  }
}

// The planted rows of GPU g's dispatch (back false) or combine. kernel: a = source row, b = destination GPU,
// c = its row there (launch_scatter_to_peers); pull dispatch: a = source GPU, b = its token, c = the receive
// row (launch_pull_rows); pull combine: the first `rows` home tokens, no table. nccl and copy_engine use
// planted_bytes_; their rows are counted for planted_share.
void ExchangeRound::plant_tables(int g, bool back) {
  const auto i = static_cast<std::size_t>(g);
  Planted& p = gpu(g).planted[back ? 1 : 0];
  const bool pull = plant_kind_ == Exchange::pull;
  if (pull && back) {
    p = Planted{.a = {}, .b = {}, .c = {}, .rows = planted_count(plan_.tokens, plant_fraction_)};
    return;
  }
  const std::vector<int> rows = planted_rows(plan_, g, pull || back ? Side::recv : Side::send, plant_fraction_);
  std::vector<int> a = rows, b, c;
  if (pull) {
    a = pick(plan_.recv_src_gpu[i], rows);
    for (int r : rows) b.push_back(recv_src_token(plan_, g, r));
    c = rows;
  } else if (back) {
    b = pick(plan_.recv_src_gpu[i], rows);
    c = pick(plan_.recv_src_row[i], rows);
  } else {
    a = pick(plan_.send_token[i], rows);
    b = pick(plan_.send_dest_gpu[i], rows);
    c = pick(plan_.send_dest_row[i], rows);
  }
  p = Planted{.a = expert_gemm::to_device(a),
              .b = expert_gemm::to_device(b),
              .c = expert_gemm::to_device(c),
              .rows = static_cast<std::int64_t>(rows.size())};
}

double ExchangeRound::planted_share(bool combine) const {
  if (plant_fraction_ <= 0) return 0;
  double planted = 0, moved = 0;
  const bool tokens = combine && plant_kind_ == Exchange::pull;
  for (int g = 0; g < plan_.gpus; ++g) {
    planted += static_cast<double>(gpus_[static_cast<std::size_t>(g)].planted[combine ? 1 : 0].rows);
    moved += static_cast<double>(tokens ? plan_.tokens : plan_.send_rows[static_cast<std::size_t>(g)]);
  }
  return moved > 0 ? planted / moved : 0;
}

void ExchangeRound::reduce_home(const std::vector<std::uint16_t*>& out, int max_ctas) {
  for (int g = 0; g < plan_.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    std::uint16_t* rows = out[static_cast<std::size_t>(g)] + rows_of(plan_.first_token, hidden_);
    launch_row_sum(gpu(g).back.get(), gpu(g).home_begin.get(), gpu(g).home_rows.get(), nullptr, plan_.tokens, hidden_,
                   rows, set_.comm(g), max_ctas);
  }
}

}  // namespace perfgate::expert_parallel
