#include "perfgate/host_identity.hpp"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace perfgate {

namespace {

std::string size_in_words(long long bytes) {
  return bytes >= (1LL << 20) && bytes % (1LL << 20) == 0 ? fmt::format("{} MiB", bytes >> 20)
                                                          : fmt::format("{} KiB", bytes >> 10);
}

// A "caches" array as Google Benchmark writes it ([{"type": "Data", "level": 1, "size": 49152, ...}]), in words.
std::string layout_of(const nlohmann::json& caches) {
  if (!caches.is_array()) return "";
  std::string out;
  for (const auto& cache : caches) {
    if (!cache.is_object() || !cache.contains("level") || !cache.contains("size")) return "";
    const auto level = cache["level"], type = cache.value("type", nlohmann::json("")), size = cache["size"];
    if (!level.is_number_integer() || !size.is_number_integer() || !type.is_string()) return "";
    out += fmt::format("{}L{} {} {}", out.empty() ? "" : ", ", level.get<long long>(), type.get<std::string>(),
                       size_in_words(size.get<long long>()));
  }
  return out;
}

// CPU 0's caches read as Google Benchmark reads them (index0, index1, ... until one is missing; "48K" is 49152).
nlohmann::json sysfs_caches(const std::filesystem::path& sysfs_cpu) {
  nlohmann::json caches = nlohmann::json::array();
  for (int index = 0;; ++index) {
    const auto dir = sysfs_cpu / "cpu0" / "cache" / ("index" + std::to_string(index));
    std::ifstream size_file(dir / "size"), type_file(dir / "type"), level_file(dir / "level");
    long long size = 0;
    std::string suffix, type;
    int level = 0;
    if (!(size_file >> size) || !(type_file >> type) || !(level_file >> level)) break;
    size_file >> suffix;
    if (suffix == "K") size <<= 10;
    else if (suffix == "M") size <<= 20;
    else if (suffix == "G") size <<= 30;
    caches.push_back({{"type", type}, {"level", level}, {"size", size}});
  }
  return caches;
}

}  // namespace

std::string cache_layout(const RunContext& context) {
  return layout_of(nlohmann::json::parse(context.get("caches"), nullptr, false));
}

HostIdentity this_host(const std::filesystem::path& sysfs_cpu) {
  HostIdentity host;
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) == 0) host.name = name.data();
  host.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  host.caches = layout_of(sysfs_caches(sysfs_cpu));
  return host;
}

HostIdentity run_host(const RunContext& context) {
  HostIdentity host;
  host.name = context.get("host_name");
  host.cpus = std::atoi(context.get("num_cpus", "0").c_str());
  host.caches = cache_layout(context);
  return host;
}

std::optional<HostMismatch> written_elsewhere(const RunContext& context, const HostIdentity& here) {
  const HostIdentity run = run_host(context);
  if (run.name.empty()) return HostMismatch{"context.host_name", "names no host"};
  if (run.name != here.name)
    return HostMismatch{"context.host_name",
                        fmt::format("written on host '{}', not this one ('{}')", run.name, here.name)};
  if (run.cpus != here.cpus)
    return HostMismatch{"context.num_cpus", fmt::format("written on a host of {} CPUs, not this host's {} (same "
                                                        "host name, '{}')",
                                                        run.cpus, here.cpus, here.name)};
  if (!run.caches.empty() && !here.caches.empty() && run.caches != here.caches)
    return HostMismatch{"context.caches",
                        fmt::format("written on a CPU with caches {}, not this host's {} (same host name, '{}')",
                                    run.caches, here.caches, here.name)};
  return std::nullopt;
}

}  // namespace perfgate
