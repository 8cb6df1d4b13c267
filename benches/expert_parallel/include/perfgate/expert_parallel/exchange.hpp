#pragma once
// One exchange round of the expert-parallel layer on every GPU: the device copies of an ExchangePlan's
// tables and the round's buffers, and dispatch / combine in four variants. Work is queued on the GpuSet's
// comm streams; when a call returns, each GPU's comm stream is ordered after the data it needs has landed.
#include <cstdint>
#include <vector>

#include "perfgate/expert_gemm/moe_runner.hpp"
#include "perfgate/expert_parallel/case_plan.hpp"
#include "perfgate/expert_parallel/plan.hpp"
#include "perfgate/expert_parallel/world.hpp"

namespace perfgate::expert_parallel {

using expert_gemm::DeviceBuffer;

class ExchangeRound {
 public:
  ExchangeRound(GpuSet& set, const ExchangePlan& plan, int hidden);
  const ExchangePlan& plan() const { return plan_; }
  int hidden() const { return hidden_; }

  // Dispatch: the send rows of x[s] (all of GPU s's tokens, [tokens_per_gpu, H]) into the receive buffers.
  //   nccl         pack the send rows, then one grouped ncclSend/ncclRecv all-to-all-v;
  //   copy_engine  pack, then one cudaMemcpyPeerAsync per (GPU, peer) on its own stream;
  //   kernel       one kernel per GPU writes the rows of x straight into the peers' receive buffers;
  //   pull         after a barrier, one kernel per GPU reads its receive rows straight from the senders' x
  //                (peer pointers). The senders' x must stay unchanged while a pull may read it: the suite
  //                fills x once, before any round runs, and never writes it again;
  //   push_sum     the kernel variant's dispatch.
  // max_ctas > 0 caps the grid of the kernel and pull variants' kernels (the pipelined layer's overlapped
  // exchange); 0: as many CTAs as fill the SMs.
  void dispatch(Exchange kind, const std::vector<const std::uint16_t*>& x, int max_ctas = 0);
  // Combine: the partial rows (one per receive row, already weighted by the gates on the expert's GPU) go
  // back to the tokens' home GPUs, which sum them into out[s]'s rows of the chunk's tokens. pull: after a
  // barrier, each home GPU reads and sums its tokens' partial rows straight from the GPUs holding them, in
  // one kernel (no combine buffer, no separate sum), the same terms in the same order as the push variants.
  // push_sum: one kernel per GPU pushes its partial rows to their homes and, beside it, sums its own tokens as
  // their rows arrive (launch_push_sum; no barrier, no separate sum).
  void combine(Exchange kind, const std::vector<std::uint16_t*>& out, int max_ctas = 0);
  // The writer of GPU g's partial rows (the layer's experts) calls this on its stream before writing them: it
  // waits for every home GPU's last pull combine, which reads them from afar (a no-op before any pull).
  void wait_partial_free(int g, cudaStream_t writer) { partial_free_.wait_all(g, writer); }

  // Planted slowdown (PERFGATE_GPU_SLOWDOWN): from now on dispatch and combine of `kind` move `fraction`
  // more rows, folded into the launches and calls that move the real rows, so that the extra work costs about
  // `fraction` of the time instead of a launch's or call's overhead. Each (GPU, peer) block moves its first
  // planted_count rows a second time (results unchanged):
  //   nccl         the same grouped send/recv carries them too, into a scratch buffer;
  //   copy_engine  a second copy per (GPU, peer) on the same peer stream, in the same batch, onto the same rows;
  //   kernel       the same scatter launch walks planted_table's rows (the planted rows after each block's own);
  //   pull         dispatch: the same pull launch walks planted_table's rows;
  //   push_sum     combine: the push launch sends every remote block's planted rows again after its own rows.
  // Combine's home sums (every variant) repeat the first planted_count(tokens) tokens' sums in the same launch
  // (planted_sums), into the same rows. Uploads tables when (kind, fraction) changes: call it outside timing.
  // 0 plants nothing: every launch and call is the unplanted one.
  void plant(Exchange kind, double fraction);
  // The planted rows (tokens for a pull combine) over the rows (tokens) one call moves, all GPUs together.
  double planted_share(bool combine) const;

  std::uint16_t* recv(int g) { return gpu(g).recv.get(); }
  std::uint16_t* partial(int g) { return gpu(g).partial.get(); }

