// The host side of expert_parallel: routing plan (counts, offsets, dedup, row tables), byte counts, the
// straggler, case names and the case-list files. No GPU needed.
#include <algorithm>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "perfgate/expert_parallel/case_plan.hpp"
#include "perfgate/expert_parallel/lru_cache.hpp"
#include "perfgate/expert_parallel/plan.hpp"
#include "perfgate/expert_parallel/world.hpp"

namespace ep = perfgate::expert_parallel;
namespace eg = perfgate::expert_gemm;

namespace {

// 2 GPUs x 3 tokens, 4 experts (2 per GPU), top-2. GPU 0's tokens: {0,1} (both local), {1,2} (both GPUs),
// {3,2} (GPU 1 only); GPU 1's tokens: {0,3}, {2,3}, {0,1}.
eg::RoutingResult tiny_routing() {
  eg::RoutingResult r;
  r.expert = {0, 1, 1, 2, 3, 2, 0, 3, 2, 3, 0, 1};
  r.weight = {0.6f, 0.4f, 0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f, 0.8f, 0.2f, 0.55f, 0.45f};
  r.counts = {3, 3, 3, 3};
  return r;
}

TEST(ExpertParallelPlan, CountsOffsetsAndDedup) {
  const ep::ExchangePlan p = ep::plan_exchange(tiny_routing(), 4, 2, 2, 3, 0, 3);
  // counts[s][d]: GPU 0 sends tokens 0,1 to itself and 1,2 to GPU 1; GPU 1 sends 0,2 to GPU 0 and 0,1 to itself.
  EXPECT_EQ(p.counts, (std::vector<std::int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(p.send_offset, (std::vector<std::int64_t>{0, 2, 0, 2}));
  EXPECT_EQ(p.recv_offset, (std::vector<std::int64_t>{0, 2, 0, 2}));
  EXPECT_EQ(p.send_token[0], (std::vector<int>{0, 1, 1, 2}));
  EXPECT_EQ(p.send_token[1], (std::vector<int>{0, 2, 0, 1}));
  EXPECT_EQ(p.send_dest_row[0], (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(p.recv_src_gpu[1], (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(p.recv_src_row[1], (std::vector<int>{2, 3, 2, 3}));
}

TEST(ExpertParallelPlan, PairsCarryLocalExpertsAndWeights) {
  const ep::ExchangePlan p = ep::plan_exchange(tiny_routing(), 4, 2, 2, 3, 0, 3);
  // GPU 1 receives: (GPU 0, t1) -> expert 2; (GPU 0, t2) -> 3, 2; (GPU 1, t0) -> 3; (GPU 1, t1) -> 2, 3.
  EXPECT_EQ(p.pair_begin[1], (std::vector<int>{0, 1, 3, 4, 6}));
  EXPECT_EQ(p.pair_expert[1], (std::vector<int>{0, 1, 0, 1, 0, 1}));
  EXPECT_FLOAT_EQ(p.pair_weight[1][0], 0.3f);
  EXPECT_FLOAT_EQ(p.pair_weight[1][5], 0.2f);
  EXPECT_EQ(p.pairs(0) + p.pairs(1), 12);  // every (token, expert) once
}

TEST(ExpertParallelPlan, HomeRowsSumEveryDestinationOnce) {
  const ep::ExchangePlan p = ep::plan_exchange(tiny_routing(), 4, 2, 2, 3, 0, 3);
  EXPECT_EQ(p.home_begin[0], (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(p.home_rows[0], (std::vector<int>{0, 1, 2, 3}));
}

// The pull tables name the same rows as the push tables: dispatch reads (source GPU, its token), combine sums
// each home token's partial rows where they lie, in home_rows order.
TEST(ExpertParallelPlan, PullTablesReadTheRowsThePushPathSends) {
  const ep::ExchangePlan p = ep::plan_exchange(tiny_routing(), 4, 2, 2, 3, 0, 3);
  const ep::PullTables t1 = ep::pull_tables(p, 1);
  EXPECT_EQ(t1.recv_src_token, (std::vector<int>{1, 2, 0, 1}));
  const ep::PullTables t0 = ep::pull_tables(p, 0);
  EXPECT_EQ(t0.term_gpu, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(t0.term_row, (std::vector<int>{0, 1, 0, 1}));
  // Every term is a receive row of its GPU that came from GPU 0.
  for (std::size_t i = 0; i < t0.term_gpu.size(); ++i)
    EXPECT_EQ(p.recv_src_gpu[static_cast<std::size_t>(t0.term_gpu[i])][static_cast<std::size_t>(t0.term_row[i])], 0);
}

// push_sum sends a GPU's remote receive rows only, ordered by their home token, each counted once at its home;
// the home sums every term where it lies (its own partial rows as -(row + 1)) in home_rows order.
TEST(ExpertParallelPlan, PushSumTablesSendRemoteRowsByHomeToken) {
  const ep::ExchangePlan p = ep::plan_exchange(tiny_routing(), 4, 2, 2, 3, 0, 3);
  const ep::PushSumTables t1 = ep::push_sum_tables(p, 1, 0);
  EXPECT_EQ(t1.send_row, (std::vector<int>{0, 1}));
  EXPECT_EQ(t1.send_dest_gpu, (std::vector<int>{0, 0}));
  EXPECT_EQ(t1.send_dest_row, (std::vector<int>{2, 3}));
  EXPECT_EQ(t1.send_token, (std::vector<int>{1, 2}));
  EXPECT_EQ(t1.term, (std::vector<int>{0, -3, -4, 1}));
  EXPECT_EQ(t1.remote_terms, (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(t1.planted, 0);
  const ep::PushSumTables t0 = ep::push_sum_tables(p, 0, 0.5);  // GPU 1's block once more, uncounted
  EXPECT_EQ(t0.send_row, (std::vector<int>{2, 3, 2}));
  EXPECT_EQ(t0.send_dest_gpu, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(t0.send_dest_row, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(t0.send_token, (std::vector<int>{0, 2, -1}));
  EXPECT_EQ(t0.planted, 1);
}

// At DeepSeek-V3 scale, in a later chunk: every GPU's remote rows are sent once and counted once, in home token
// order, and every home expects exactly the counts its senders make.
TEST(ExpertParallelPlan, PushSumCountsMatchWhatTheHomesExpect) {
  const eg::Shape& shape = eg::deepseek_v3();
  const auto logits = eg::make_router_logits(shape, 4 * 256, eg::Routing::zipf, 5);
  const auto chunks = ep::plan_chunks(eg::route_cpu(shape, 4 * 256, logits), shape.experts, shape.top_k, 4, 256, 2);
  const ep::ExchangePlan& p = chunks[1];
  std::vector<std::vector<int>> counted(4, std::vector<int>(static_cast<std::size_t>(p.tokens), 0));
  for (int g = 0; g < 4; ++g) {
    const ep::PushSumTables t = ep::push_sum_tables(p, g, 0);
    const auto i = static_cast<std::size_t>(g);
    EXPECT_EQ(static_cast<std::int64_t>(t.send_row.size()), p.recv_rows[i] - p.counts[i * 4 + i]) << g;
    EXPECT_TRUE(std::is_sorted(t.send_token.begin(), t.send_token.end())) << g;
    std::set<int> rows(t.send_row.begin(), t.send_row.end());
    EXPECT_EQ(rows.size(), t.send_row.size()) << g;
    for (std::size_t k = 0; k < t.send_row.size(); ++k) {
      EXPECT_NE(t.send_dest_gpu[k], g);
      ++counted[static_cast<std::size_t>(t.send_dest_gpu[k])][static_cast<std::size_t>(t.send_token[k])];
    }
  }
  for (int g = 0; g < 4; ++g)
    EXPECT_EQ(counted[static_cast<std::size_t>(g)], ep::push_sum_tables(p, g, 0).remote_terms);
}

// The planted slowdown moves the first llround(fraction x count) rows of every (GPU, peer) block again.
TEST(ExpertParallelPlan, PlantedRowsAreAFractionOfEveryBlock) {
  const ep::ExchangePlan p = ep::plan_exchange(tiny_routing(), 4, 2, 2, 3, 0, 3);
  EXPECT_EQ(ep::planted_rows(p, 0, ep::Side::send, 0.5), (std::vector<int>{0, 2}));
  EXPECT_EQ(ep::planted_rows(p, 1, ep::Side::recv, 0.5), (std::vector<int>{0, 2}));
  EXPECT_TRUE(ep::planted_rows(p, 0, ep::Side::send, 0.2).empty());  // 0.4 of a row rounds to none
  EXPECT_EQ(ep::planted_rows(p, 0, ep::Side::send, 1.0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ep::planted_count(4096, 0.03), 123);
  EXPECT_EQ(ep::planted_count(4096, 0.0), 0);
  // At DeepSeek-V3 x 4 GPUs x 512 tokens, 3% planted is 3% of the rows within the per-block rounding.
  const eg::Shape& shape = eg::deepseek_v3();
  const auto logits = eg::make_router_logits(shape, 4 * 512, eg::Routing::zipf, 3);
  const auto plan =
      ep::plan_exchange(eg::route_cpu(shape, 4 * 512, logits), shape.experts, shape.top_k, 4, 512, 0, 512);
  for (int g = 0; g < 4; ++g) {
    const auto rows = static_cast<double>(plan.send_rows[static_cast<std::size_t>(g)]);
    const auto planted = static_cast<double>(ep::planted_rows(plan, g, ep::Side::send, 0.03).size());
    EXPECT_NEAR(planted, 0.03 * rows, 2.0) << g;  // at most half a row per block off, 4 blocks
  }
}

// The planted rows are folded into the launch that moves the real ones: each (GPU, peer) block's own rows, then its
// first planted_count rows again; with no fraction the table is exactly the unplanted one.
TEST(ExpertParallelPlan, PlantedTableAppendsEachBlocksPlantedRows) {
  const ep::ExchangePlan p = ep::plan_exchange(tiny_routing(), 4, 2, 2, 3, 0, 3);
  for (int g = 0; g < 2; ++g)
    for (const ep::Side side : {ep::Side::send, ep::Side::recv}) {
      const ep::PlantedTable t = ep::planted_table(p, g, side, 0.0);
      EXPECT_EQ(t.rows, (std::vector<int>{0, 1, 2, 3}));
      EXPECT_EQ(t.planted, 0);
      const auto& offsets = side == ep::Side::send ? p.send_offset : p.recv_offset;
      EXPECT_EQ(t.block_offset, (std::vector<std::int64_t>{offsets[static_cast<std::size_t>(2 * g)],
                                                           offsets[static_cast<std::size_t>(2 * g + 1)]}));
    }
  const ep::PlantedTable half = ep::planted_table(p, 0, ep::Side::send, 0.5);
  EXPECT_EQ(half.rows, (std::vector<int>{0, 1, 0, 2, 3, 2}));
  EXPECT_EQ(half.block_offset, (std::vector<std::int64_t>{0, 3}));
  EXPECT_EQ(half.planted, 2);
  // The appended rows are planted_rows' rows, block by block.
  EXPECT_EQ(ep::planted_rows(p, 0, ep::Side::send, 0.5), (std::vector<int>{0, 2}));

  // DeepSeek-V3 x 4 GPUs x 4096 tokens at 2%: every block grows by llround(0.02 x its rows), appended after them.
  const eg::Shape& shape = eg::deepseek_v3();
  const int tokens = 4096;
  const auto logits = eg::make_router_logits(shape, 4 * tokens, eg::Routing::uniform, 5);
  const auto plan =
      ep::plan_exchange(eg::route_cpu(shape, 4 * tokens, logits), shape.experts, shape.top_k, 4, tokens, 0, tokens);
  for (int g = 0; g < 4; ++g)
    for (const ep::Side side : {ep::Side::send, ep::Side::recv}) {
      const bool send = side == ep::Side::send;
      const ep::PlantedTable t = ep::planted_table(plan, g, side, 0.02);
      const ep::PlantedTable none = ep::planted_table(plan, g, side, 0.0);
      std::int64_t own = 0, planted = 0;
      for (int peer = 0; peer < 4; ++peer) {
        const std::size_t cell = send ? static_cast<std::size_t>(g * 4 + peer) : static_cast<std::size_t>(peer * 4 + g);
        const std::size_t mine = static_cast<std::size_t>(g * 4 + peer);
        const std::int64_t count = plan.counts[cell];
        const std::int64_t first = send ? plan.send_offset[mine] : plan.recv_offset[mine];
        const std::int64_t extra = std::llround(0.02 * static_cast<double>(count));
        const auto at = static_cast<std::size_t>(t.block_offset[static_cast<std::size_t>(peer)]);
        EXPECT_EQ(t.block_offset[static_cast<std::size_t>(peer)], first + planted) << g << " " << peer;
        for (std::int64_t k = 0; k < count; ++k)
          ASSERT_EQ(t.rows[at + static_cast<std::size_t>(k)], first + k) << g << " " << peer;
        for (std::int64_t k = 0; k < extra; ++k)
          ASSERT_EQ(t.rows[at + static_cast<std::size_t>(count + k)], first + k) << g << " " << peer;
        own += count;
        planted += extra;
      }
      EXPECT_EQ(t.planted, planted);
      EXPECT_EQ(static_cast<std::int64_t>(t.rows.size()), own + planted);
      EXPECT_NEAR(static_cast<double>(planted), 0.02 * static_cast<double>(own), 2.0);  // half a row per block
      std::vector<int> identity(static_cast<std::size_t>(own));
      for (std::size_t r = 0; r < identity.size(); ++r) identity[r] = static_cast<int>(r);
      EXPECT_EQ(none.rows, identity);
      EXPECT_EQ(none.planted, 0);
    }
}

// Combine's home sums with the planted ones: every token's sum, then the first planted_count(tokens) tokens' sums
// again (the same terms, into the same rows); with no fraction, exactly the plan's home sums.
TEST(ExpertParallelPlan, PlantedSumsRepeatTheFirstTokens) {
  const ep::ExchangePlan p = ep::plan_exchange(tiny_routing(), 4, 2, 2, 3, 0, 3);
  const ep::PlantedSums none = ep::planted_sums(p, 0, 0.0);
  EXPECT_EQ(none.begin, p.home_begin[0]);
  EXPECT_EQ(none.term, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(none.out, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(none.planted, 0);
  const ep::PlantedSums half = ep::planted_sums(p, 0, 0.5);  // llround(1.5) = 2 tokens again
  EXPECT_EQ(half.planted, 2);
  EXPECT_EQ(half.begin, (std::vector<int>{0, 1, 3, 4, 5, 7}));
  EXPECT_EQ(half.term, (std::vector<int>{0, 1, 2, 3, 0, 1, 2}));
  EXPECT_EQ(half.out, (std::vector<int>{0, 1, 2, 0, 1}));
  // Chunks: the output rows are the chunk's own (t - first_token).
  const eg::Shape& shape = eg::deepseek_v3();
  const auto logits = eg::make_router_logits(shape, 4 * 100, eg::Routing::zipf, 9);
  const auto chunks = ep::plan_chunks(eg::route_cpu(shape, 4 * 100, logits), shape.experts, shape.top_k, 4, 100, 2);
  const ep::PlantedSums second = ep::planted_sums(chunks[1], 3, 0.02);
  EXPECT_EQ(second.planted, 1);
  ASSERT_EQ(second.out.size(), 51u);
  EXPECT_EQ(second.out.back(), 0);
  EXPECT_EQ(second.begin.size(), 52u);
  EXPECT_EQ(second.begin.back() - second.begin[50], chunks[1].home_begin[3][1] - chunks[1].home_begin[3][0]);
}

TEST(ExpertParallelCases, OverlapCtasKnob) {
  EXPECT_EQ(ep::parse_overlap_ctas(nullptr), ep::kDefaultOverlapCtas);
  EXPECT_EQ(ep::parse_overlap_ctas(""), ep::kDefaultOverlapCtas);
  EXPECT_EQ(ep::parse_overlap_ctas("16"), 16);
  EXPECT_EQ(ep::parse_overlap_ctas("0"), 0);
  EXPECT_THROW(ep::parse_overlap_ctas("-1"), std::invalid_argument);
  EXPECT_THROW(ep::parse_overlap_ctas("16x"), std::invalid_argument);
  EXPECT_THROW(ep::parse_overlap_ctas("0.5"), std::invalid_argument);
}

TEST(ExpertParallelCases, ReceiverPercentKnob) {
  EXPECT_EQ(ep::parse_receiver_percent(nullptr), ep::kDefaultReceiverPercent);
  EXPECT_EQ(ep::parse_receiver_percent(""), ep::kDefaultReceiverPercent);
  EXPECT_EQ(ep::parse_receiver_percent("40"), 40);
  EXPECT_THROW(ep::parse_receiver_percent("0"), std::invalid_argument);
  EXPECT_THROW(ep::parse_receiver_percent("100"), std::invalid_argument);
  EXPECT_THROW(ep::parse_receiver_percent("25%"), std::invalid_argument);
}

TEST(ExpertParallelPlan, ChunksPartitionTheTokens) {
  const eg::Shape& shape = eg::deepseek_v3();
  const int gpus = 4, tokens = 10;
  const auto logits = eg::make_router_logits(shape, gpus * tokens, eg::Routing::zipf, 7);
  const auto routing = eg::route_cpu(shape, gpus * tokens, logits);
  const auto whole = ep::plan_exchange(routing, shape.experts, shape.top_k, gpus, tokens, 0, tokens);
  const auto chunks = ep::plan_chunks(routing, shape.experts, shape.top_k, gpus, tokens, 4);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].tokens, 3);
  EXPECT_EQ(chunks[3].first_token, 8);
  std::int64_t rows = 0, pairs = 0;
  for (const auto& c : chunks)
    for (int g = 0; g < gpus; ++g) rows += c.recv_rows[static_cast<std::size_t>(g)], pairs += c.pairs(g);
  std::int64_t whole_rows = 0;
  for (auto r : whole.recv_rows) whole_rows += r;
  EXPECT_EQ(rows, whole_rows);
  EXPECT_EQ(pairs, static_cast<std::int64_t>(gpus) * tokens * shape.top_k);
  EXPECT_THROW(ep::plan_exchange(routing, 255, 8, gpus, tokens, 0, tokens), std::invalid_argument);
}

TEST(ExpertParallelPlan, TrafficCountsRemoteAndLocalBytes) {
  const ep::ExchangePlan p = ep::plan_exchange(tiny_routing(), 4, 2, 2, 3, 0, 3);
  const ep::Traffic t = ep::traffic(p, 100);
  EXPECT_EQ(t.sent_remote, (std::vector<double>{200, 200}));
  EXPECT_EQ(t.recv_remote, (std::vector<double>{200, 200}));
  EXPECT_DOUBLE_EQ(t.local, 400);
  EXPECT_DOUBLE_EQ(t.mean_sent_remote, 200);
  EXPECT_DOUBLE_EQ(t.max_remote, 200);
}

TEST(ExpertParallelPlan, Straggler) {
  const std::vector<int> counts = {1, 2, 10, 5, 3, 3, 0, 0};
  const auto rows = ep::expert_rows_per_gpu(counts, 4);
  EXPECT_EQ(rows, (std::vector<std::int64_t>{3, 15, 6, 0}));
  const ep::Straggler s = ep::find_straggler(rows);
  EXPECT_EQ(s.gpu, 1);
  EXPECT_EQ(s.rows, 15);
  EXPECT_DOUBLE_EQ(s.mean_rows, 6.0);
  EXPECT_DOUBLE_EQ(s.over_mean, 2.5);
  EXPECT_EQ(ep::find_straggler(std::vector<std::int64_t>{4, 4}).gpu, 0);  // ties: the lowest index
  EXPECT_THROW(ep::expert_rows_per_gpu(counts, 3), std::invalid_argument);
}

TEST(ExpertParallelCases, NamesRoundTrip) {
  for (int gpus : {2, 4, 8})
    for (const auto& c : ep::plan_cases(gpus, true)) {
      const auto parsed = ep::parse_case_name(c.name);
      ASSERT_TRUE(parsed) << c.name;
      EXPECT_EQ(ep::case_name(*parsed), c.name);
      EXPECT_EQ(parsed->gpus, gpus);
    }
  EXPECT_FALSE(ep::parse_case_name("expert_parallel/dispatch/nccl/gpus:4/tokens:x/routing:uniform"));
  EXPECT_FALSE(ep::parse_case_name("expert_parallel/dispatch/push_sum/gpus:4/tokens:8/routing:uniform"));
  EXPECT_TRUE(ep::parse_case_name("expert_parallel/combine/push_sum/gpus:4/tokens:8/routing:uniform"));
  EXPECT_FALSE(ep::parse_case_name("expert_parallel/layer/pipelined/exchange:kernel/gpus:4/tokens:8/routing:zipf"));
  EXPECT_EQ(ep::gpus_to_register(0), 2);
  EXPECT_EQ(ep::gpus_to_register(8), 8);
}

TEST(ExpertParallelCases, WithoutNcclNoNcclCase) {
  for (const auto& c : ep::plan_cases(4, false)) EXPECT_NE(c.exchange, ep::Exchange::nccl) << c.name;
  // dispatch: 4 exchanges (push_sum's dispatch is the kernel's), combine: 5, each x 3 token counts x 2 routings;
  // the layer: serial and pipelined with 2, 3 and 4 chunks, 5 x 3 x 2 each; pipelined_ce with 2, 3 and 4 chunks
  // over kernel, pull and push_sum, 3 x 3 x 2 each.
  EXPECT_EQ(ep::plan_cases(4, true).size(), (4u + 5u) * 3 * 2 + 4u * 5 * 3 * 2 + 3u * 3 * 3 * 2);
}

TEST(ExpertParallelCases, PipelinedCasesCarryTheirChunks) {
  std::set<int> chunks;
  for (const auto& c : ep::plan_cases(4, true)) {
    if (c.op != ep::Op::layer) continue;
    if (c.schedule == ep::Schedule::serial) {
      EXPECT_EQ(c.chunks, 1) << c.name;
      EXPECT_EQ(c.name.find("chunks:"), std::string::npos) << c.name;
      continue;
    }
    chunks.insert(c.chunks);
    EXPECT_NE(c.name.find(fmt::format("/chunks:{}/", c.chunks)), std::string::npos) << c.name;
  }
  EXPECT_EQ(chunks, (std::set<int>{2, 3, 4}));
  const auto two =
      ep::parse_case_name("expert_parallel/layer/pipelined/exchange:nccl/chunks:2/gpus:4/tokens:4096/routing:zipf");
  ASSERT_TRUE(two);
  EXPECT_EQ(two->chunks, 2);
  EXPECT_EQ(two->schedule, ep::Schedule::pipelined);
  EXPECT_FALSE(
      ep::parse_case_name("expert_parallel/layer/pipelined/exchange:nccl/chunks:0/gpus:4/tokens:8/routing:zipf"));
  const auto ce = ep::parse_case_name(
      "expert_parallel/layer/pipelined_ce/exchange:pull/chunks:3/gpus:4/tokens:4096/routing:uniform");
  ASSERT_TRUE(ce);
  EXPECT_EQ(ce->schedule, ep::Schedule::pipelined_ce);
  EXPECT_EQ(ce->chunks, 3);
  // The copy engines beside the experts only where the case's own exchange would take SMs there.
  EXPECT_FALSE(
      ep::parse_case_name("expert_parallel/layer/pipelined_ce/exchange:nccl/chunks:2/gpus:4/tokens:8/routing:zipf"));
  EXPECT_FALSE(ep::parse_case_name(
      "expert_parallel/layer/pipelined_ce/exchange:copy_engine/chunks:2/gpus:4/tokens:8/routing:zipf"));
}

TEST(ExpertParallelLruCache, EvictsTheLeastRecentlyUsedBeforeInserting) {
  ep::LruCache<std::string, std::unique_ptr<int>> cache(2);
  cache.insert("a", std::make_unique<int>(1));
  cache.insert("b", std::make_unique<int>(2));
  ASSERT_NE(cache.find("a"), nullptr);  // a is now the most recent: b goes first
  cache.insert("c", std::make_unique<int>(3));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find("b"), nullptr);
  EXPECT_EQ(**cache.find("a"), 1);
  EXPECT_EQ(**cache.find("c"), 3);
  cache.make_room();  // room for one more: the least recent (a) is gone before anything new is built
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.find("a"), nullptr);
  cache.erase("c");
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_THROW((ep::LruCache<int, int>(0)), std::invalid_argument);
}

TEST(ExpertParallelLruCache, ValuesOutliveTheirEvictionWhileShared) {
  // The bench's rounds and layers hold their problem as a shared_ptr: evicting the problem from its own
  // cache must not free it under them.
  ep::LruCache<int, std::shared_ptr<int>> problems(1);
  const std::shared_ptr<int> held = problems.insert(1, std::make_shared<int>(7));
  problems.insert(2, std::make_shared<int>(8));
  EXPECT_EQ(problems.find(1), nullptr);
  EXPECT_EQ(*held, 7);
}

TEST(ExpertParallelCeiling, TheBestMethodSetsTheCeiling) {
  using M = ep::CeilingMethod;
  const ep::PeerCeiling c = ep::best_ceiling({{M::copy_engine, 190.0}, {M::kernel, 230.0}, {M::nccl, 241.0}});
  EXPECT_DOUBLE_EQ(c.GBps, 241.0);
  EXPECT_EQ(c.method, M::nccl);
  EXPECT_EQ(c.methods.size(), 3u);
  EXPECT_EQ(ep::best_ceiling({{M::copy_engine, 200.0}, {M::kernel, 200.0}}).method, M::copy_engine);  // ties: first
  EXPECT_DOUBLE_EQ(ep::best_ceiling({}).GBps, 0.0);
  EXPECT_STREQ(ep::ceiling_method_name(M::kernel), "kernel");
}

TEST(ExpertParallelCases, ReadCaseList) {
  std::istringstream in("# comment\n\n  dispatch/.*  # trailing\nlayer/serial\n");
  EXPECT_EQ(ep::read_case_list(in), (std::vector<std::string>{"dispatch/.*", "layer/serial"}));
}

// gate.txt's header states how many cases it selects: 29 on 4 GPUs with NCCL.
TEST(ExpertParallelCases, GateListSize) {
  std::ifstream in(std::string(PERFGATE_EXPERT_PARALLEL_CASES) + "/gate.txt");
  ASSERT_TRUE(in);
  std::string joined;
  for (const std::string& line : ep::read_case_list(in)) joined += (joined.empty() ? "" : "|") + line;
  const std::regex re("^expert_parallel/(" + joined + ")(/|$)");
  int selected = 0;
  for (const auto& c : ep::plan_cases(4, true)) selected += std::regex_search(c.name, re) ? 1 : 0;
  EXPECT_EQ(selected, 29);
}

// Every line of the suite's case files selects at least one planned case on 2, 4 and 8 GPUs, the way CMake
// joins them (^expert_parallel/(line)(/|$)).
TEST(ExpertParallelCases, CaseFilesSelectPlannedCases) {
  for (const char* file : {"gate.txt", "all.txt"}) {
    std::ifstream in(std::string(PERFGATE_EXPERT_PARALLEL_CASES) + "/" + file);
    ASSERT_TRUE(in) << file;
    const auto lines = ep::read_case_list(in);
    ASSERT_FALSE(lines.empty()) << file;
    for (const std::string& line : lines)
      for (int gpus : {2, 4, 8}) {
        const std::regex re("^expert_parallel/(" + line + ")(/|$)");
        bool any = false;
        for (const auto& c : ep::plan_cases(gpus, true)) any = any || std::regex_search(c.name, re);
        EXPECT_TRUE(any) << file << ": '" << line << "' selects nothing on " << gpus << " GPUs";
      }
  }
}

}  // namespace
