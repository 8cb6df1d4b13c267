// Unit test of the MoE LoRA layer: every variant's output, grad_input and the six LoRA gradients vs
// the fp64 reference on the tiny config, for a fixed seed and a fresh random one (printed on failure;
// rerun one with PERFGATE_LORA_TEST_SEED=<seed>).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "../src/fused_lora.hpp"  // the AMX kernel against the AVX-512 one
#include "perfgate/lora_backward/moe_lora.hpp"

namespace pl = perfgate::lora_backward;

namespace {

// A fresh seed per run (PERFGATE_LORA_TEST_SEED repeats one), printed so that a failure can be replayed.
std::uint64_t random_seed() {
  std::uint64_t seed = 0;
  if (const char* env = std::getenv("PERFGATE_LORA_TEST_SEED")) {
    seed = std::strtoull(env, nullptr, 10);
  } else {
    std::random_device rd;
    seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
  std::printf("lora_backward_test: random seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

pl::Config tiny() { return *pl::config_by_name("tiny"); }

// Runs the check for a layer factory on several qlens (1 exercises experts with one row, or none).
template <typename Make>
void check_variant(Make make, std::uint64_t seed) {
  const pl::Config cfg = tiny();
  const pl::Weights w = pl::make_weights(cfg, seed);
  auto layer = make(w);
  for (int qlen : {1, 5, 33}) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " qlen " + std::to_string(qlen) + " variant " + layer->variant());
    const pl::Problem prob = pl::make_problem(cfg, qlen, seed + static_cast<std::uint64_t>(qlen));
    const pl::Reference ref = pl::reference(w, prob, {}, true);
    std::vector<std::pair<std::string, double>> errs;
    const auto msg = pl::check_against_reference(*layer, w, prob, ref, pl::kRelL2Bound, &errs);
    EXPECT_FALSE(msg.has_value()) << *msg << " (seed " << seed << ")";
    ASSERT_EQ(errs.size(), 8u);
    // Margin (see kRelL2Bound): the worst error seen over 300 seeds x 4 qlens was 8.6e-3, typical 3e-3.
    for (const auto& [name, err] : errs) EXPECT_GT(err, 0.0) << name << ": bf16 storage cannot be exact";
    // the same layer object must give the same answer when run again (no stale state)
    EXPECT_FALSE(pl::check_against_reference(*layer, w, prob, ref).has_value()) << "second run, seed " << seed;
  }
}

}  // namespace

TEST(LoraBackward, ConfigsAndValidation) {
  ASSERT_TRUE(pl::config_by_name("ci").has_value());
  ASSERT_TRUE(pl::config_by_name("deepseek-v3").has_value());
  EXPECT_FALSE(pl::config_by_name("nope").has_value());
  const pl::Config ci = *pl::config_by_name("ci");
  EXPECT_EQ(ci.experts, 64);
  EXPECT_EQ(ci.hidden, 1024);
  EXPECT_EQ(ci.intermediate, 512);
  EXPECT_EQ(ci.top_k, 4);
  EXPECT_FLOAT_EQ(ci.scaling(), 2.0f);
  EXPECT_FALSE(pl::validate(ci, 128).has_value());
  pl::Config bad = ci;
  bad.rank = 0;
  ASSERT_TRUE(pl::validate(bad, 128).has_value());
  EXPECT_NE(pl::validate(bad, 128)->find("rank"), std::string::npos);
  bad = ci;
  bad.top_k = 65;
  ASSERT_TRUE(pl::validate(bad, 128).has_value());
  EXPECT_NE(pl::validate(bad, 128)->find("top-k"), std::string::npos);
  ASSERT_TRUE(pl::validate(ci, 0).has_value());
  EXPECT_NE(pl::validate(ci, 0)->find("qlen"), std::string::npos);
}

TEST(LoraBackward, GradientTypeOverride) {
  EXPECT_FALSE(pl::config_by_name("ci")->bf16_grads);
  const pl::ParsedConfig bf16 = pl::parse_config("ci+grads=bf16");
  ASSERT_TRUE(bf16.config.has_value()) << bf16.error;
  EXPECT_TRUE(bf16.config->bf16_grads);
  EXPECT_EQ(bf16.config->name, "ci+grads=bf16");
  EXPECT_DOUBLE_EQ(bf16.config->grad_bytes(), 2.0);
  const pl::ParsedConfig fp32 = pl::parse_config("ci+rank=8+grads=fp32");
  ASSERT_TRUE(fp32.config.has_value()) << fp32.error;
  EXPECT_FALSE(fp32.config->bf16_grads);
  EXPECT_EQ(fp32.config->rank, 8);
  const pl::ParsedConfig bad = pl::parse_config("ci+grads=fp16");
  EXPECT_FALSE(bad.config.has_value());
  EXPECT_NE(bad.error.find("'fp16' is not a gradient type (fp32, bf16)"), std::string::npos) << bad.error;
}

TEST(LoraBackward, Bf16RoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 3.14159f, 1e-3f, 65504.0f}) {
    EXPECT_NEAR(pl::to_float(pl::to_bf16(v)), v, std::fabs(v) / 256.0f + 1e-30f) << v;
  }
  EXPECT_TRUE(std::isnan(pl::to_float(pl::to_bf16(std::nanf("")))));
}

