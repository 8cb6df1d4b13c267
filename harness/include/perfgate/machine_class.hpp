#pragma once
// Machine classes: a baseline is only comparable on the same class of runner (docs/baselines.md).
//
// The class is derived from a run's context (the perfgate.* keys the bench support library adds):
//   GPU runs (perfgate.gpu_count >= 1):  gpu-<model>-x<count>[-of<host>] e.g. gpu-h200-x2, gpu-h200-x1-of2
//     <model> from perfgate.gpu0.name: "NVIDIA H200" -> h200, "NVIDIA GeForce RTX 4090" -> rtx4090
//     <count> is what the job sees (CUDA_VISIBLE_DEVICES applies); -of<host> is added only when
//     perfgate.host_gpu_count (every GPU of the host, from NVML) is larger. A host with more GPUs is another
//     machine type even when a job sees one of them: its launch path and its CPU differ, and a launch-bound
//     case runs measurably slower there than on a 1-GPU VM. Without that key (no NVML, older files), or when
//     it is not a number larger than <count>, the class is gpu-<model>-x<count>.
//   CPU runs:                            cpu-<family>[-amx]-<cores>c     e.g. cpu-xeon-amx-2c
//     <family> from perfgate.cpu_model ("Intel(R) Xeon(R) Platinum 8480+" -> xeon, "AMD EPYC 9654" -> epyc),
//     -amx when perfgate.amx is yes/true/1, <cores> = perfgate.cpu_cores, else Google Benchmark's num_cpus.
// Precedence for a ResultSet: a stored baseline's perfgate.baseline.machine, then the operator's override
// for the run at hand (machine_class_override(): PERFGATE_MACHINE_CLASS or --machine-class), then a context key
// perfgate.machine_class, then the derivation above. A class is a path component: [a-z0-9._-]+, not
// "." or ".."; anything else is an InputError.
#include <string>

#include "perfgate/errors.hpp"
#include "perfgate/model.hpp"

namespace perfgate {

// The operator's class for the run at hand. The library reads no environment: the CLI reads
// PERFGATE_MACHINE_CLASS (or takes --machine-class) and installs it here once, before any command runs.
// "" (the default): no override. Validated where it is used (InputError naming PERFGATE_MACHINE_CLASS).
void set_machine_class_override(std::string machine_class);
const std::string& machine_class_override();

// Derives the class from one context, ignoring overrides.
std::string derive_machine_class(const RunContext& context);

// The class of a run (precedence above, applied to each process run). Every process run of the
// ResultSet must have the same class, else InputError (field "context"). An empty ResultSet (no
// contexts) is InputError too. Use it per suite (split_by_suite) for a multi-binary set.
std::string machine_class(const ResultSet& results);

// Throws InputError (field = what) unless `name` is a valid class name.
void validate_machine_class(const std::string& name, const std::string& what = "machine class");

struct MachineClassCheck {
  bool same = false;
  std::string baseline_class;
  std::string current_class;
  std::string message;  // one line, e.g. "machine class mismatch: baseline gpu-h200-x2, current cpu-xeon-amx-2c"
  // Same class name, but a CPU suite's baseline was recorded on another CPU generation
  // (perfgate.cpu_signature, "AuthenticAMD family 25 model 17" vs "... family 26 model 2"): a VM's
  // "AMD EPYC" can cover generations far apart on the same binary (docs/baselines.md, "Machine classes").
  // `same` is false.
  bool cpu_changed = false;
  // A CPU suite whose baseline was recorded without perfgate.cpu_signature: the generation is unknown.
  // A note for the report; `same` is unaffected. Empty when not the case.
  std::string unknown_cpu_note;
  // Where the difference shows: a file of each side's first suite that differs (of the whole runs when no suite is on
  // both sides). Empty when `same`.
  std::string baseline_file;
  std::string current_file;
};

// Compares the classes of two runs suite by suite (the first component of benchmark names): every
// suite present on both sides must have the same class on both (a CPU suite run on a GPU machine has a
// CPU class, so one comparison may legitimately span classes). Without a common suite the whole runs
// are compared. baseline_class/current_class hold the class, or "class (suite), ..." when the suites of
// a side differ. The caller refuses (exit 2) unless --allow-machine-mismatch. For CPU classes
// (cpu-*) the CPU signatures of a suite must agree too where both sides record one (cpu_changed).
MachineClassCheck check_machine_class(const ResultSet& baseline, const ResultSet& current);

// The line for a mismatch that a comparison refuses, and for one that --allow-machine-mismatch let it compare: the
// check's message and what the flag does, said once.
std::string refused_mismatch(const MachineClassCheck& check);
std::string allowed_mismatch(const MachineClassCheck& check);

}  // namespace perfgate
