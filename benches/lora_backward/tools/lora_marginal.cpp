// What the LoRA costs the `fused2` backward, measured inside one process: for every side (a set of fused2 knobs),
// one layer with the LoRA and one made with PERFGATE_LORA_SKIP_LORA=1, all built on the same weights, their
// backward passes alternated round by round in a new random order each round. Backward with the LoRA minus
// backward without it is the LoRA's marginal cost whatever phase it runs in, so it also measures a side whose
// LoRA work runs inside the base phases (PERFGATE_LORA_FUSED2_INTERLEAVE=1), where D4 + GU3 no longer do.
//
// Why one process: on shared runners whole processes run at different speeds, often by more than the LoRA costs,
// which swamps it when each side is its own process. Inside one process every side shares that state.
//
// Writes the raw passes as JSON (--out); marginal_cost.py runs several processes and summarises them.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "perfgate/bench/hardware.hpp"
#include "perfgate/lora_backward/moe_lora.hpp"

namespace pl = perfgate::lora_backward;

namespace {

constexpr const char* kSkipKnob = "PERFGATE_LORA_SKIP_LORA";

// "NAME[:KNOB[=VALUE][,KNOB...]]": a side's name and the knobs its layers are made with (VALUE defaults to 1).
struct SideSpec {
  std::string name;
  std::vector<pl::KnobSetting> knobs;
};

struct Options {
  std::string config = "ci";
  int qlen = 128;
  int threads = 2;
  double seconds = 60;
  int passes = 3;
  int loop_passes = 2;
  std::uint64_t seed = 1;
  std::vector<std::string> sides;
  std::string out;
};

struct Layer {
  std::string side;
  bool lora = true;
  std::unique_ptr<pl::MoeLoraLayer> impl;
};

struct Visit {
  int round = 0;
  const Layer* layer = nullptr;
  std::vector<double> ms;             // wall time of each backward pass
  std::vector<double> lora_phase_ms;  // D4 + GU3 of each pass
};

SideSpec parse_side(const std::string& spec) {
  SideSpec side;
  const auto colon = spec.find(':');
  side.name = spec.substr(0, colon);
  if (side.name.empty()) throw std::runtime_error(fmt::format("--side '{}': the side has no name", spec));
  const auto plain = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; };
  if (!std::all_of(side.name.begin(), side.name.end(), plain))
    throw std::runtime_error(fmt::format("--side '{}': name the side with letters, digits, '_' and '-'", spec));
  if (colon == std::string::npos) return side;
  std::string rest = spec.substr(colon + 1);
  for (std::size_t start = 0; start <= rest.size();) {
    const std::size_t end = std::min(rest.find(',', start), rest.size());
    const std::string kv = rest.substr(start, end - start);
    const auto eq = kv.find('=');
    if (kv.empty() || eq == 0) throw std::runtime_error(fmt::format("--side '{}': empty knob name", spec));
    side.knobs.emplace_back(kv.substr(0, eq), eq == std::string::npos ? "1" : kv.substr(eq + 1));
    start = end + 1;
  }
  return side;
}

// Both layers of every side; the LoRA layer first checked against the fp64 reference (throws on a mismatch).
std::vector<Layer> make_layers(const std::vector<SideSpec>& sides, const pl::Weights& w, const pl::Problem& prob) {
  const pl::Reference ref = pl::reference(w, prob, {}, true);
  std::vector<Layer> layers;
  for (const SideSpec& s : sides) {
    Layer with{s.name, true, pl::make_fused2_layer_with(w, s.knobs)};
    if (auto err = pl::check_against_reference(*with.impl, w, prob, ref))
      throw std::runtime_error(fmt::format("side {}: fused2 does not match the fp64 reference: {}", s.name, *err));
    std::vector<pl::KnobSetting> skip = s.knobs;
    skip.emplace_back(kSkipKnob, "1");
    layers.push_back(std::move(with));
    layers.push_back({s.name, false, pl::make_fused2_layer_with(w, skip)});
  }
  return layers;
}

// One backward pass: its wall milliseconds and its D4 + GU3.
std::pair<double, double> timed_backward(pl::MoeLoraLayer& layer, const pl::Problem& prob, pl::PassBuffers& buf) {
  pl::PhaseTimes phases;
  const auto t0 = std::chrono::steady_clock::now();
  layer.backward(prob.grad_out, buf.gin, buf.grads, phases);
  const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
  return {dt.count(), phases.ms[pl::D4] + phases.ms[pl::GU3]};
}

Visit visit(int round, const Layer& layer, int passes, const pl::Problem& prob, pl::PassBuffers& buf) {
  Visit v{round, &layer, {}, {}};
  for (int i = 0; i < passes; ++i) {
    const auto [ms, lora] = timed_backward(*layer.impl, prob, buf);
    v.ms.push_back(ms);
    v.lora_phase_ms.push_back(lora);
  }
  return v;
}

// The seed-style loops' D4 + GU3 over `passes` backward passes: the yardstick of the speed-up.
std::vector<double> loop_lora_ms(const pl::Weights& w, const pl::Problem& prob, pl::PassBuffers& buf, int passes) {
  auto loop = pl::make_loop_layer(w);
  loop->forward(prob, buf.out);
  timed_backward(*loop, prob, buf);  // warm-up
  std::vector<double> out;
  for (int i = 0; i < passes; ++i) out.push_back(timed_backward(*loop, prob, buf).second);
  return out;
}

