#!/usr/bin/env bash
# State-reset samples for stage 2b (issue 26): an adapter reads the training documents of
# recipes/smollm2/data/$STATES (every set in it) with `eval run` (resumable), and
# state_reset.py turns the memory states of its traces into samples
# (recipes/smollm2/states/$STATES.jsonl, committed: a GRPO stage that resumes in another clone
# needs the very samples it started on).
#   recipes/smollm2/states.sh [ADAPTER.gguf]   # default: stage 2a's, exported
#   STATES=states2b (default): 16K-32K documents in the paper's order, about 35 minutes;
#   STATES=states2c SECTION_FIRST=1: 8K documents in the section-first order, about 13 minutes.
#   KINDS=arrival keeps only the states where the needle's section comes (state_reset.py);
#   NAME=states2b-before writes states/NAME.jsonl instead (the runs are the same: no new reads).
set -euo pipefail
cd "$(dirname "$0")/../.."
adapter=${1:-recipes/smollm2/runs/sft2a/adapter.gguf}
states=${STATES:-states2b}
flags=()
if [ "${SECTION_FIRST:-0}" = 1 ]; then flags+=(--section-first); fi
runs=()
for data in "recipes/smollm2/data/$states"/*/; do
  out=recipes/smollm2/runs/$states/$(basename "$data")
  .venv/bin/longread eval run --data "$data" --agent memagent --adapter "$adapter" --lookup-decoding off \
    ${flags[@]+"${flags[@]}"} --out "$out" --concurrency 1 --no-progress
  runs+=("$out")
done
.venv/bin/python recipes/smollm2/state_reset.py "${runs[@]}" --kinds "${KINDS:-arrival,carry}" \
  --out "recipes/smollm2/states/${NAME:-$states}.jsonl"
