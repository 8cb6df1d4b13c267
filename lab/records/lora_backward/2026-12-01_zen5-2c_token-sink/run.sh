#!/usr/bin/env bash
# The token-sink A/B of lab/results/lora_backward-notebook.md: apply token-sink.patch to c90f877, build build/l, then
set -euo pipefail
python3 benches/lora_backward/tools/marginal_cost.py build/l/bin/lora_marginal --processes 8 --seconds 30 --cpus 0,1 \
  --config ci+grads=bf16 --side default --side tokensink:PERFGATE_LORA_FUSED2_TOKEN_SINK --json-dir "${1:-/tmp/tsink}"
