#pragma once
// The context keys of a benchmark JSON file: those a bench binary writes (benchmark::AddCustomContext) and
// the harness reads, those the harness writes into run and baseline files and reads back, and the
// informational ones a suite writes for people. The contract between benches/ and harness/, defined once:
// no other C++ or CUDA source spells a "perfgate." key (tools/check_context_keys.py, ctest
// unit.context_keys). Both include it (the interface library perfgate::contract), so it depends on the
// standard library only. docs/architecture.md, "Conventions the pieces agree on", says what each means.
#include <string>

namespace perfgate::context_keys {

// What every key starts with. The runner also takes stderr lines that start with it for context.
inline constexpr const char* kPrefix = "perfgate.";

// The suite's declarations: a bench binary writes them (its own registration); the harness reads them
// (loader, compare, run, explain).
inline constexpr const char* kSuite = "perfgate.suite";                   // the suite a binary measures
inline constexpr const char* kNvtxRanges = "perfgate.nvtx_ranges";        // its NVTX ranges, comma-separated
inline constexpr const char* kHostDependent = "perfgate.host_dependent";  // regex: time follows the host
inline constexpr const char* kFloorBound = "perfgate.floor_bound";        // regex: interference only slows them
inline constexpr const char* kComputeBound = "perfgate.compute_bound";    // regex: time follows the SM clock

// Host facts: benches/support (main.cpp) writes them in every bench binary; the harness reads them for the
// machine class, the CPU generation of baselines and learned noise, and the session record.
inline constexpr const char* kCpuModel = "perfgate.cpu_model";
inline constexpr const char* kCpuSignature = "perfgate.cpu_signature";  // family/model/stepping
inline constexpr const char* kCpuIsa = "perfgate.cpu_isa";
inline constexpr const char* kCpuCores = "perfgate.cpu_cores";
inline constexpr const char* kAmx = "perfgate.amx";  // "yes" or "no"
inline constexpr const char* kBuildType = "perfgate.build_type";
inline constexpr const char* kGbenchVersion = "perfgate.gbench_version";

// GPU facts: benches/support (cuda.cu) writes them in every binary with a GPU fixture; the harness reads
// the counts and the names (machine class, the gate's plan, run options).
inline constexpr const char* kGpuCount = "perfgate.gpu_count";  // visible to the process (CUDA)
// Every GPU of the host (NVML), hidden ones included; absent without NVML.
inline constexpr const char* kHostGpuCount = "perfgate.host_gpu_count";
inline constexpr const char* kNoGpu = "perfgate.gpu";  // why there is none, when gpu_count is 0
inline constexpr const char* kCudaRuntime = "perfgate.cuda_runtime";
inline constexpr const char* kCudaDriver = "perfgate.cuda_driver";
inline constexpr const char* kDriver = "perfgate.driver";  // the NVIDIA driver's version (NVML)
inline constexpr const char* kNvml = "perfgate.nvml";      // why NVML is unavailable
// Per GPU: gpu_key(0, kGpuName) is "perfgate.gpu0.name".
inline constexpr const char* kGpuName = "name";
inline constexpr const char* kGpuSmCount = "sm_count";
inline constexpr const char* kGpuMemoryGib = "memory_gib";
inline constexpr const char* kGpuMemBandwidth = "mem_bw_theoretical_GBps";
inline constexpr const char* kGpuSmClock = "sm_clock_mhz";
inline constexpr const char* kGpuMaxSmClock = "max_sm_clock_mhz";
inline constexpr const char* kGpuClockEvents = "clock_events";
inline constexpr const char* kGpuPcie = "pcie";
inline constexpr const char* kGpuNvlinks = "nvlinks";
inline std::string gpu_key(int device, const char* field) {
  return std::string(kNoGpu) + std::to_string(device) + "." + field;
}
// The GPU slow-down knob (benches/support, gpu_slowdown.cpp), when active; informational.
inline constexpr const char* kGpuSlowdown = "perfgate.gpu_slowdown";
inline constexpr const char* kGpuSlowdownFilter = "perfgate.gpu_slowdown_filter";

// Run keys: the runner writes them into every process run it loads; the harness reads them back (session
// record, compare's sides, baseline update, run summaries).
inline constexpr const char* kGitCommit = "perfgate.git_commit";
inline constexpr const char* kLegacyCommit = "perfgate.commit";  // older files' commit, read only
inline constexpr const char* kMachineClass = "perfgate.machine_class";
inline constexpr const char* kRunSide = "perfgate.run.side";
inline constexpr const char* kRunRound = "perfgate.run.round";
inline constexpr const char* kRunBinary = "perfgate.run.binary";
inline constexpr const char* kRunSeed = "perfgate.run.seed";  // one per session: pooled sessions count them
inline constexpr const char* kRunPhase = "perfgate.run.phase";
inline constexpr const char* kRunSched = "perfgate.run.sched";
inline constexpr const char* kRunCpus = "perfgate.run.cpus";
// Where the host facts of a run came from when the binary recorded none: the runner's own reading of its host.
inline constexpr const char* kRunHostFacts = "perfgate.run.host_facts";

// Baseline keys: `perfgate baseline update` (baseline_store) writes them at a baseline's top level; the
// loader copies them into every stored run, and compare and the machine-class check read them.
inline constexpr const char* kBaselinePrefix = "perfgate.baseline.";
inline constexpr const char* kBaselineMachine = "perfgate.baseline.machine";
inline constexpr const char* kBaselineDate = "perfgate.baseline.date";
inline constexpr const char* kBaselineCommit = "perfgate.baseline.commit";
inline constexpr const char* kBaselineCommand = "perfgate.baseline.command";
inline constexpr const char* kBaselineProcessRuns = "perfgate.baseline.process_runs";

// Informational keys one suite writes for people reading its JSON; the harness does not read them.
inline constexpr const char* kSyntheticSlowdown = "perfgate.synthetic.slowdown";
inline constexpr const char* kSyntheticSlowdownFilter = "perfgate.synthetic.slowdown_filter";
inline constexpr const char* kSyntheticSlowdownPhase = "perfgate.synthetic.slowdown_phase";
inline constexpr const char* kLoraSlowdown = "perfgate.lora_slowdown";
inline constexpr const char* kOnednnVersion = "perfgate.onednn_version";
inline constexpr const char* kOnednnImpl = "perfgate.onednn_impl";
inline constexpr const char* kOnednnCalibrationImpl = "perfgate.onednn_calibration_impl";
inline constexpr const char* kLoraFused2Products = "perfgate.lora_fused2_products";
inline constexpr const char* kStreamingModelPrefix = "perfgate.streaming.model.";  // + the model's name
inline constexpr const char* kExpertParallelRegisteredGpus = "perfgate.expert_parallel.registered_gpus";
inline constexpr const char* kExpertParallelNccl = "perfgate.expert_parallel.nccl";
inline constexpr const char* kExpertParallelOverlapCtas = "perfgate.expert_parallel.overlap_ctas";
inline constexpr const char* kTransfersRegisteredGpus = "perfgate.transfers.registered_gpus";
inline constexpr const char* kTransfersMethod = "perfgate.transfers.method";
inline constexpr const char* kTransfersMeasuredCeilings = "perfgate.transfers.measured_ceilings";
inline constexpr const char* kTransfersNccl = "perfgate.transfers.nccl";
inline constexpr const char* kTransfersTopology = "perfgate.transfers.topology";
inline constexpr const char* kTransfersGpuPrefix = "perfgate.transfers.gpu";  // + N + ".links"

}  // namespace perfgate::context_keys