TEST(LoraBackward, InputsAreNeverZero) {
  const pl::Config cfg = tiny();
  const pl::Weights w = pl::make_weights(cfg, 7);
  for (int p = 0; p < 3; ++p)
    for (auto v : w.B[p]) ASSERT_NE(pl::to_float(v), 0.0f);
  const pl::Problem prob = pl::make_problem(cfg, 9, 7);
  for (auto v : prob.x) ASSERT_NE(pl::to_float(v), 0.0f);
  for (float v : prob.grad_out) ASSERT_NE(v, 0.0f);
}

// The weights come from a branch-free, vectorised generator (common.cpp): its bf16 rounding and sign
// must give what to_bf16 of sign * U[0.1, 1] * scale gives.
TEST(LoraBackward, WeightsAreReproducibleBoundedAndSigned) {
  const pl::Config cfg = tiny();
  const pl::Weights w = pl::make_weights(cfg, 7);
  for (int p = 0; p < 3; ++p) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(pl::proj_in(cfg, p)));
    std::size_t negative = 0;
    for (auto v : w.W[p]) {
      const float f = pl::to_float(v);
      ASSERT_GE(std::fabs(f), 0.1f * scale * (1.0f - 1.0f / 256.0f)) << "projection " << p;
      ASSERT_LE(std::fabs(f), scale * (1.0f + 1.0f / 256.0f)) << "projection " << p;
      negative += f < 0.0f;
    }
    const double share = static_cast<double>(negative) / static_cast<double>(w.W[p].size());
    EXPECT_GT(share, 0.4) << "projection " << p;
    EXPECT_LT(share, 0.6) << "projection " << p;
  }
  const pl::Weights same = pl::make_weights(cfg, 7), other = pl::make_weights(cfg, 8);
  EXPECT_TRUE(std::equal(w.W[0].begin(), w.W[0].end(), same.W[0].begin()));
  EXPECT_FALSE(std::equal(w.W[0].begin(), w.W[0].end(), other.W[0].begin()));
}

TEST(LoraBackward, LoopMatchesReferenceFixedSeed) { check_variant(pl::make_loop_layer, 20261122); }

TEST(LoraBackward, LoopMatchesReferenceRandomSeed) {
  const auto seed = random_seed();
  check_variant(pl::make_loop_layer, seed);
}

TEST(LoraBackward, OnednnMatchesReference) {
  if (!pl::onednn_available()) GTEST_SKIP() << pl::onednn_unavailable_reason();
  check_variant(pl::make_onednn_layer, 20261122);
  const auto seed = random_seed();
  check_variant(pl::make_onednn_layer, seed);
}

