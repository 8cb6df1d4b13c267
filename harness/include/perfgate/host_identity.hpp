#pragma once
// Which host wrote a plain Google Benchmark binary's JSON, as far as the context Google Benchmark writes tells
// (host_name, num_cpus, caches). Such JSON records no CPU facts of perfgate's; `perfgate baseline update` gives it
// this host's only when it was written here, so that its baseline is filed under the class `perfgate run` looks
// in on this host (docs/baselines.md, "Machine classes").
#include <filesystem>
#include <optional>
#include <string>

#include "perfgate/model.hpp"

namespace perfgate {

struct HostIdentity {
  std::string name;    // gethostname(); Google Benchmark's host_name
  int cpus = 0;        // CPUs online; Google Benchmark's num_cpus
  std::string caches;  // "L1 Data 48 KiB, L1 Instruction 32 KiB, L2 Unified 1 MiB, ..."; "" when unknown
};

// This host: its name, the CPUs online, and CPU 0's caches as Google Benchmark reads them (from `sysfs_cpu`,
// the folder holding cpu0/cache/index<N>/{level,type,size}).
HostIdentity this_host(const std::filesystem::path& sysfs_cpu = "/sys/devices/system/cpu");

// What a process run's context says of the host that wrote it.
HostIdentity run_host(const RunContext& context);

// Google Benchmark's "caches" array in a context, as words (HostIdentity::caches); "" when the context has none
// or it is malformed.
std::string cache_layout(const RunContext& context);

struct HostMismatch {
  std::string field;    // "context.host_name", "context.num_cpus" or "context.caches"
  std::string message;  // what differs, in words
};

// Why the run of `context` was not written on `here`: the first of its host name, CPU count and caches that is
// missing or differs (caches only where both sides know theirs). nullopt when all of them agree.
std::optional<HostMismatch> written_elsewhere(const RunContext& context, const HostIdentity& here);

}  // namespace perfgate
