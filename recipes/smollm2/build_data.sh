#!/usr/bin/env bash
# Training data for the SmolLM2 memory adapter (issue 10), never overlapping an evaluation set:
# evaluation sets use seed 0 (scripts/results_embedded.sh); training sets use seeds from 1001.
# Needles in two haystacks (RULER's essay and its noise), about 3 chunks of 500 tokens each.
set -euo pipefail
cd "$(dirname "$0")/../.."
LONGREAD=${LONGREAD:-.venv/bin/longread}
OUT=${OUT:-recipes/smollm2/data}
[ -d "$OUT/train/niah_single_2" ] ||
  $LONGREAD data ruler --task niah_single_2 --lengths 1300 --n 200 --seed 1001 --out "$OUT/train/niah_single_2"
[ -d "$OUT/train/niah_single_1" ] ||
  $LONGREAD data ruler --task niah_single_1 --lengths 1300 --n 100 --seed 1002 --out "$OUT/train/niah_single_1"
[ -d "$OUT/heldout" ] ||
  $LONGREAD data ruler --task niah_single_2 --lengths 2048 --n 10 --seed 1003 --out "$OUT/heldout"