TEST(LoraBackward, FusedMatchesReference) {
  if (!pl::onednn_available()) GTEST_SKIP() << pl::onednn_unavailable_reason();
  check_variant(pl::make_fused_layer, 20261122);
  const auto seed = random_seed();
  check_variant(pl::make_fused_layer, seed);
}

// A fused kernel's vector path (rank 16) against the fp64 reference on a config with rank 16 and
// in, out % 16 == 0: qlen 1 (experts of one row or none), 19 (odd row counts, one row block, fused2's
// zero-padded row pair), 80 (experts of more than 16 rows: several row blocks, the gradients accumulated
// across them).
template <typename Make>
void check_rank16(Make make) {
  pl::Config cfg = tiny();
  cfg.rank = 16;
  cfg.alpha = 32.0f;
  const auto seed = random_seed();
  const pl::Weights w = pl::make_weights(cfg, seed);
  auto layer = make(w);
  for (int qlen : {1, 19, 80}) {
    const pl::Problem prob = pl::make_problem(cfg, qlen, seed + 1);
    const pl::Reference ref = pl::reference(w, prob, {}, true);
    const auto msg = pl::check_against_reference(*layer, w, prob, ref);
    EXPECT_FALSE(msg.has_value()) << *msg << " (seed " << seed << ", qlen " << qlen << ")";
  }
}

TEST(LoraBackward, FusedRank16MatchesReference) {
  if (!pl::onednn_available()) GTEST_SKIP() << pl::onednn_unavailable_reason();
  check_rank16(pl::make_fused_layer);
}

TEST(LoraBackward, Fused2MatchesReference) {
  if (!pl::onednn_available()) GTEST_SKIP() << pl::onednn_unavailable_reason();
  check_variant(pl::make_fused2_layer, 20261127);
  const auto seed = random_seed();
  check_variant(pl::make_fused2_layer, seed);
}

TEST(LoraBackward, Fused2Rank16MatchesReference) {
  if (!pl::onednn_available()) GTEST_SKIP() << pl::onednn_unavailable_reason();
  check_rank16(pl::make_fused2_layer);
}

namespace {
// A fused2 layer made with the experiment knob `knob` set to 1 (the layer reads it when it is made).
std::unique_ptr<pl::MoeLoraLayer> make_fused2_with(const char* knob, const pl::Weights& w) {
  const pl::KnobSetting setting{knob, "1"};
  return pl::make_fused2_layer_with(w, {&setting, 1});
}
}  // namespace

// The same with PERFGATE_LORA_FUSED2_SPLIT=1 (GU3's grad_A computed per column slice with the input gradient).
TEST(LoraBackward, Fused2SplitRank16MatchesReference) {
  if (!pl::onednn_available()) GTEST_SKIP() << pl::onednn_unavailable_reason();
  check_rank16([](const pl::Weights& w) { return make_fused2_with("PERFGATE_LORA_FUSED2_SPLIT", w); });
}

// The same with PERFGATE_LORA_FUSED2_SLICED=1 (both LoRA phases sliced by features across the threads; the
// partial G_B of the output slices summed before the bf16 rounding).
TEST(LoraBackward, Fused2SlicedRank16MatchesReference) {
  if (!pl::onednn_available()) GTEST_SKIP() << pl::onednn_unavailable_reason();
  check_rank16([](const pl::Weights& w) { return make_fused2_with("PERFGATE_LORA_FUSED2_SLICED", w); });
}

// The same with PERFGATE_LORA_FUSED2_INTERLEAVE=1 (each expert's D4 work right after its D3 GEMM, its GU3 LoRA
// work right after its GU1 GEMMs), on one thread and on three (experts finishing out of order, the next expert of a
// thread not the next in the list); check_variant runs the layer twice per qlen.
TEST(LoraBackward, Fused2InterleaveMatchesReference) {
  if (!pl::onednn_available()) GTEST_SKIP() << pl::onednn_unavailable_reason();
  const int threads = pl::max_threads();
  const auto make = [](const pl::Weights& w) { return make_fused2_with("PERFGATE_LORA_FUSED2_INTERLEAVE", w); };
  for (int t : {1, 3}) {
    SCOPED_TRACE("threads " + std::to_string(t));
    pl::set_threads(t);
    check_rank16(make);
    check_variant(make, 20261128);
  }
  pl::set_threads(threads);
}