std::string visits_json(const std::vector<Visit>& visits) {
  std::string s;
  for (const Visit& v : visits)
    s += fmt::format(
        "{}{{\"round\": {}, \"side\": \"{}\", \"lora\": {}, \"ms\": [{:.4f}], \"lora_phase_ms\": [{:.4f}]}}",
        s.empty() ? "\n  " : ",\n  ", v.round, v.layer->side, v.layer->lora, fmt::join(v.ms, ", "),
        fmt::join(v.lora_phase_ms, ", "));
  return s;
}

void write_json(const Options& o, const std::vector<SideSpec>& sides, const std::vector<double>& loop,
                const std::vector<Visit>& visits) {
  std::vector<std::string> names;
  for (const SideSpec& side : sides) names.push_back(fmt::format("\"{}\"", side.name));
  std::ofstream f(o.out);
  f << fmt::format(
      "{{\"config\": \"{}\", \"qlen\": {}, \"threads\": {}, \"passes\": {}, \"seed\": {}, \"cpu\": \"{}\",\n"
      " \"fused2_products\": \"{}\","
      " \"sides\": [{}],\n \"loop_lora_phase_ms\": [{:.4f}],\n \"visits\": [{}\n ]}}\n",
      o.config, o.qlen, o.threads, o.passes, o.seed, perfgate::bench::cpu_info().model,
      perfgate::lora_backward::fused2_products(), fmt::join(names, ", "), fmt::join(loop, ", "), visits_json(visits));
  if (!f) throw std::runtime_error(fmt::format("{}: cannot write", o.out));
}

// Rounds until `seconds` have passed: every layer visited once a round, in a new seeded random order.
std::vector<Visit> alternate(const Options& o, const std::vector<Layer>& layers, const pl::Problem& prob,
                             pl::PassBuffers& buf) {
  std::mt19937_64 rng(o.seed);
  std::vector<std::size_t> order(layers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::vector<Visit> visits;
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < o.seconds;
       ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i : order) visits.push_back(visit(round, layers[i], o.passes, prob, buf));
    if (round % 20 == 19) fmt::print(stderr, "lora_marginal: {} rounds\n", round + 1);
  }
  return visits;
}

int run(const Options& o) {
  const auto parsed = pl::parse_config(o.config);
  if (!parsed.config) throw std::runtime_error(fmt::format("--config {}: {}", o.config, parsed.error));
  if (auto why = pl::validate(*parsed.config, o.qlen)) throw std::runtime_error(*why);
  std::vector<SideSpec> sides;
  for (const std::string& s : o.sides.empty() ? std::vector<std::string>{"default"} : o.sides) {
    sides.push_back(parse_side(s));
    const auto same = [&](const SideSpec& other) { return other.name == sides.back().name; };
    if (std::count_if(sides.begin(), sides.end(), same) > 1)
      throw std::runtime_error(fmt::format("--side '{}': two sides named '{}'", s, sides.back().name));
  }
  if (!pl::onednn_available()) {
    fmt::print(stderr, "lora_marginal: skipped: {}\n", pl::onednn_unavailable_reason());
    return 77;
  }
  pl::set_threads(o.threads);
  const pl::Weights w = pl::make_weights(*parsed.config, pl::kBenchWeightSeed);  // the bench's weights and routing
  const pl::Problem prob = pl::make_problem(*parsed.config, o.qlen, pl::bench_problem_seed(o.qlen));
  pl::PassBuffers buf(*parsed.config, o.qlen);
  const std::vector<Layer> layers = make_layers(sides, w, prob);
  for (const Layer& l : layers) {  // the forward the backward passes differentiate, then a warm-up pass
    l.impl->forward(prob, buf.out);
    timed_backward(*l.impl, prob, buf);
  }
  const std::vector<double> loop = loop_lora_ms(w, prob, buf, o.loop_passes);
  const std::vector<Visit> visits = alternate(o, layers, prob, buf);
  write_json(o, sides, loop, visits);
  fmt::print(stderr, "lora_marginal: {} visits of {} layers -> {}\n", visits.size(), layers.size(), o.out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"The LoRA's marginal cost in the fused2 backward, sides alternated inside one process"};
  app.add_option("--config", o.config, "config name, with overrides (ci, ci+rank=8)");
  app.add_option("--qlen", o.qlen, "tokens")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "threads of every layer")->check(CLI::PositiveNumber);
  app.add_option("--seconds", o.seconds, "no new round after this many seconds")->check(CLI::PositiveNumber);
  app.add_option("--passes", o.passes, "backward passes per layer per round")->check(CLI::PositiveNumber);
  app.add_option("--loop-passes", o.loop_passes, "passes of the seed-style loop variant")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed of the rounds' random order");
  app.add_option("--side", o.sides, "NAME[:KNOB[=VALUE],...] (repeatable; default: one side 'default', no knobs)");
  app.add_option("--out", o.out, "JSON of every pass")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "lora_marginal: {}\n", e.what());
    return 1;
  }
}
