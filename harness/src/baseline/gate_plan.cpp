#include "perfgate/gate_plan.hpp"

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/baseline_store.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/process.hpp"

namespace perfgate {

namespace fs = std::filesystem;

const char* to_string(GateMode mode) {
  switch (mode) {
    case GateMode::stored_baseline: return "stored baseline";
    case GateMode::reference: return "reference build";
    case GateMode::hardware_missing: return "hardware missing";
  }
  return "?";
}

namespace {

std::optional<RunContext> context_from_json(const std::string& text, const std::string& source) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("context") || !j["context"].is_object()) return std::nullopt;
  RunContext c;
  c.source_file = source;
  for (const auto& [key, value] : j["context"].items())
    c.fields[key] = value.is_string() ? value.get<std::string>() : value.dump();
  return c;
}

int to_int(const std::string& s, int fallback) {
  try {
    return std::stoi(s);
  } catch (const std::exception&) { return fallback; }
}

// The CPU signature of the first process run of a baseline that records one.
std::string baseline_signature(const ResultSet& base) {
  for (const auto& c : base.contexts) {
    std::string sig = c.get(context_keys::kCpuSignature);
    if (!sig.empty()) return sig;
  }
  return "";
}

SuitePlan with_mode(SuitePlan p, GateMode mode, std::string reason) {
  p.mode = mode;
  p.reason = std::move(reason);
  return p;
}

}  // namespace

std::optional<RunContext> probe_context(const BenchBinary& bench,
                                        const std::vector<std::pair<std::string, std::string>>& env,
                                        const std::vector<int>& cpus, double timeout_seconds, std::string* why) {
  ProcessSpec spec;
  spec.argv = {bench.path.string(), "--perfgate_context_only"};
  spec.env = env;
  spec.cpus = cpus;
  spec.timeout_seconds = timeout_seconds;
  std::string out;
  spec.on_stdout_line = [&](const std::string& line) { out += line + "\n"; };
  const ProcessResult r = run_process(spec);
  if (!r.ok()) {
    if (why != nullptr)
      *why = fmt::format("{} --perfgate_context_only: {}", bench.path.filename().string(), r.describe());
    return std::nullopt;
  }
  auto c = context_from_json(out, bench.path.string());
  if (!c && why != nullptr)
    *why = fmt::format("{} --perfgate_context_only printed no JSON context", bench.path.string());
  return c;
}

int gpus_needed(const BenchBinary& bench) {
  const fs::path file = bench.path.parent_path().parent_path() / "suites" / (bench.suite + ".gpus");
  std::ifstream in(file);
  int n = 0;
  return (in >> n) ? n : 0;
}

// A plan for `bench` with the class, CPU generation and baseline file that `context` names.
SuitePlan plan_named_by(const BenchBinary& bench, const RunContext& context, const fs::path& baseline_dir) {
  SuitePlan p;
  p.bench = bench;
  ResultSet probe;
  probe.contexts.push_back(context);
  p.machine_class = machine_class(probe);
  p.cpu_signature = context.get(context_keys::kCpuSignature);
  p.baseline_file = find_baseline(baseline_dir, p.machine_class, p.cpu_signature, bench.suite).string();
  return p;
}

SuitePlan plan_unasked_suite(const BenchBinary& bench, const std::optional<RunContext>& host,
                             const fs::path& baseline_dir, const std::string& probe_failure,
                             const std::string& reference_asked_by) {
  const std::string asked = probe_failure.empty() ? "no context" : probe_failure;
  if (!host) {
    SuitePlan unnamed;
    unnamed.bench = bench;
    return with_mode(
        unnamed, GateMode::stored_baseline,
        fmt::format(
            "its machine could not be asked before measuring ({}): gated by the baseline its class names, if any",
            asked));
  }
  SuitePlan p = plan_named_by(bench, *host, baseline_dir);
  const int gpus = to_int(host->get(context_keys::kHostGpuCount, "0"), 0);
  std::error_code ec;
  const bool recorded = fs::exists(p.baseline_file, ec);
  const bool to_reference = !reference_asked_by.empty() && !recorded;
  std::string baseline;
  if (recorded) baseline = fmt::format("{} gates it where it was recorded on this CPU generation", p.baseline_file);
  else if (to_reference)
    baseline = fmt::format("no baseline recorded yet ({} does not exist), so the reference asked for ({}) gates it",
                           p.baseline_file, reference_asked_by);
  else
    baseline = fmt::format(
        "no baseline recorded yet ({} does not exist): its benchmarks are new until "
        "--update-baseline records one",
        p.baseline_file);
  return with_mode(
      p, to_reference ? GateMode::reference : GateMode::stored_baseline,
      fmt::format("a plain Google Benchmark binary, as far as perfgate can tell ({}): this host's CPU{} names its "
                  "machine class; {}{}",
                  asked, p.cpu_signature.empty() ? "" : " (" + p.cpu_signature + ")", baseline,
                  gpus > 0 ? fmt::format("; this host has {} NVIDIA GPU(s), and perfgate cannot tell whether the "
                                         "binary uses them: if it measures a GPU, name its class with "
                                         "PERFGATE_MACHINE_CLASS (gpu-<model>-x<count>)",
                                         gpus)
                           : ""));
}

SuitePlan plan_suite(const BenchBinary& bench, const std::optional<RunContext>& context, const fs::path& baseline_dir,
                     const std::string& probe_failure) {
  if (!context) return plan_unasked_suite(bench, std::nullopt, baseline_dir, probe_failure);
  SuitePlan p = plan_named_by(bench, *context, baseline_dir);
  const int needed = gpus_needed(bench), present = to_int(context->get(context_keys::kGpuCount, "0"), 0);
  if (needed > present) {
    return with_mode(
        p, GateMode::hardware_missing,
        fmt::format(
            "needs {} GPU(s), this machine has {}: nothing to gate (its benchmarks run only to say why they skip)",
            needed, present));
  }
  std::error_code ec;
  if (!fs::exists(p.baseline_file, ec))
    return with_mode(
        p, GateMode::reference,
        fmt::format("no stored baseline for machine class {} ({} does not exist)", p.machine_class, p.baseline_file));
  const ResultSet base = load_result_file(p.baseline_file);
  const std::string base_class = machine_class(base);
  if (base_class != p.machine_class)
    return with_mode(p, GateMode::reference,
                     fmt::format("{} was recorded on machine class {}, this runner is {}", p.baseline_file, base_class,
                                 p.machine_class));
  const std::string base_sig = baseline_signature(base);
  const bool cpu_class = p.machine_class.rfind("cpu-", 0) == 0;
  if (cpu_class && !base_sig.empty() && !p.cpu_signature.empty() && base_sig != p.cpu_signature)
    return with_mode(p, GateMode::reference,
                     fmt::format("{} was recorded on another CPU generation ({}; this runner: {})", p.baseline_file,
                                 base_sig, p.cpu_signature));
  return with_mode(p, GateMode::stored_baseline,
                   fmt::format("{} fits machine class {}{}", p.baseline_file, p.machine_class,
                               cpu_class && !p.cpu_signature.empty() ? " on " + p.cpu_signature : ""));
}

}  // namespace perfgate