// The same with PERFGATE_LORA_FUSED2_VDPBF16=1 (the products on vdpbf16ps where the CPU has AMX; elsewhere that is
// what fused2 runs anyway) and with PERFGATE_LORA_FUSED2_AMX_NO_PREFETCH=1.
TEST(LoraBackward, Fused2ProductKnobsRank16MatchReference) {
  if (!pl::onednn_available()) GTEST_SKIP() << pl::onednn_unavailable_reason();
  for (const char* knob : {"PERFGATE_LORA_FUSED2_VDPBF16", "PERFGATE_LORA_FUSED2_AMX_NO_PREFETCH"}) {
    SCOPED_TRACE(knob);
    check_rank16([knob](const pl::Weights& w) { return make_fused2_with(knob, w); });
  }
}

namespace {
// One or two passes of random bf16 operands (rank 16, m rows, in x out), their gradients and a sink of m rows.
struct KernelCase {
  int m, in, out;
  std::vector<pl::bf16> dy, x, U, A, B;
  std::vector<float> gA, gB, sink, base;
  std::vector<pl::LoraPassArgs> passes;
  KernelCase(int rows, int n, int in_, int out_, std::uint64_t seed) : m(rows), in(in_), out(out_) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const auto fill = [&](std::vector<pl::bf16>& v, std::size_t size) {
      v.resize(size);
      for (auto& e : v) e = pl::to_bf16(u(rng));
    };
    const auto sz = [](int a, int b, int c = 1) { return static_cast<std::size_t>(a) * b * c; };
    fill(dy, sz(n, m, out)), fill(x, sz(m, in)), fill(U, sz(n, m, 16)), fill(A, sz(n, 16, in)), fill(B, sz(n, out, 16));
    gA.assign(sz(n, 16, in) + 16, 0.0f), gB.assign(sz(n, out, 16) + 16, 0.0f);
    sink.resize(sz(m, in)), base.resize(sz(m, in));
    for (auto& e : sink) e = u(rng);
    for (auto& e : base) e = u(rng);
    for (int k = 0; k < n; ++k) {
      pl::LoraPassArgs a;
      a.m = m, a.in = in, a.out = out, a.r = 16, a.s = 2.0f;
      a.dy = dy.data() + sz(k, m, out), a.ldy = out, a.x = x.data(), a.ldx = in;
      a.U = U.data() + sz(k, m, 16), a.ldu = 16, a.A = A.data() + sz(k, 16, in), a.B = B.data() + sz(k, out, 16);
      a.gA = gA.data() + sz(k, 16, in), a.gB = gB.data() + sz(k, out, 16);
      passes.push_back(a);
    }
  }
};
// Largest |a - b| over the largest |b|.
double rel_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
    n = std::max(n, static_cast<double>(std::abs(b[i])));
  }
  return n > 0 ? d / n : d;
}
}  // namespace

