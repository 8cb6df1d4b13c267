#pragma once
// Correctness before timing: dispatch and combine against the host plan, the layer against a CPU reference.
// Each returns nullopt when right, else a one-line message for bench::fail.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perfgate/expert_parallel/layer.hpp"

namespace perfgate::expert_parallel {

// Poisons the receive buffers, dispatches, and checks that every receive row of every GPU equals, bit for bit, the row
// of x it was planned to carry.
std::optional<std::string> check_dispatch(GpuSet& set, ExchangeRound& round, Exchange kind, const Problem& problem);

// Fills every GPU's partial rows with random bf16, runs combine and compares a sample of each GPU's tokens
// (up to 64 spread over the chunk) with the CPU sum of their partial rows (fp32, destinations ascending).
std::optional<std::string> check_combine(GpuSet& set, ExchangeRound& round, Exchange kind, const Problem& problem);

// NaN into every GPU's output rows, so that a row the layer or combine leaves unwritten fails its check.
void poison_outputs(const Problem& problem);

// The layer's output of tokens `sample` ((gpu, local token) pairs) against an fp64 CPU reference of the
// eight experts each token is routed to (bf16 roundings where the GPU stores bf16; relative L2 bound 2e-2).
std::optional<std::string> check_layer_sample(const Problem& problem, const std::vector<std::pair<int, int>>& sample);

}  // namespace perfgate::expert_parallel
