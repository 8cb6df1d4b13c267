#pragma once
// The expert_parallel cases for a machine with a given number of GPUs: every benchmark name the suite
// registers and what it measures, and the parsing of names and case-list files back. Kept apart from the
// benchmark bodies so the unit test checks them without a GPU.
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "perfgate/expert_gemm/moe_problem.hpp"

namespace perfgate::expert_parallel {

enum class Op { dispatch, combine, layer };
// push_sum: the push kernel's rows, summed at home as they arrive (combine; its dispatch is the push kernel's).
enum class Exchange { nccl, copy_engine, kernel, pull, push_sum };
// pipelined_ce: pipelined, but the exchanges that run beside the experts go over the copy engines (no SMs taken
// from the GEMMs); the first dispatch and the last combine, which nothing overlaps, over the case's exchange.
enum class Schedule { serial, pipelined, pipelined_ce };

const char* op_name(Op op);
const char* exchange_name(Exchange exchange);
const char* schedule_name(Schedule schedule);
// Whether the case list has pipelined_ce layers over this exchange: the ones whose kernels take SMs.
bool overlaps_on_copy_engines(Exchange exchange);

struct CaseDesc {
  std::string name;
  Op op = Op::dispatch;
  Exchange exchange = Exchange::nccl;
  Schedule schedule = Schedule::serial;  // layer only
  int chunks = 1;                        // layer: pipelined splits the tokens into this many chunks
  int gpus = 2;
  int tokens = 0;  // per GPU
  expert_gemm::Routing routing = expert_gemm::Routing::uniform;
};

// GPUs the suite registers cases for: the visible count, but at least 2, so that a machine with fewer
// GPUs lists the 2-GPU cases (and skips them with the reason) under the names a 2-GPU run uses.
int gpus_to_register(int visible_gpus);
std::vector<int> token_counts();  // tokens per GPU: 128, 512, 4096
// Chunk counts of the pipelined layer: 2, 3 and 4. More chunks hide more of the exchange (only the first
// chunk's dispatch and the last one's combine are exposed), but every chunk re-reads every expert's weights, so
// the GEMMs cost more per row as chunks shrink: each count is measured.
std::vector<int> pipeline_chunks();

// Every case for `gpus` GPUs; NCCL cases only when with_nccl. push_sum has combine and layer cases only: its
// dispatch is the push kernel's, measured as dispatch/kernel.
//   expert_parallel/<dispatch|combine>/<exchange>/gpus:G/tokens:T/routing:R
//   expert_parallel/layer/serial/exchange:X/gpus:G/tokens:T/routing:R
//   expert_parallel/layer/pipelined/exchange:X/chunks:C/gpus:G/tokens:T/routing:R
//   expert_parallel/layer/pipelined_ce/exchange:X/chunks:C/gpus:G/tokens:T/routing:R (X: kernel, pull, push_sum)
std::vector<CaseDesc> plan_cases(int gpus, bool with_nccl);
std::string case_name(const CaseDesc& c);
std::optional<CaseDesc> parse_case_name(std::string_view name);  // nullopt: not a name case_name makes

// PERFGATE_EP_OVERLAP_CTAS: the CTA cap of the kernel and pull exchange launches that the pipelined layer runs
// beside the experts (docs/expert_parallel.md). Unset or empty: kDefaultOverlapCtas; 0: no cap (full grid).
inline constexpr const char* kOverlapCtasVar = "PERFGATE_EP_OVERLAP_CTAS";
inline constexpr int kDefaultOverlapCtas = 24;
// Throws std::invalid_argument, naming the variable, when text is not a whole number in [0, 100000].
int parse_overlap_ctas(const char* text);

// PERFGATE_EP_PUSH_SUM_RECEIVERS: the share of push_sum's grid, in percent, that sums the arriving rows while the
// rest pushes (an experiment setting). Unset or empty: kDefaultReceiverPercent.
inline constexpr const char* kReceiverPercentVar = "PERFGATE_EP_PUSH_SUM_RECEIVERS";
inline constexpr int kDefaultReceiverPercent = 25;
// Throws std::invalid_argument, naming the variable, when text is not a whole number in [1, 99].
int parse_receiver_percent(const char* text);

// The patterns of a case-list file (cases/*.txt): one a line, '#' starts a comment, blanks skipped.
std::vector<std::string> read_case_list(std::istream& in);

}  // namespace perfgate::expert_parallel
