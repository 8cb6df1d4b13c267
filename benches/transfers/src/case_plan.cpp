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

std::vector<CaseDesc> plan_cases(int n, bool with_nccl) {
  std::vector<CaseDesc> out;
  auto push = [&out](CaseDesc c) { out.push_back(std::move(c)); };
  constexpr std::size_t kMatrixBytes = 256 * MiB;

  for (Dir dir : {Dir::h2d, Dir::d2h}) {
    for (HostMem mem : {HostMem::pinned, HostMem::pageable, HostMem::mapped}) {
      for (std::size_t b : mem == HostMem::pinned ? sweep_sizes() : subset_sizes()) {
        push({.name = fmt::format("transfers/{}/{}/bytes:{}", dir_name(dir), mem_name(mem), b),
              .kind = CaseKind::host_device,
              .dir = dir,
              .mem = mem,
              .gpus = 1,
              .bytes = b});
      }
    }
  }
  for (std::size_t b : sweep_sizes())
    push({.name = fmt::format("transfers/d2d/gpu:0/bytes:{}", b), .kind = CaseKind::d2d, .gpus = 1, .bytes = b});
  for (std::size_t b : sweep_sizes())
    push({.name = fmt::format("transfers/peer/on/src:0/dst:1/bytes:{}", b),
          .kind = CaseKind::peer,
          .a = 0,
          .b = 1,
          .gpus = 2,
          .bytes = b});
  for (int i = 0; i < n; ++i) {  // the rest of the peer matrix, every ordered pair at 256 MiB
    for (int j = 0; j < n; ++j) {
      if (i == j || (i == 0 && j == 1)) continue;
      push({.name = fmt::format("transfers/peer/on/src:{}/dst:{}/bytes:{}", i, j, kMatrixBytes),
            .kind = CaseKind::peer,
            .a = i,
            .b = j,
            .gpus = std::max(i, j) + 1,
            .bytes = kMatrixBytes});
    }
  }
  for (std::size_t b : sweep_sizes())
    push({.name = fmt::format("transfers/peer/on/bidir/pair:0-1/bytes:{}", b),
          .kind = CaseKind::peer_bidir,
          .a = 0,
          .b = 1,
          .gpus = 2,
          .bytes = b});
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      if (i == 0 && j == 1) continue;
      push({.name = fmt::format("transfers/peer/on/bidir/pair:{}-{}/bytes:{}", i, j, kMatrixBytes),
            .kind = CaseKind::peer_bidir,
            .a = i,
            .b = j,
            .gpus = j + 1,
            .bytes = kMatrixBytes});
    }
  }
  for (std::size_t b : subset_sizes()) {
    push({.name = fmt::format("transfers/peer/off/src:0/dst:1/bytes:{}", b),
          .kind = CaseKind::peer,
          .a = 0,
          .b = 1,
          .gpus = 2,
          .bytes = b,
          .peer_on = false});
    push({.name = fmt::format("transfers/peer/off/bidir/pair:0-1/bytes:{}", b),
          .kind = CaseKind::peer_bidir,
          .a = 0,
          .b = 1,
          .gpus = 2,
          .bytes = b,
          .peer_on = false});
  }
  for (std::size_t b : subset_sizes()) {
    push({.name = fmt::format("transfers/all_to_one/gpus:{}/dst:0/bytes:{}", n, b),
          .kind = CaseKind::all_to_one,
          .a = 0,
          .gpus = n,
          .bytes = b});
    push({.name = fmt::format("transfers/one_to_all/gpus:{}/src:0/bytes:{}", n, b),
          .kind = CaseKind::one_to_all,
          .a = 0,
          .gpus = n,
          .bytes = b});
  }
  for (std::size_t b : latency_sizes()) {
    push({.name = fmt::format("transfers/latency/h2d/pinned/bytes:{}", b),
          .kind = CaseKind::host_device,
          .dir = Dir::h2d,
          .mem = HostMem::pinned,
          .gpus = 1,
          .bytes = b,
          .latency = true});
    push({.name = fmt::format("transfers/latency/d2h/pinned/bytes:{}", b),
          .kind = CaseKind::host_device,
          .dir = Dir::d2h,
          .mem = HostMem::pinned,
          .gpus = 1,
          .bytes = b,
          .latency = true});
    push({.name = fmt::format("transfers/latency/d2d/gpu:0/bytes:{}", b),
          .kind = CaseKind::d2d,
          .gpus = 1,
          .bytes = b,
          .latency = true});
    push({.name = fmt::format("transfers/latency/peer/on/src:0/dst:1/bytes:{}", b),
          .kind = CaseKind::peer,
          .a = 0,
          .b = 1,
          .gpus = 2,
          .bytes = b,
          .latency = true});
  }
  if (with_nccl) {
    for (bool registered : {false, true})
      for (std::size_t b : {1 * MiB, 16 * MiB, 256 * MiB})
        push({.name = fmt::format("transfers/nccl/{}/src:0/dst:1/bytes:{}",
                                  registered ? "sendrecv_registered" : "sendrecv", b),
              .kind = CaseKind::nccl_sendrecv,
              .a = 0,
              .b = 1,
              .gpus = 2,
              .bytes = b,
              .registered = registered});
    for (std::size_t tokens : {128, 512, 4096})
      push({.name = fmt::format("transfers/nccl/alltoall/gpus:{}/tokens:{}", n, tokens),
            .kind = CaseKind::nccl_alltoall,
            .gpus = n,
            .bytes = dispatch_bytes_per_gpu(tokens),
            .tokens = tokens});
  }
  return out;
}

}  // namespace perfgate::transfers
