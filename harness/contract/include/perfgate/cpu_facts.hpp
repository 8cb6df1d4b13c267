#pragma once
// What /proc/cpuinfo says about the host's CPU, and the context keys a process run records it under. Read here once
// for both sides of the contract: benches/support writes the keys into every bench binary's runs, and the runner
// adds them to the runs of a Google Benchmark binary that records none (one built without perfgate's bench main),
// so that its baselines carry a machine class and a CPU generation as well. Standard library only, like
// context_keys.hpp.
#include <istream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "perfgate/context_keys.hpp"

namespace perfgate {

struct CpuFacts {
  std::string model;  // "Intel(R) Xeon(R) ..."
  // "AuthenticAMD family 26 model 2": the CPU generation, which a VM's "model name" ("AMD EPYC") hides; on Arm
  // "ARM implementer 0x41 part 0xd4f". Empty where /proc/cpuinfo gives neither.
  std::string signature;
  bool avx512f = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;  // the CPU has it (a bench binary clears it when the kernel refuses the tile state)
  bool amx_int8 = false;

  // "avx512f avx512_bf16 amx_bf16 amx_int8": the ones present.
  std::string isa_summary() const {
    std::string out;
    for (const auto& [on, name] : {std::pair{avx512f, "avx512f"}, std::pair{avx512_bf16, "avx512_bf16"},
                                   std::pair{amx_bf16, "amx_bf16"}, std::pair{amx_int8, "amx_int8"}}) {
      if (!on) continue;
      if (!out.empty()) out += ' ';
      out += name;
    }
    return out;
  }
};

// An Arm core's name from its /proc/cpuinfo "CPU implementer" and "CPU part" (Arm Ltd's Neoverse cores, which the
// Arm servers and Grace hosts use); other parts by number. Arm's /proc/cpuinfo has no "model name".
inline std::string arm_core_name(const std::string& implementer, const std::string& part) {
  if (implementer == "0x41") {
    for (const auto& [number, name] : {std::pair{"0xd0c", "Neoverse-N1"}, std::pair{"0xd40", "Neoverse-V1"},
                                       std::pair{"0xd49", "Neoverse-N2"}, std::pair{"0xd4f", "Neoverse-V2"}})
      if (part == number) return std::string("ARM ") + name;
  }
  return "ARM CPU implementer " + implementer + " part " + part;
}

// The facts of the first CPU listed in /proc/cpuinfo's text.
inline CpuFacts parse_cpuinfo(std::istream& in) {
  CpuFacts cpu;
  std::string line, flags, vendor, family, model_number, implementer, part;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && cpu.model.empty()) cpu.model = value;
    if (key == "vendor_id" && vendor.empty()) vendor = value;
    if (key == "cpu family" && family.empty()) family = value;
    if (key == "model" && model_number.empty()) model_number = value;
    if (key == "flags" && flags.empty()) flags = " " + value + " ";
    if (key == "CPU implementer" && implementer.empty()) implementer = value;
    if (key == "CPU part" && part.empty()) part = value;
  }
  if (!vendor.empty() && !family.empty() && !model_number.empty())
    cpu.signature = vendor + " family " + family + " model " + model_number;
  if (cpu.signature.empty() && !implementer.empty() && !part.empty()) {
    cpu.signature = "ARM implementer " + implementer + " part " + part;
    if (cpu.model.empty()) cpu.model = arm_core_name(implementer, part);
  }
  const auto has = [&flags](std::string_view flag) {
    return flags.find(" " + std::string(flag) + " ") != std::string::npos;
  };
  cpu.avx512f = has("avx512f");
  cpu.avx512_bf16 = has("avx512_bf16");
  cpu.amx_bf16 = has("amx_tile") && has("amx_bf16");
  cpu.amx_int8 = cpu.amx_bf16 && has("amx_int8");
  return cpu;
}

// The host-fact context keys of a process run on `cores` logical CPUs of this CPU, with their values.
inline std::vector<std::pair<std::string, std::string>> cpu_context(const CpuFacts& cpu, int cores) {
  std::vector<std::pair<std::string, std::string>> out{{context_keys::kCpuModel, cpu.model}};
  if (!cpu.signature.empty()) out.emplace_back(context_keys::kCpuSignature, cpu.signature);
  out.emplace_back(context_keys::kCpuIsa, cpu.isa_summary());
  out.emplace_back(context_keys::kCpuCores, std::to_string(cores));
  out.emplace_back(context_keys::kAmx, cpu.amx_bf16 ? "yes" : "no");
  return out;
}

}  // namespace perfgate