 private:
  // A planted launch's tables (plant_tables: what a..d hold depends on the variant).
  struct Planted {
    DeviceBuffer<int> a, b, c, d;
    std::int64_t rows = 0;     // rows (sums) the launch walks, its own and the planted ones
    std::int64_t first = 0;    // where it starts: its next peer's block
    std::int64_t planted = 0;  // the planted ones among them
  };
  struct Gpu {
    DeviceBuffer<std::uint16_t> send, recv, partial, back;
    DeviceBuffer<int> send_token, send_dest_gpu, send_dest_row, recv_src_gpu, recv_src_row, home_begin, home_rows;
    DeviceBuffer<int> pull_src_token, pull_term_gpu, pull_term_row;  // pull: PullTables
    DeviceBuffer<void*> recv_ptrs, back_ptrs;     // every GPU's recv / back buffer, for the kernel variant
    DeviceBuffer<void*> x_ptrs, partial_ptrs;     // every GPU's x / partial buffer, for the pull variant
    Planted planted[2];                           // [0] dispatch, [1] combine: the kernel and pull row launches
    Planted planted_sums;                         // combine's home sums
    DeviceBuffer<std::uint16_t> planted_scratch;  // nccl: where the planted rows land
    // push_sum: PushSumTables (planted rows included when planted) and the home's arrival counters
    DeviceBuffer<int> ps_send_row, ps_send_dest_gpu, ps_send_dest_row, ps_send_token, ps_term, ps_remote_terms;
    std::int64_t ps_send_rows = 0, ps_planted = 0;
    DeviceBuffer<int> arrived;
    DeviceBuffer<void*> arrived_ptrs;
    DeviceBuffer<int> ticket;  // the summing CTAs' ticket counter
    unsigned ticket_base = 0;  // tickets taken by the launches so far
  };
  // The byte counts and offsets of one direction, for NCCL's all-to-all-v.
  struct Bytes {
    std::vector<std::size_t> bytes, send_offset, recv_offset;
  };
  Gpu& gpu(int g) { return gpus_[static_cast<std::size_t>(g)]; }
  void allocate(int g);
  void upload_tables(int g);
  void upload_peer_pointers();
  void upload_x(const std::vector<const std::uint16_t*>& x);  // pull: when x changed since the last upload
  void plan_bytes();
  void plant_tables(int g, bool back);
  void plant_sums(int g);
  void plant_nccl_bytes();
  void pack(const std::vector<const std::uint16_t*>& x);
  void copy_rows(bool back);  // copy_engine: send -> recv (dispatch) or partial -> back (combine)
  void nccl_exchange(bool back);
  void reduce_home(Exchange kind, const std::vector<std::uint16_t*>& out, int max_ctas);
  // kernel: each GPU's rows through the peer-store kernel, starting with its next peer's rows.
  void scatter_rows(bool back, const std::vector<const std::uint16_t*>& x, int max_ctas);
  // copy_engine and kernel write into the peers' buffers: before that, every sender waits for its
  // receivers' last reads of them (free); after, every receiver waits for every sender (a barrier).
  void write_to_peers(bool back, Exchange kind, const std::vector<const std::uint16_t*>& x, int max_ctas);
  // pull reads from the peers' buffers: before that, a barrier (every reader waits for every producer).
  void pull_dispatch(const std::vector<const std::uint16_t*>& x, int max_ctas);
  void pull_combine(const std::vector<std::uint16_t*>& out, int max_ctas);
  void upload_push_sum_tables(int g);  // with the planted rows when push_sum is planted
  void push_sum_combine(const std::vector<std::uint16_t*>& out, int max_ctas);
  bool planted_for(Exchange kind) const { return plant_fraction_ > 0 && plant_kind_ == kind; }

  GpuSet& set_;
  ExchangePlan plan_;
  int hidden_;
  std::int64_t row_bytes_;
  std::vector<Gpu> gpus_;
  Bytes dispatch_bytes_, combine_bytes_;
  // nccl and copy_engine's planted rows: [0] dispatch, [1] combine; nccl's land in planted_scratch.
  Bytes planted_bytes_[2];
  Exchange plant_kind_ = Exchange::nccl;
  double plant_fraction_ = 0;
  std::vector<const std::uint16_t*> uploaded_x_;  // the x pointers x_ptrs holds
  unsigned push_sum_epoch_ = 0;                   // push_sum combines run so far on the arrival counters
  int receiver_percent_;                          // PERFGATE_EP_PUSH_SUM_RECEIVERS
  // Recorded where a GPU's receive rows (recv_free_, at combine's start: the layer joins its experts into
  // the comm streams before combine) and its combine rows (back_free_, after the sum at home) were last read
  // by the push variants, and where a home GPU finished pulling its partial rows from every GPU
  // (partial_free_, after a pull combine; their writer waits for it through wait_partial_free).
  GpuEvents recv_free_, back_free_, partial_free_;
};

// Whether this build has NCCL (the nccl variant); without it the nccl cases are not registered.
bool have_nccl();

}  // namespace perfgate::expert_parallel
