#!/usr/bin/env bash
# The SmolLM2 memory adapter (issue 10), every stage in order. Each stage checkpoints after
# every step: rerun this script after an interruption and it resumes where it stopped (a
# finished stage is skipped). Then recipes/smollm2/ship.py STAGE copies a stage's result into the package.
#
#   HOTPOTQA=path/to/hotpotqa_dev_sample100.json recipes/smollm2/train.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
make install >/dev/null
LONGREAD=${LONGREAD:-.venv/bin/longread}
RUNS=recipes/smollm2/runs
recipes/smollm2/build_data.sh
stage() {  # stage NAME: train recipes/smollm2/NAME.toml into $RUNS/NAME
  "$LONGREAD" train --config "recipes/smollm2/$1.toml" --out "$RUNS/$1"
}
stage sft     # 1a: oracle notes, chunks of 500 tokens (45 steps, about 50 s each)
stage sft1k   # 1b: oracle notes, chunks of 1000 (30 steps, about 2 min each)
stage sft1c   # 1c: needles in several wordings, evidence weighted x3 (20 steps, about 2 min each)
stage sft1d   # 1d: the demo's noise layout too (10 steps)
stage sft1e   # 1e: more than half the documents in the demo's layout (10 steps)
# Stage 2 starts from stage 1e's adapter, kept in the repo so a fresh clone can go on from it.
rm -rf recipes/smollm2/stages/sft1e && cp -r "$RUNS/sft1e/adapter" recipes/smollm2/stages/sft1e
stage grpo    # 2: GRPO on the agent's own rollouts (12 steps)