// The AMX kernel against fused2's AVX-512 one, expert by expert, for every row count of one row block (odd ones
// give a zero-padded row pair), one pass (down) and two (gate and up), with and without a base term in the sink.
TEST(LoraBackward, Fused2AmxKernelMatchesVectorKernel) {
  if (!pl::lora_fused2_amx_usable()) GTEST_SKIP() << "no AMX bf16 on this CPU, or the OS refuses the tile registers";
  for (int n : {1, 2})
    for (int m = 1; m <= 16; ++m)
      for (bool with_base : {false, true}) {
        SCOPED_TRACE("passes " + std::to_string(n) + " rows " + std::to_string(m) + " base " +
                     std::to_string(with_base));
        KernelCase amx(m, n, 128, 64, 1000u * n + m), ref(m, n, 128, 64, 1000u * n + m);
        std::vector<pl::bf16> gb_amx(static_cast<std::size_t>(n) * m * 16), gb_ref(gb_amx.size());
        const auto sink = [&](KernelCase& c) {
          return pl::DxSink{c.sink.data(), c.in, nullptr, with_base ? c.base.data() : nullptr, c.in};
        };
        pl::lora_grads_dx_fused2_amx(amx.passes, gb_amx.data(), sink(amx));
        pl::lora_grads_dx_fused2(ref.passes, gb_ref.data(), sink(ref));
        EXPECT_LT(rel_max_diff(amx.gA, ref.gA), 2e-2);
        EXPECT_LT(rel_max_diff(amx.gB, ref.gB), 1e-5);
        EXPECT_LT(rel_max_diff(amx.sink, ref.sink), 2e-2);
        int differ = 0;
        for (std::size_t i = 0; i < gb_amx.size(); ++i) differ += gb_amx[i] != gb_ref[i];
        EXPECT_LE(differ, static_cast<int>(gb_amx.size() / 8)) << "G_B values rounded differently";
      }
}

// fused2_products() names the products fused2 runs: AMX where the kernel can use it, unless
// PERFGATE_LORA_FUSED2_VDPBF16=1; else vdpbf16ps where AVX-512 BF16 is there, else the generic code.
TEST(LoraBackward, Fused2ProductsNamesWhatRuns) {
  const std::string vector = pl::lora_fused_vectorised(16, 16, 16) ? "vdpbf16ps" : "generic";
  EXPECT_EQ(pl::fused2_products(), pl::lora_fused2_amx_usable() ? "amx" : vector);
  setenv("PERFGATE_LORA_FUSED2_VDPBF16", "1", 1);
  EXPECT_EQ(pl::fused2_products(), vector);
  unsetenv("PERFGATE_LORA_FUSED2_VDPBF16");
}

// PERFGATE_LORA_SKIP_LORA=1 (measurement knob) makes fused2 skip its LoRA gradient work: no test may run with it
// set, and a layer made with it must fail the reference check, with and without the interleave.
TEST(LoraBackward, SkipLoraKnobIsOffAndItsLayersFailTheCheck) {
  ASSERT_FALSE(pl::lora_skip_knob_on()) << "PERFGATE_LORA_SKIP_LORA=1 is set: the LoRA-variant tests are void";
  if (!pl::onednn_available()) GTEST_SKIP() << pl::onednn_unavailable_reason();
  const pl::Config cfg = tiny();
  const pl::Weights w = pl::make_weights(cfg, 11);
  const pl::Problem prob = pl::make_problem(cfg, 17, 11);
  const pl::Reference ref = pl::reference(w, prob, {}, true);
  for (bool interleave : {false, true}) {
    if (interleave) setenv("PERFGATE_LORA_FUSED2_INTERLEAVE", "1", 1);
    auto layer = make_fused2_with("PERFGATE_LORA_SKIP_LORA", w);
    unsetenv("PERFGATE_LORA_FUSED2_INTERLEAVE");
    EXPECT_FALSE(pl::lora_skip_knob_on());
    EXPECT_TRUE(pl::check_against_reference(*layer, w, prob, ref).has_value()) << "interleave " << interleave;
  }
}

TEST(LoraBackward, OnednnUnavailableThrowsClearly) {
  if (pl::onednn_available()) GTEST_SKIP() << "oneDNN runs on this CPU";
  const pl::Weights w = pl::make_weights(tiny(), 1);
  EXPECT_THROW(pl::make_onednn_layer(w), std::runtime_error);
  EXPECT_THROW(pl::make_fused_layer(w), std::runtime_error);
  EXPECT_THROW(pl::make_fused2_layer(w), std::runtime_error);
}

