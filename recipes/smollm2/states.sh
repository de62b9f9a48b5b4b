#!/usr/bin/env bash
# State-reset samples for stage 2b (issue 26): stage 2a's adapter reads the long training
# documents of recipes/smollm2/data/states2b with `eval run` (resumable), and
# state_reset.py turns the memory states of its traces into samples
# (recipes/smollm2/data/states2b.jsonl). About 35 minutes on 2 cores.
#   recipes/smollm2/states.sh [ADAPTER.gguf]   # default: stage 2a's, exported
set -euo pipefail
cd "$(dirname "$0")/../.."
adapter=${1:-recipes/smollm2/runs/sft2a/adapter.gguf}
runs=()
for set in niah_single_2 niah_single_1 wiki; do
  out=recipes/smollm2/runs/states2b/$set
  .venv/bin/longread eval run --data "recipes/smollm2/data/states2b/$set" --agent memagent \
    --adapter "$adapter" --out "$out" --concurrency 1 --no-progress
  runs+=("$out")
done
.venv/bin/python recipes/smollm2/state_reset.py "${runs[@]}" --out recipes/smollm2/data/states2b.jsonl
