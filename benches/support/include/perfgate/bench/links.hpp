#pragma once
// Theoretical ceilings of the links a transfer crosses, computed from what the device reports
// (PCIe generation and width through NVML, active NVLink count through NVML, compute capability
// and memory clock/bus width through CUDA), never from a per-product constant.
//
// What is a constant here is the *signalling* of a link standard, which the device cannot report:
//   PCIe  gen1 2.5, gen2 5, gen3 8, gen4 16, gen5 32, gen6 64 GT/s per lane; encoding 8b/10b (gen1-2),
//         128b/130b (gen3-5), FLIT 242/256 (gen6). Bytes/s per direction = GT/s * width * encoding / 8.
//         (PCIe 5 x16: 63.0 GB/s after encoding, 64 GB/s raw.)
//   NVLink per link and direction, by the GPU architecture that carries it (NVLink generation):
//         sm_60 NVLink1 20 GB/s; sm_70 NVLink2 25; sm_80 NVLink3 25; sm_86 NVLink3 (x4 bridge) 14.0625;
//         sm_90 NVLink4 25; sm_100 NVLink5 50. Others: unknown (0).
// A value of 0 means "unknown"; callers then leave the percentage out rather than invent one.
#include <optional>
#include <string>

namespace perfgate::bench {

// Bytes per second in one direction; 0 when the generation is unknown or the width is 0.
double pcie_bytes_per_second(unsigned generation, unsigned width);

// Bytes per second per NVLink link and direction for a GPU of this compute capability; 0 if unknown.
double nvlink_link_bytes_per_second(int cc_major, int cc_minor);

struct LinkFacts {
  int device = -1;
  std::optional<unsigned> pcie_gen;    // the link's maximum generation (NVML), else the current one
  std::optional<unsigned> pcie_width;  // likewise for the width
  std::optional<unsigned> pcie_gen_current;
  std::optional<unsigned> pcie_width_current;
  unsigned nvlinks = 0;  // active NVLink links (NVML); 0 when none or unknown
  int cc_major = 0;
  int cc_minor = 0;
  double pcie_Bps = 0;    // one direction
  double nvlink_Bps = 0;  // one direction, all active links together
  double memory_Bps = 0;  // DRAM, read + write together (theoretical_memory_bandwidth)
  std::string reason;     // why a figure is 0 (no NVML, unknown generation, ...)

  std::string describe() const;  // "PCIe gen5 x16 (63.0 GB/s), NVLink x18 (450.0 GB/s), DRAM 4915 GB/s"
};

// Queries CUDA and NVML once per device (cached).
const LinkFacts& link_facts(int device);

}  // namespace perfgate::bench
