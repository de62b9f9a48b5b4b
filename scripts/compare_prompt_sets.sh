#!/usr/bin/env bash
# The prompt-set comparison (paper-semantics default against the notes style) for memagent on
# the embedded SmolLM2-135M: the results set's niah_single_2 and hotpotqa 2K cells (10 samples
# each, the same settings as scripts/results_embedded.sh) and bench/agents_table.py's needle
# documents. Resumable: rerun after an interruption and it carries on. Tables:
#   .venv/bin/longread eval report results/prompt_sets/*
#   .venv/bin/python bench/agents_table.py --agents memagent --table-only --out <jsonl>
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${LONGREAD:-}" ] || make install >/dev/null  # a caller-given longread is already set up

LONGREAD=${LONGREAD:-.venv/bin/longread}
PYTHON=${PYTHON:-.venv/bin/python}
DATA=results/data
RUNS=results/prompt_sets
# as the committed runs read (before stop 70 turned the shipped reading's exit probe on and
# stop 78 lookup decoding)
FLAGS=(--chunk-tokens 1000 --memory-tokens 256 --final-tokens 1024 --exit-probe off
  --lookup-decoding off)

# Alternate the two sets cell by cell, so a machine that gets busier later slows both alike.
for set in ruler_niah_single_2 hotpotqa; do
  for prompts in paper notes; do
    $LONGREAD eval run --data "$DATA/${set}_2048.jsonl" --agent memagent "${FLAGS[@]}" \
      --prompt-set "$prompts" --out "$RUNS/memagent-$prompts-$set-2048" --concurrency 1 --no-progress
  done
done
for prompts in paper notes; do
  $PYTHON bench/agents_table.py --agents memagent --prompt-set "$prompts" \
    --out "bench/results/agents_table_memagent_$prompts.jsonl"
done
