#pragma once
// One exchange round of the expert-parallel layer on every GPU: the device copies of an ExchangePlan's
// tables and the round's buffers, and dispatch / combine in three variants. Work is queued on the GpuSet's
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
  //   kernel       one kernel per GPU writes the rows of x straight into the peers' receive buffers.
  void dispatch(Exchange kind, const std::vector<const std::uint16_t*>& x);
  // Combine: the partial rows (one per receive row, already weighted by the gates on the expert's GPU) go
  // back to the tokens' home GPUs, which sum them into out[s]'s rows of the chunk's tokens.
  void combine(Exchange kind, const std::vector<std::uint16_t*>& out);

  std::uint16_t* recv(int g) { return gpu(g).recv.get(); }
  std::uint16_t* partial(int g) { return gpu(g).partial.get(); }

 private:
  struct Gpu {
    DeviceBuffer<std::uint16_t> send, recv, partial, back;
    DeviceBuffer<int> send_token, send_dest_gpu, send_dest_row, recv_src_gpu, recv_src_row, home_begin, home_rows;
    DeviceBuffer<void*> recv_ptrs, back_ptrs;  // every GPU's recv / back buffer, for the kernel variant
  };
  // The byte counts and offsets of one direction, for NCCL's all-to-all-v.
  struct Bytes {
    std::vector<std::size_t> bytes, send_offset, recv_offset;
  };
  Gpu& gpu(int g) { return gpus_[static_cast<std::size_t>(g)]; }
  void allocate(int g);
  void upload_tables(int g);
  void upload_peer_pointers();
  void plan_bytes();
  void pack(const std::vector<const std::uint16_t*>& x);
  void copy_rows(bool back);  // copy_engine: send -> recv (dispatch) or partial -> back (combine)
  void nccl_exchange(bool back);
  void reduce_home(const std::vector<std::uint16_t*>& out);
  // kernel: each GPU's rows through the peer-store kernel, starting with its next peer's rows.
  void scatter_rows(bool back, const std::vector<const std::uint16_t*>& x);
  // copy_engine and kernel write into the peers' buffers: before that, every sender waits for its
  // receivers' last reads of them (free); after, every receiver waits for every sender (a barrier).
  void write_to_peers(bool back, Exchange kind, const std::vector<const std::uint16_t*>& x);

  GpuSet& set_;
  ExchangePlan plan_;
  int hidden_;
  std::int64_t row_bytes_;
  std::vector<Gpu> gpus_;
  Bytes dispatch_bytes_, combine_bytes_;
  // Recorded where a GPU's receive rows (recv_free_, at combine's start: the layer joins its experts into
  // the comm streams before combine) and its combine rows (back_free_, after the sum at home) were last read.
  GpuEvents recv_free_, back_free_;
};

// Whether this build has NCCL (the nccl variant); without it the nccl cases are not registered.
bool have_nccl();

}  // namespace perfgate::expert_parallel