// The check must be able to fail: a layer whose grad_A of `up` is 10% off, or whose output misses
// the LoRA term, is caught.
namespace {
class Broken final : public pl::MoeLoraLayer {
 public:
  Broken(std::unique_ptr<pl::MoeLoraLayer> inner, int mode) : inner_(std::move(inner)), mode_(mode) {}
  std::string variant() const override { return "broken"; }
  void forward(const pl::Problem& p, std::span<float> out) override {
    inner_->forward(p, out);
    if (mode_ == 1) out[0] += 1.0f;
  }
  void backward(std::span<const float> go, std::span<float> gi, pl::LoraGrads& g, pl::PhaseTimes& t) override {
    inner_->backward(go, gi, g, t);
    if (mode_ == 0)
      for (float& v : g.A[pl::kUp]) v *= 1.1f;
    if (mode_ == 2) std::swap(g.B[pl::kGate], g.B[pl::kUp]);
  }
  std::array<pl::Work, pl::kPhaseCount> backward_work() const override { return inner_->backward_work(); }
  pl::Work forward_work() const override { return inner_->forward_work(); }
  int rows() const override { return inner_->rows(); }
  int active_experts() const override { return inner_->active_experts(); }

 private:
  std::unique_ptr<pl::MoeLoraLayer> inner_;
  int mode_;
};
}  // namespace

TEST(LoraBackward, CheckCatchesWrongResults) {
  const pl::Config cfg = tiny();
  const pl::Weights w = pl::make_weights(cfg, 3);
  const pl::Problem prob = pl::make_problem(cfg, 17, 3);
  const pl::Reference ref = pl::reference(w, prob, {}, true);
  for (int mode : {0, 1, 2}) {
    Broken broken(pl::make_loop_layer(w), mode);
    EXPECT_TRUE(pl::check_against_reference(broken, w, prob, ref).has_value()) << "mode " << mode;
  }
}

namespace {
using MakeLayer = std::function<std::unique_ptr<pl::MoeLoraLayer>(const pl::Weights&)>;

// Every variant, and fused2 with each experiment knob that changes which kernels write the gradients.
std::vector<std::pair<std::string, MakeLayer>> every_layer() {
  std::vector<std::pair<std::string, MakeLayer>> makers{{"loop", pl::make_loop_layer}};
  if (!pl::onednn_available()) return makers;
  makers.emplace_back("onednn", pl::make_onednn_layer);
  makers.emplace_back("fused", pl::make_fused_layer);
  makers.emplace_back("fused2", pl::make_fused2_layer);
  for (const char* knob :
       {"PERFGATE_LORA_FUSED2_SPLIT", "PERFGATE_LORA_FUSED2_SLICED", "PERFGATE_LORA_FUSED2_INTERLEAVE",
        "PERFGATE_LORA_FUSED2_VDPBF16", "PERFGATE_LORA_FUSED2_AMX_NO_PREFETCH"})
    makers.emplace_back(knob, [knob](const pl::Weights& w) { return make_fused2_with(knob, w); });
  return makers;
}

// The LoRA gradients of one forward and backward of a fresh layer.
pl::LoraGrads lora_grads_of(const MakeLayer& make, const pl::Weights& w, const pl::Problem& prob) {
  auto layer = make(w);
  pl::PassBuffers buf(w.cfg, prob.qlen);
  pl::PhaseTimes t;
  layer->forward(prob, buf.out);
  layer->backward(prob.grad_out, buf.gin, buf.grads, t);
  return std::move(buf.grads);
}

// Indices where the bf16 gradients differ from the fp32 ones rounded once.
int bf16_mismatches(const pl::LoraGrads& fp32, const pl::LoraGrads& bf16) {
  int differ = 0;
  for (int p = 0; p < 3; ++p) {
    for (std::size_t i = 0; i < fp32.A[p].size(); ++i) differ += pl::to_bf16(fp32.A[p][i]) != bf16.A16[p][i];
    for (std::size_t i = 0; i < fp32.B[p].size(); ++i) differ += pl::to_bf16(fp32.B[p][i]) != bf16.B16[p][i];
  }
  return differ;
}
}  // namespace

