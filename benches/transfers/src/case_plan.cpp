#include "perfgate/transfers/case_plan.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "perfgate/transfers/transfer_lib.hpp"

namespace perfgate::transfers {

const char* dir_name(Dir d) { return d == Dir::h2d ? "h2d" : "d2h"; }

const char* mem_name(HostMem m) {
  switch (m) {
    case HostMem::pinned: return "pinned";
    case HostMem::pageable: return "pageable";
    default: return "mapped";
  }
}

int gpus_to_register(int visible_gpus) { return std::max(2, visible_gpus); }

PlantedCopies plan_planted_copies(std::size_t bytes, int copies, bool latency, double fraction) {
  PlantedCopies p;
  if (!(fraction > 0.0) || bytes == 0 || copies <= 0) return p;
  if (latency) {
    p.extra_copies = static_cast<int>(std::llround(fraction * copies));
    p.share = static_cast<double>(p.extra_copies) / copies;
  } else {
    const auto words = static_cast<std::size_t>(std::llround(fraction * static_cast<double>(bytes) / 4.0));
    p.extra_bytes = std::min(words * 4, bytes / 4 * 4);
    p.share = static_cast<double>(p.extra_bytes) / static_cast<double>(bytes);
  }
  return p;
}

std::vector<std::size_t> sweep_sizes() {
  std::vector<std::size_t> v;
  for (std::size_t b = 4 * KiB; b <= GiB; b *= 4) v.push_back(b);
  return v;
}

std::vector<std::size_t> subset_sizes() { return {64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB}; }

std::vector<std::size_t> latency_sizes() {
  std::vector<std::size_t> v;
  for (std::size_t b = 4; b <= 64 * KiB; b *= 4) v.push_back(b);
  return v;
}

namespace {

constexpr std::size_t kMatrixBytes = 256 * MiB;

// The plan being built; each adder appends one case and returns it, for the settings that differ from the
// defaults (latency, peer off).
struct Planner {
  int n;
  std::vector<CaseDesc> out;

  CaseDesc& host(Dir dir, HostMem mem, std::size_t b, const char* prefix = "transfers") {
    out.push_back({.name = fmt::format("{}/{}/{}/bytes:{}", prefix, dir_name(dir), mem_name(mem), b),
                   .kind = CaseKind::host_device,
                   .dir = dir,
                   .mem = mem,
                   .gpus = 1,
                   .bytes = b});
    return out.back();
  }
  CaseDesc& d2d(std::size_t b, const char* prefix = "transfers") {
    out.push_back(
        {.name = fmt::format("{}/d2d/gpu:0/bytes:{}", prefix, b), .kind = CaseKind::d2d, .gpus = 1, .bytes = b});
    return out.back();
  }
  // A case between GPUs a and b (peer copies, NCCL send/recv): it needs the GPUs up to the higher one.
  CaseDesc& pair(std::string name, CaseKind kind, int a, int b, std::size_t bytes) {
    out.push_back({.name = std::move(name), .kind = kind, .a = a, .b = b, .gpus = std::max(a, b) + 1, .bytes = bytes});
    return out.back();
  }
  CaseDesc& all_gpus(std::string name, CaseKind kind, std::size_t bytes) {
    out.push_back({.name = std::move(name), .kind = kind, .a = 0, .gpus = n, .bytes = bytes});
    return out.back();
  }

  void host_device_cases() {
    for (Dir dir : {Dir::h2d, Dir::d2h})
      for (HostMem mem : {HostMem::pinned, HostMem::pageable, HostMem::mapped})
        for (std::size_t b : mem == HostMem::pinned ? sweep_sizes() : subset_sizes()) host(dir, mem, b);
    for (std::size_t b : sweep_sizes()) d2d(b);
  }

  void peer_cases() {
    for (std::size_t b : sweep_sizes())
      pair(fmt::format("transfers/peer/on/src:0/dst:1/bytes:{}", b), CaseKind::peer, 0, 1, b);
    for (int i = 0; i < n; ++i)  // the rest of the peer matrix, every ordered pair at 256 MiB
      for (int j = 0; j < n; ++j)
        if (i != j && !(i == 0 && j == 1))
          pair(fmt::format("transfers/peer/on/src:{}/dst:{}/bytes:{}", i, j, kMatrixBytes), CaseKind::peer, i, j,
               kMatrixBytes);
    for (std::size_t b : sweep_sizes())
      pair(fmt::format("transfers/peer/on/bidir/pair:0-1/bytes:{}", b), CaseKind::peer_bidir, 0, 1, b);
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        if (!(i == 0 && j == 1))
          pair(fmt::format("transfers/peer/on/bidir/pair:{}-{}/bytes:{}", i, j, kMatrixBytes), CaseKind::peer_bidir, i,
               j, kMatrixBytes);
    for (std::size_t b : subset_sizes()) {
      pair(fmt::format("transfers/peer/off/src:0/dst:1/bytes:{}", b), CaseKind::peer, 0, 1, b).peer_on = false;
      pair(fmt::format("transfers/peer/off/bidir/pair:0-1/bytes:{}", b), CaseKind::peer_bidir, 0, 1, b).peer_on = false;
    }
  }

  void all_gpu_cases() {
    for (std::size_t b : subset_sizes()) {
      all_gpus(fmt::format("transfers/all_to_one/gpus:{}/dst:0/bytes:{}", n, b), CaseKind::all_to_one, b);
      all_gpus(fmt::format("transfers/one_to_all/gpus:{}/src:0/bytes:{}", n, b), CaseKind::one_to_all, b);
    }
  }

  void latency_cases() {
    for (std::size_t b : latency_sizes()) {
      host(Dir::h2d, HostMem::pinned, b, "transfers/latency").latency = true;
      host(Dir::d2h, HostMem::pinned, b, "transfers/latency").latency = true;
      d2d(b, "transfers/latency").latency = true;
      pair(fmt::format("transfers/latency/peer/on/src:0/dst:1/bytes:{}", b), CaseKind::peer, 0, 1, b).latency = true;
    }
  }

  void nccl_cases() {
    for (bool registered : {false, true})
      for (std::size_t b : {1 * MiB, 16 * MiB, 256 * MiB})
        pair(fmt::format("transfers/nccl/{}/src:0/dst:1/bytes:{}", registered ? "sendrecv_registered" : "sendrecv", b),
             CaseKind::nccl_sendrecv, 0, 1, b)
            .registered = registered;
    for (std::size_t tokens : {128, 512, 4096})
      all_gpus(fmt::format("transfers/nccl/alltoall/gpus:{}/tokens:{}", n, tokens), CaseKind::nccl_alltoall,
               dispatch_bytes_per_gpu(tokens))
          .tokens = tokens;
  }
};

}  // namespace

std::vector<CaseDesc> plan_cases(int n, bool with_nccl) {
  Planner p{n, {}};
  p.host_device_cases();
  p.peer_cases();
  p.all_gpu_cases();
  p.latency_cases();
  if (with_nccl) p.nccl_cases();
  return std::move(p.out);
}

}  // namespace perfgate::transfers
