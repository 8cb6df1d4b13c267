#include "perfgate/bench/links.hpp"

#include <array>
#include <map>
#include <mutex>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "perfgate/bench/cuda.hpp"
#include "perfgate/bench/nvml.hpp"

namespace perfgate::bench {

namespace {

// Per PCIe generation: the signalling rate per lane (GT/s) and the share of it that carries data (8b/10b
// encoding up to gen 2, 128b/130b from gen 3, FLIT mode at gen 6).
struct PcieGeneration {
  double gts;
  double encoding;
};
constexpr std::array<PcieGeneration, 6> kPcieGenerations{{{2.5, 0.8},
                                                          {5.0, 0.8},
                                                          {8.0, 128.0 / 130.0},
                                                          {16.0, 128.0 / 130.0},
                                                          {32.0, 128.0 / 130.0},
                                                          {64.0, 242.0 / 256.0}}};

}  // namespace

double pcie_bytes_per_second(unsigned generation, unsigned width) {
  if (generation < 1 || generation > kPcieGenerations.size()) return 0.0;
  const PcieGeneration& g = kPcieGenerations[generation - 1];
  return g.gts * 1e9 * g.encoding * static_cast<double>(width) / 8.0;
}

double nvlink_link_bytes_per_second(int cc_major, int cc_minor) {
  if (cc_major == 6 && cc_minor == 0) return 20e9;
  if (cc_major == 7 && cc_minor == 0) return 25e9;
  if (cc_major == 8 && cc_minor == 0) return 25e9;
  if (cc_major == 8 && cc_minor == 6) return 14.0625e9;
  if (cc_major == 9 && cc_minor == 0) return 25e9;
  if (cc_major == 10) return 50e9;
  return 0.0;
}

std::string LinkFacts::describe() const {
  std::string out;
  if (pcie_gen && pcie_width) {
    out += fmt::format("PCIe gen{} x{} ({:.1f} GB/s)", *pcie_gen, *pcie_width, pcie_Bps / 1e9);
  } else {
    out += "PCIe unknown";
  }
  out += fmt::format(", NVLink x{} ({:.1f} GB/s)", nvlinks, nvlink_Bps / 1e9);
  out += fmt::format(", DRAM {:.0f} GB/s", memory_Bps / 1e9);
  if (!reason.empty()) out += " [" + reason + "]";
  return out;
}

const LinkFacts& link_facts(int device) {
  static std::mutex mutex;
  static std::map<int, LinkFacts> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(device); it != cache.end()) return it->second;

  LinkFacts f;
  f.device = device;
  if (cudaDeviceGetAttribute(&f.cc_major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&f.cc_minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    f.reason = "device attributes unavailable";
    return cache.emplace(device, f).first->second;
  }
  f.memory_Bps = theoretical_memory_bandwidth(device);

  if (!nvml::available()) {
    f.reason = nvml::unavailable_reason();
  } else {
    const auto facts = nvml::query(pci_bus_id(device));
    f.pcie_gen_current = facts.pcie_gen_current;
    f.pcie_width_current = facts.pcie_width_current;
    // An idle GPU trains its link down (gen1 at rest is common): the ceiling is the link's maximum.
    f.pcie_gen = facts.pcie_gen_max ? facts.pcie_gen_max : facts.pcie_gen_current;
    f.pcie_width = facts.pcie_width_max ? facts.pcie_width_max : facts.pcie_width_current;
    if (f.pcie_gen && f.pcie_width) {
      f.pcie_Bps = pcie_bytes_per_second(*f.pcie_gen, *f.pcie_width);
      if (f.pcie_Bps == 0.0) f.reason = fmt::format("unknown PCIe generation {}", *f.pcie_gen);
    } else {
      f.reason = "NVML reports no PCIe generation/width";
    }
    f.nvlinks = facts.nvlink_active_links.value_or(0);
    const double per_link = nvlink_link_bytes_per_second(f.cc_major, f.cc_minor);
    f.nvlink_Bps = per_link * f.nvlinks;
    if (f.nvlinks > 0 && per_link == 0.0) {
      f.reason +=
          (f.reason.empty() ? "" : "; ") + fmt::format("NVLink rate unknown for sm_{}{}", f.cc_major, f.cc_minor);
    }
  }
  return cache.emplace(device, f).first->second;
}

}  // namespace perfgate::bench
