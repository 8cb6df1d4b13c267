#include "perfgate/expert_parallel/exchange.hpp"

#include <algorithm>
#include <cstdlib>
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
      receiver_percent_(parse_receiver_percent(std::getenv(kReceiverPercentVar))),
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
    upload_push_sum_tables(g);
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

void ExchangeRound::upload_push_sum_tables(int g) {
  Gpu& d = gpu(g);
  const PushSumTables t = push_sum_tables(plan_, g, planted_for(Exchange::push_sum) ? plant_fraction_ : 0);
  d.ps_send_row = expert_gemm::to_device(t.send_row);
  d.ps_send_dest_gpu = expert_gemm::to_device(t.send_dest_gpu);
  d.ps_send_dest_row = expert_gemm::to_device(t.send_dest_row);
  d.ps_send_token = expert_gemm::to_device(t.send_token);
  d.ps_term = expert_gemm::to_device(t.term);
  d.ps_remote_terms = expert_gemm::to_device(t.remote_terms);
  d.ps_send_rows = static_cast<std::int64_t>(t.send_row.size());
  d.ps_planted = t.planted;
}

void ExchangeRound::upload_peer_pointers() {
  std::vector<void*> recv, back, partial, arrived;
  for (int g = 0; g < plan_.gpus; ++g) {
    Gpu& d = gpu(g);
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    d.arrived = expert_gemm::to_device(std::vector<int>(static_cast<std::size_t>(plan_.tokens), 0));
    d.ticket = expert_gemm::to_device(std::vector<int>{0});
    recv.push_back(d.recv.get());
    back.push_back(d.back.get());
    partial.push_back(d.partial.get());
    arrived.push_back(d.arrived.get());
  }
  for (int g = 0; g < plan_.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    gpu(g).recv_ptrs = expert_gemm::to_device(recv);
    gpu(g).back_ptrs = expert_gemm::to_device(back);
    gpu(g).partial_ptrs = expert_gemm::to_device(partial);
    gpu(g).arrived_ptrs = expert_gemm::to_device(arrived);
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

// A planted copy follows its pair's own copy on the same peer stream, before the join back: it adds its bytes
// to the batch, not another round of joins.
void ExchangeRound::copy_rows(bool back) {
  const Bytes& b = back ? combine_bytes_ : dispatch_bytes_;
  const Bytes* planted = planted_for(Exchange::copy_engine) ? &planted_bytes_[back ? 1 : 0] : nullptr;
  const int n = plan_.gpus;
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      if (b.bytes[at(s, d, n)] == 0) continue;
      const auto* from = reinterpret_cast<const char*>(back ? gpu(s).partial.get() : gpu(s).send.get());
      auto* to = reinterpret_cast<char*>(back ? gpu(d).back.get() : gpu(d).recv.get());
      set_.join(s, set_.peer(s, d), set_.comm(s));
      PERFGATE_CUDA_CHECK(cudaMemcpyPeerAsync(to + b.recv_offset[at(d, s, n)], d, from + b.send_offset[at(s, d, n)], s,
                                              b.bytes[at(s, d, n)], set_.peer(s, d)));
      if (planted != nullptr && planted->bytes[at(s, d, n)] != 0)  // the block's first rows again, same place
        PERFGATE_CUDA_CHECK(cudaMemcpyPeerAsync(to + planted->recv_offset[at(d, s, n)], d,
                                                from + planted->send_offset[at(s, d, n)], s,
                                                planted->bytes[at(s, d, n)], set_.peer(s, d)));
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
  const Bytes& b = back ? combine_bytes_ : dispatch_bytes_;
  std::vector<transfers::nccl::AllToAllV> parts = {{.send = from.data(),
                                                    .recv = to.data(),
                                                    .bytes = b.bytes.data(),
                                                    .send_offset = b.send_offset.data(),
                                                    .recv_offset = b.recv_offset.data()}};
  std::vector<void*> scratch;
  if (planted_for(Exchange::nccl)) {  // the planted rows in the same group: each pair's one launch carries them
    for (Gpu& d : gpus_) scratch.push_back(d.planted_scratch.get());
    const Bytes& p = planted_bytes_[back ? 1 : 0];
    parts.push_back({.send = from.data(),
                     .recv = scratch.data(),
                     .bytes = p.bytes.data(),
                     .send_offset = p.send_offset.data(),
                     .recv_offset = p.recv_offset.data()});
  }
  transfers::nccl::all_to_all_v(plan_.gpus, parts, set_.comm_streams().data());
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
    if (planted_for(Exchange::kernel)) {  // plant_tables: a = source row, b = destination GPU, c = its row there
      const Planted& p = gpu(g).planted[back ? 1 : 0];
      launch_scatter_to_peers(back ? gpu(g).partial.get() : x[i], p.a.get(), p.b.get(), p.c.get(), p.rows, p.first,
                              hidden_, rows_ptrs(back ? gpu(g).back_ptrs : gpu(g).recv_ptrs), set_.comm(g), max_ctas);
    } else if (back) {  // partial rows, grouped by source GPU, back to the rows their home sent them from
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

void ExchangeRound::write_to_peers(bool back, Exchange kind, const std::vector<const std::uint16_t*>& x, int max_ctas) {
  GpuEvents& free = back ? back_free_ : recv_free_;
  for (int g = 0; g < plan_.gpus; ++g) free.wait_all(g, set_.comm(g));
  if (kind == Exchange::copy_engine) {
    if (!back) pack(x);
    copy_rows(back);
  } else {
    scatter_rows(back, x, max_ctas);
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
    if (planted_for(Exchange::pull)) {  // plant_tables: a = source GPU, b = its token, c = the receive row
      const Planted& p = d.planted[0];
      launch_pull_rows(rows_ptrs(d.x_ptrs), p.a.get(), p.b.get(), p.c.get(), p.rows, p.first, hidden_, d.recv.get(),
                       set_.comm(g), max_ctas);
      continue;
    }
    // Starting with the next peer's rows, as the push kernel does: the GPUs' first reads hit different senders.
    launch_pull_rows(rows_ptrs(d.x_ptrs), d.recv_src_gpu.get(), d.pull_src_token.get(), nullptr, plan_.recv_rows[i],
                     plan_.recv_offset[at(g, (g + 1) % n, n)], hidden_, d.recv.get(), set_.comm(g), max_ctas);
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
    if (planted_for(Exchange::pull)) {  // plant_sums: a = begin, b = term GPU, c = term row, d = output row
      const Planted& p = d.planted_sums;
      launch_pull_sum(rows_ptrs(d.partial_ptrs), p.a.get(), p.b.get(), p.c.get(), p.rows, hidden_, rows, set_.comm(g),
                      max_ctas, p.d.get());
    } else {
      launch_pull_sum(rows_ptrs(d.partial_ptrs), d.home_begin.get(), d.pull_term_gpu.get(), d.pull_term_row.get(),
                      plan_.tokens, hidden_, rows, set_.comm(g), max_ctas);
    }
    partial_free_.record(g, set_.comm(g));
  }
}

// Every home sums while its rows arrive, so the launches need no barrier: each GPU's output is done when its own
// kernel is. Before it pushes, each GPU waits until every home has finished summing the last combine's rows
// (back_free_): the rows and counts it is about to send go into those buffers.
void ExchangeRound::push_sum_combine(const std::vector<std::uint16_t*>& out, int max_ctas) {
  for (int g = 0; g < plan_.gpus; ++g) back_free_.wait_all(g, set_.comm(g));
  ++push_sum_epoch_;
  for (int g = 0; g < plan_.gpus; ++g) {
    Gpu& d = gpu(g);
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    const PushSumArgs args{.partial = d.partial.get(),
                           .send_row = d.ps_send_row.get(),
                           .send_dest_gpu = d.ps_send_dest_gpu.get(),
                           .send_dest_row = d.ps_send_dest_row.get(),
                           .send_token = d.ps_send_token.get(),
                           .send_rows = d.ps_send_rows,
                           .back_ptrs = rows_ptrs(d.back_ptrs),
                           .arrived_ptrs = reinterpret_cast<int* const*>(d.arrived_ptrs.get()),
                           .back = d.back.get(),
                           .begin = d.home_begin.get(),
                           .term = d.ps_term.get(),
                           .remote_terms = d.ps_remote_terms.get(),
                           .arrived = d.arrived.get(),
                           .epoch = push_sum_epoch_,
                           .ticket = d.ticket.get(),
                           .ticket_base = d.ticket_base,
                           .tokens = plan_.tokens,
                           .out = out[static_cast<std::size_t>(g)] + rows_of(plan_.first_token, hidden_),
                           .hidden = hidden_,
                           .receiver_percent = receiver_percent_};
    d.ticket_base += static_cast<unsigned>(plan_.tokens) + launch_push_sum(args, set_.comm(g), max_ctas);
    back_free_.record(g, set_.comm(g));
  }
}

void ExchangeRound::dispatch(Exchange kind, const std::vector<const std::uint16_t*>& x, int max_ctas) {
  bench::NvtxRange range("EP_Dispatch");
  if (kind == Exchange::push_sum) kind = Exchange::kernel;
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
  if (kind == Exchange::push_sum) return push_sum_combine(out, max_ctas);
  if (kind == Exchange::nccl) {
    nccl_exchange(true);
  } else {
    write_to_peers(true, kind, {}, max_ctas);
  }
  reduce_home(kind, out, max_ctas);
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
    plant_sums(g);
    upload_push_sum_tables(g);
  }
  plant_nccl_bytes();
}

// The planted rows of GPU g's dispatch (back false) or combine, counted for planted_share, and the tables of the
// launch that moves them with the real rows. kernel: a = source row (x's token, or the partial row), b =
// destination GPU, c = its row there (launch_scatter_to_peers); pull dispatch: a = source GPU, b = its token, c =
// the receive row (launch_pull_rows). nccl and copy_engine use planted_bytes_, the pull combine plant_sums.
void ExchangeRound::plant_tables(int g, bool back) {
  const auto i = static_cast<std::size_t>(g);
  Planted& p = gpu(g).planted[back ? 1 : 0];
  p = Planted{};
  if (plant_fraction_ <= 0) return;
  const bool pull = plant_kind_ == Exchange::pull;
  const PlantedTable t = planted_table(plan_, g, pull || back ? Side::recv : Side::send, plant_fraction_);
  p.planted = t.planted;
  p.rows = static_cast<std::int64_t>(t.rows.size());
  p.first = t.block_offset[static_cast<std::size_t>((g + 1) % plan_.gpus)];
  std::vector<int> a, b, c;
  if (pull && !back) {
    a = pick(plan_.recv_src_gpu[i], t.rows);
    for (int r : t.rows) b.push_back(recv_src_token(plan_, g, r));
    c = t.rows;
  } else if (plant_kind_ == Exchange::kernel && back) {
    a = t.rows;
    b = pick(plan_.recv_src_gpu[i], t.rows);
    c = pick(plan_.recv_src_row[i], t.rows);
  } else if (plant_kind_ == Exchange::kernel) {
    a = pick(plan_.send_token[i], t.rows);
    b = pick(plan_.send_dest_gpu[i], t.rows);
    c = pick(plan_.send_dest_row[i], t.rows);
  } else {
    return;  // no table: nccl, copy_engine, the pull combine
  }
  p.a = expert_gemm::to_device(a);
  p.b = expert_gemm::to_device(b);
  p.c = expert_gemm::to_device(c);
}

// Combine's home sums of GPU g with the planted ones (planted_sums): a = begin, d = output row, and the terms:
// pull b = term GPU, c = term row (launch_pull_sum); the push variants b = the row of the combine buffer
// (launch_row_sum).
void ExchangeRound::plant_sums(int g) {
  Planted& p = gpu(g).planted_sums;
  p = Planted{};
  if (plant_fraction_ <= 0) return;
  const PlantedSums sums = planted_sums(plan_, g, plant_fraction_);
  p.rows = static_cast<std::int64_t>(sums.out.size());
  p.planted = sums.planted;
  p.a = expert_gemm::to_device(sums.begin);
  p.d = expert_gemm::to_device(sums.out);
  if (plant_kind_ == Exchange::pull) {
    const PullTables pull = pull_tables(plan_, g);
    p.b = expert_gemm::to_device(pick(pull.term_gpu, sums.term));
    p.c = expert_gemm::to_device(pick(pull.term_row, sums.term));
  } else {
    p.b = expert_gemm::to_device(pick(plan_.home_rows[static_cast<std::size_t>(g)], sums.term));
  }
}

// The first planted_count rows of every block, read from the block's own rows. copy_engine: onto the same rows
// again (its two copies of a pair are ordered on one stream). nccl: into each receiver's planted_scratch, blocks
// by source, since the sends and receives of one group may run at once.
void ExchangeRound::plant_nccl_bytes() {
  const auto rb = static_cast<std::size_t>(row_bytes_);
  const int n = plan_.gpus;
  std::vector<std::size_t> scratch_bytes(static_cast<std::size_t>(n), 0);
  for (int k = 0; k < 2; ++k) {
    Bytes& b = planted_bytes_[k];
    b = k == 0 ? dispatch_bytes_ : combine_bytes_;
    for (std::size_t& bytes : b.bytes)
      bytes = static_cast<std::size_t>(planted_count(static_cast<std::int64_t>(bytes / rb), plant_fraction_)) * rb;
    if (plant_kind_ != Exchange::nccl) continue;
    for (int r = 0; r < n; ++r) {
      std::size_t offset = 0;
      for (int s = 0; s < n; ++s) {
        b.recv_offset[at(r, s, n)] = offset;
        offset += b.bytes[at(s, r, n)];
      }
      scratch_bytes[static_cast<std::size_t>(r)] = std::max(scratch_bytes[static_cast<std::size_t>(r)], offset);
    }
  }
  for (int g = 0; g < n; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    const std::size_t bytes = planted_for(Exchange::nccl) ? scratch_bytes[static_cast<std::size_t>(g)] : 0;
    gpu(g).planted_scratch = DeviceBuffer<std::uint16_t>(bytes / 2);
  }
}

double ExchangeRound::planted_share(bool combine) const {
  if (plant_fraction_ <= 0) return 0;
  double planted = 0, moved = 0;
  const bool tokens = combine && plant_kind_ == Exchange::pull;
  for (int g = 0; g < plan_.gpus; ++g) {
    const Gpu& d = gpus_[static_cast<std::size_t>(g)];
    if (combine && plant_kind_ == Exchange::push_sum) {  // the remote rows it sends, planted ones and all
      planted += static_cast<double>(d.ps_planted);
      moved += static_cast<double>(d.ps_send_rows - d.ps_planted);
      continue;
    }
    planted += static_cast<double>(tokens ? d.planted_sums.planted : d.planted[combine ? 1 : 0].planted);
    moved += static_cast<double>(tokens ? plan_.tokens : plan_.send_rows[static_cast<std::size_t>(g)]);
  }
  return moved > 0 ? planted / moved : 0;
}

void ExchangeRound::reduce_home(Exchange kind, const std::vector<std::uint16_t*>& out, int max_ctas) {
  for (int g = 0; g < plan_.gpus; ++g) {
    PERFGATE_CUDA_CHECK(cudaSetDevice(g));
    std::uint16_t* rows = out[static_cast<std::size_t>(g)] + rows_of(plan_.first_token, hidden_);
    if (planted_for(kind)) {  // plant_sums: a = begin, b = the combine buffer's row, d = output row
      const Planted& p = gpu(g).planted_sums;
      launch_row_sum(gpu(g).back.get(), p.a.get(), p.b.get(), nullptr, p.rows, hidden_, rows, set_.comm(g), max_ctas,
                     p.d.get());
      continue;
    }
    launch_row_sum(gpu(g).back.get(), gpu(g).home_begin.get(), gpu(g).home_rows.get(), nullptr, plan_.tokens, hidden_,
                   rows, set_.comm(g), max_ctas);
  }
}

}  // namespace perfgate::expert_parallel