// With grads=bf16 every variant (and fused2 under every knob) stores each LoRA gradient as the fp32 value it
// stores without it, rounded once, bit for bit, and passes the reference check. Rank 16 runs the vector and AMX
// paths (one row block at qlen 1 and 19, several at 80, where fused2 falls back to fp32 kernels and rounds after);
// the tiny config's rank 8 runs the generic code.
TEST(LoraBackward, Bf16GradsAreTheFp32GradsRoundedOnce) {
  const auto seed = random_seed();
  // 144 x 80 as well: bf16 gradient rows that start half-way into a cache line, and a tile with an odd number of
  // 16-column blocks.
  for (const auto& [rank, hidden, intermediate] : {std::tuple{16, 128, 64}, {8, 128, 64}, {16, 144, 80}}) {
    pl::Config cfg = tiny();
    cfg.rank = rank;
    cfg.hidden = hidden;
    cfg.intermediate = intermediate;
    cfg.alpha = 2.0f * static_cast<float>(rank);
    pl::Config cfg16 = cfg;
    cfg16.bf16_grads = true;
    const pl::Weights w = pl::make_weights(cfg, seed), w16 = pl::make_weights(cfg16, seed);
    for (const auto& [name, make] : every_layer())
      for (int qlen : {1, 19, 80}) {
        SCOPED_TRACE(name + " rank " + std::to_string(rank) + " hidden " + std::to_string(hidden) + " qlen " +
                     std::to_string(qlen) + " seed " + std::to_string(seed));
        const pl::Problem prob = pl::make_problem(cfg, qlen, seed + 7);
        const pl::LoraGrads fp32 = lora_grads_of(make, w, prob), bf16 = lora_grads_of(make, w16, prob);
        ASSERT_TRUE(bf16.bf16_grads);
        ASSERT_EQ(bf16.A16[0].size(), fp32.A[0].size());
        EXPECT_EQ(bf16_mismatches(fp32, bf16), 0);
        auto layer = make(w16);
        const auto msg = pl::check_against_reference(*layer, w16, prob, pl::reference(w16, prob, {}, true));
        EXPECT_FALSE(msg.has_value()) << *msg;
      }
  }
}

TEST(LoraBackward, PhaseTimesAndWork) {
  const pl::Config cfg = tiny();
  const pl::Weights w = pl::make_weights(cfg, 5);
  const pl::Problem prob = pl::make_problem(cfg, 8, 5);
  auto layer = pl::make_loop_layer(w);
  std::vector<float> out(static_cast<std::size_t>(prob.qlen) * cfg.hidden), gin(out.size());
  pl::LoraGrads g;
  g.resize(cfg);
  pl::PhaseTimes t;
  layer->forward(prob, out);
  layer->backward(prob.grad_out, gin, g, t);
  EXPECT_EQ(layer->rows(), prob.qlen * cfg.top_k);
  EXPECT_GE(layer->active_experts(), 2);
  for (double ms : t.ms) EXPECT_GE(ms, 0.0);
  const auto work = layer->backward_work();
  EXPECT_DOUBLE_EQ(work[pl::D3].flops, 2.0 * layer->rows() * cfg.hidden * cfg.intermediate);
  EXPECT_GT(work[pl::GU3].flops, 0.0);
  // bf16 gradients: the LoRA phases' floor moves 2 bytes less per gradient element (rank x (in + out) per active
  // expert and projection)
  pl::Config cfg16 = cfg;
  cfg16.bf16_grads = true;
  const pl::Weights w16 = pl::make_weights(cfg16, 5);
  auto layer16 = pl::make_loop_layer(w16);
  layer16->forward(prob, out);
  const auto work16 = layer16->backward_work();
  const double per_proj = 2.0 * layer->active_experts() * cfg.rank * (cfg.hidden + cfg.intermediate);
  EXPECT_DOUBLE_EQ(work[pl::D4].min_bytes - work16[pl::D4].min_bytes, per_proj);
  EXPECT_DOUBLE_EQ(work[pl::GU3].min_bytes - work16[pl::GU3].min_bytes, 2.0 * per_proj);
}
