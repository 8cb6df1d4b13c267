#include "perfgate/machine_class.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/context_keys.hpp"
#include "perfgate/errors.hpp"
#include "perfgate/host_identity.hpp"
#include "perfgate/suites.hpp"

namespace perfgate {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// "Intel(R) Xeon(R) Platinum 8480+" -> {"intel", "xeon", "platinum", "8480"}: lower case, (R)/(TM) and
// punctuation dropped.
std::vector<std::string> words(const std::string& text) {
  std::string t = lower(text);
  for (const char* mark : {"(r)", "(tm)", "(c)"}) {
    for (auto pos = t.find(mark); pos != std::string::npos; pos = t.find(mark)) t.erase(pos, std::string(mark).size());
  }
  std::vector<std::string> out;
  std::string cur;
  for (char c : t) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      cur += c;
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool has_digit(const std::string& w) {
  return std::any_of(w.begin(), w.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

bool truthy(const std::string& v) {
  const std::string l = lower(v);
  return l == "yes" || l == "true" || l == "1" || l == "on";
}

int to_int(const std::string& v) {
  try {
    std::size_t used = 0;
    const int n = std::stoi(v, &used);
    return used == v.size() ? n : -1;
  } catch (...) { return -1; }
}

std::string cpu_family(const std::string& model) {
  static const char* const kFamilies[] = {"xeon",     "epyc",  "ryzen",  "threadripper", "core",    "neoverse",
                                          "graviton", "grace", "ampere", "altra",        "opteron", "atom"};
  const auto w = words(model);
  for (const char* fam : kFamilies) {
    if (std::find(w.begin(), w.end(), fam) != w.end()) return fam;
  }
  for (const std::string& x : w) {
    if (x != "intel" && x != "amd" && x != "cpu" && x != "processor" && !has_digit(x)) return x;
  }
  return "unknown";
}

std::string gpu_model(const std::string& name) {
  // "NVIDIA H200" -> h200; "NVIDIA H100 80GB HBM3" -> h100; "NVIDIA GeForce RTX 4090" -> rtx4090;
  // "Tesla V100-SXM2-16GB" -> v100; "NVIDIA A100-SXM4-80GB" -> a100.
  std::string out;
  for (const std::string& x : words(name)) {
    if (x == "nvidia" || x == "geforce" || x == "tesla" || x == "quadro" || x == "amd" || x == "radeon") continue;
    out += x;
    if (has_digit(x)) break;
  }
  return out.empty() ? "unknown" : out;
}

// gpu-<model>-x<visible>[-of<host>]: the suffix only when the host has more GPUs than the job sees, so a
// job given one GPU of a 2-GPU host is not gated against a 1-GPU VM's baseline (machine_class.hpp).
std::string gpu_class(const RunContext& context, int visible) {
  std::string cls =
      fmt::format("gpu-{}-x{}", gpu_model(context.get(context_keys::gpu_key(0, context_keys::kGpuName))), visible);
  const int host = to_int(context.get(context_keys::kHostGpuCount));
  if (host > visible) cls += fmt::format("-of{}", host);
  return cls;
}

}  // namespace

void validate_machine_class(const std::string& name, const std::string& what) {
  const bool ok = !name.empty() && name.size() <= 100 && name != "." && name != ".." &&
                  std::all_of(name.begin(), name.end(), [](unsigned char c) {
                    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
                  });
  if (!ok) {
    throw InputError(
        what, "", "",
        fmt::format("'{}' is not a valid machine class (allowed: a-z 0-9 . _ -, at most 100 characters)", name));
  }
}

namespace {
std::string& override_storage() {
  static std::string value;
  return value;
}
}  // namespace

void set_machine_class_override(std::string machine_class) { override_storage() = std::move(machine_class); }

const std::string& machine_class_override() { return override_storage(); }

std::string derive_machine_class(const RunContext& context) {
  const int gpus = to_int(context.get(context_keys::kGpuCount, "0"));
  if (gpus > 0) return gpu_class(context, gpus);
  std::string cls = "cpu-" + cpu_family(context.get(context_keys::kCpuModel));
  // The vector ISA decides which kernels can run at all (oneDNN's bf16 matmul needs AVX-512 or AMX),
  // and CPUs sold under one name differ in it: the same "AMD EPYC" VM came with and without AVX-512.
  if (truthy(context.get(context_keys::kAmx))) {
    cls += "-amx";
  } else if (const auto isa = words(context.get(context_keys::kCpuIsa));
             std::find(isa.begin(), isa.end(), "avx512f") != isa.end()) {
    cls += "-avx512";
  }
  int cores = to_int(context.get(context_keys::kCpuCores));
  if (cores <= 0) cores = to_int(context.get("num_cpus"));
  if (cores > 0) cls += fmt::format("-{}c", cores);
  return cls;
}

namespace {

// The class one process run belongs to (precedence in machine_class.hpp).
std::string class_of_run(const RunContext& c) {
  std::string stored = c.get(context_keys::kBaselineMachine);
  if (!stored.empty()) {
    validate_machine_class(stored, c.source_file + " (perfgate.baseline.machine)");
    return stored;
  }
  if (const std::string& given = machine_class_override(); !given.empty()) {
    validate_machine_class(given, "PERFGATE_MACHINE_CLASS");
    return given;
  }
  std::string mine = c.get(context_keys::kMachineClass);
  if (mine.empty()) mine = derive_machine_class(c);
  validate_machine_class(mine, c.source_file + " (machine class)");
  return mine;
}

}  // namespace

std::string machine_class(const ResultSet& results) {
  if (results.contexts.empty()) throw InputError("", "", "context", "no process run to derive a machine class from");
  std::string cls = class_of_run(results.contexts.front());
  for (const RunContext& c : results.contexts) {
    const std::string mine = class_of_run(c);
    if (mine != cls) {
      throw InputError(c.source_file, "", "context",
                       fmt::format("process runs from different machine classes merged: {} ({}) and {} (set "
                                   "PERFGATE_MACHINE_CLASS if they are the same class of runner)",
                                   cls, results.contexts.front().source_file, mine));
    }
  }
  return cls;
}

namespace {

// suite -> class, for the suites of a (possibly multi-suite) ResultSet.
std::map<std::string, std::string> classes_by_suite(const ResultSet& results) {
  std::map<std::string, std::string> out;
  for (const auto& [suite, runs] : process_runs_by_suite(results)) {
    std::string cls, first_file;
    for (int k : runs) {
      const RunContext& c = results.contexts[static_cast<std::size_t>(k)];
      const std::string mine = class_of_run(c);
      if (cls.empty()) {
        cls = mine;
        first_file = c.source_file;
      } else if (mine != cls) {
        throw InputError(c.source_file, "", "context",
                         fmt::format("process runs of suite {} from different machine classes merged: {} here, {} in "
                                     "{}; one side's files come from one machine",
                                     suite, mine, cls, first_file));
      }
    }
    if (!cls.empty()) out[suite] = cls;
  }
  return out;
}

std::string describe(const std::map<std::string, std::string>& classes, const ResultSet& whole) {
  std::set<std::string> distinct;
  for (const auto& [suite, cls] : classes) distinct.insert(cls);
  if (distinct.size() == 1) return *distinct.begin();
  if (distinct.empty()) return whole.contexts.empty() ? std::string("unknown") : machine_class(whole);
  std::string text;
  for (const auto& [suite, cls] : classes) text += fmt::format("{}{} ({})", text.empty() ? "" : ", ", cls, suite);
  return text;
}

// suite -> the first non-empty `of` of its process runs' contexts (suites without one absent).
std::map<std::string, std::string> first_by_suite(const ResultSet& results,
                                                  std::string (*of)(const RunContext& context)) {
  std::map<std::string, std::string> out;
  for (const auto& [suite, runs] : process_runs_by_suite(results)) {
    for (int k : runs) {
      std::string value = of(results.contexts[static_cast<std::size_t>(k)]);
      if (!value.empty()) {
        out[suite] = std::move(value);
        break;
      }
    }
  }
  return out;
}

std::string cpu_signature(const RunContext& c) { return c.get(context_keys::kCpuSignature); }

}  // namespace

namespace {

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// The suites whose classes differ ("suite: baseline X, current Y"); without a common suite, the runs as
// wholes. Sets check.same.
std::vector<std::string> differing_classes(const std::map<std::string, std::string>& base,
                                           const std::map<std::string, std::string>& cur, MachineClassCheck& check,
                                           std::vector<std::string>& suites) {
  std::vector<std::string> differing;
  bool common = false;
  for (const auto& [suite, cls] : cur) {
    const auto it = base.find(suite);
    if (it == base.end()) continue;
    common = true;
    if (it->second == cls) continue;
    differing.push_back(fmt::format("{}: baseline {}, current {}", suite, it->second, cls));
    suites.push_back(suite);
  }
  if (common) {
    check.same = differing.empty();
    return differing;
  }
  // Nothing to pair up by suite: the runs as wholes must agree.
  check.same = check.baseline_class == check.current_class;
  if (!check.same)
    differing.push_back(fmt::format("baseline {}, current {}", check.baseline_class, check.current_class));
  return differing;
}

// CPU generation within one class name (CPU suites only: a GPU baseline does not hinge on the host CPU).
// Returns the suites whose generation changed; sets cpu_changed and unknown_cpu_note.
std::vector<std::string> changed_generations(const ResultSet& baseline, const ResultSet& current,
                                             const std::map<std::string, std::string>& base,
                                             const std::map<std::string, std::string>& cur, MachineClassCheck& check,
                                             std::vector<std::string>& changed_suites) {
  const auto base_sigs = first_by_suite(baseline, cpu_signature), cur_sigs = first_by_suite(current, cpu_signature);
  const auto base_caches = first_by_suite(baseline, cache_layout), cur_caches = first_by_suite(current, cache_layout);
  const auto sig = [](const std::map<std::string, std::string>& sigs, const std::string& suite) {
    const auto it = sigs.find(suite);
    return it == sigs.end() ? std::string() : it->second;
  };
  std::vector<std::string> changed, unknown;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>>
      other_caches;  // (baseline, current) -> suites
  for (const auto& [suite, cls] : cur) {
    const auto it = base.find(suite);
    if (it == base.end() || it->second != cls || cls.rfind("cpu-", 0) != 0) continue;
    const std::string b = sig(base_sigs, suite), c = sig(cur_sigs, suite);
    if (b.empty() && c.empty()) {
      // Neither side names its CPU: Google Benchmark's cache sizes still tell two CPUs apart.
      const std::string bc = sig(base_caches, suite), cc = sig(cur_caches, suite);
      if (!bc.empty() && !cc.empty() && bc != cc) {
        other_caches[{bc, cc}].push_back(suite);
        changed_suites.push_back(suite);
      }
      continue;
    }
    if (b.empty() && !c.empty()) {
      unknown.push_back(suite);
    } else if (!b.empty() && !c.empty() && b != c) {
      changed.push_back(fmt::format("{}: baseline on {}, current on {}", suite, b, c));
      changed_suites.push_back(suite);
    }
  }
  for (const auto& [caches, suites] : other_caches)
    changed.push_back(
        fmt::format("{}: Google Benchmark's context shows the baseline's CPU with caches {}, the current "
                    "one's with {}",
                    joined(suites, ", "), caches.first, caches.second));
  if (!changed.empty()) {
    check.same = false;
    check.cpu_changed = true;
  }
  if (!unknown.empty()) {
    check.unknown_cpu_note = fmt::format(
        "the baseline of {} records no CPU signature (recorded by an older perfgate): whether it ran on this CPU "
        "generation ({}) is unknown; a different generation shows up as a change of the whole suite",
        joined(unknown, ", "), sig(cur_sigs, unknown.front()));
  }
  return changed;
}

std::string check_message(const MachineClassCheck& check, const std::vector<std::string>& differing,
                          const std::vector<std::string>& changed) {
  if (check.same) return fmt::format("machine class {}", check.current_class);
  if (check.cpu_changed && differing.empty()) {
    return fmt::format(
        "CPU generation mismatch within machine class {} ({}): a comparison would measure the "
        "hardware, not the code; record a baseline on this CPU (perfgate run "
        "--update-baseline)",
        check.current_class, joined(changed, "; "));
  }
  return fmt::format("machine class mismatch ({})", joined(differing, "; "));
}

// The first process run's file of `suite` in `results` (of the whole run when `suite` is empty or not in it).
std::string first_file_of(const ResultSet& results, const std::string& suite) {
  const auto runs = process_runs_by_suite(results);
  const auto it = runs.find(suite);
  if (it != runs.end() && !it->second.empty())
    return results.contexts[static_cast<std::size_t>(it->second.front())].source_file;
  return results.contexts.empty() ? std::string() : results.contexts.front().source_file;
}

}  // namespace

MachineClassCheck check_machine_class(const ResultSet& baseline, const ResultSet& current) {
  // Suite by suite: one comparison may span several bench binaries, and a CPU suite run on a GPU
  // machine has a CPU class (its baseline lives there) while the GPU suites have the GPU class.
  const auto base = classes_by_suite(baseline);
  const auto cur = classes_by_suite(current);
  MachineClassCheck check;
  check.baseline_class = describe(base, baseline);
  check.current_class = describe(cur, current);
  std::vector<std::string> suites;  // those that differ, in the order found
  const std::vector<std::string> differing = differing_classes(base, cur, check, suites);
  const std::vector<std::string> changed = changed_generations(baseline, current, base, cur, check, suites);
  check.message = check_message(check, differing, changed);
  if (!check.same) {
    const std::string suite = suites.empty() ? std::string() : suites.front();
    check.baseline_file = first_file_of(baseline, suite);
    check.current_file = first_file_of(current, suite);
  }
  return check;
}

std::string refused_mismatch(const MachineClassCheck& check) {
  return check.message + "; not compared (--allow-machine-mismatch compares anyway)";
}

std::string allowed_mismatch(const MachineClassCheck& check) {
  return check.message + "; compared anyway (--allow-machine-mismatch)";
}

}  // namespace perfgate
