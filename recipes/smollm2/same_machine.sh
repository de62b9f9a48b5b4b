#!/bin/bash
# The shipped adapter read the papers' way and with focused notes, on this machine, cell by
# cell: a pair whose every difference is the option (stop 43).
#
#   recipes/smollm2/same_machine.sh [SET_LENGTH ...]    # e.g. ruler_niah_single_2_32768
#
# Greedy decoding on the 135M model changes with the CPU's kernels: the results page's
# `memagent-adapter-*` cells ran on an AVX2 machine, and on an AVX-512 one the same prompts get
# other replies in some samples (`recipes/smollm2/divergence.py` says which). So a memory
# option is measured against a papers'-way run made on the same machine: those go to
# results/v2/same-machine/ (the page's cells stay as they are); the focused cells are the
# page's `memagent-adapter-SET-LENGTH-focused`. Every run resumes; a finished one is skipped.
# Then: .venv/bin/longread eval compare results/v2/same-machine/memagent-adapter-SET-LENGTH \
#   results/v2/runs/memagent-adapter-SET-LENGTH-focused
set -euo pipefail
cd "$(dirname "$0")/../.."
LONGREAD=.venv/bin/longread
DATA=results/v2/data
CELLS=("$@")
if [ ${#CELLS[@]} = 0 ]; then
  CELLS=(ruler_niah_single_2_2048 ruler_niah_single_2_8192 ruler_niah_single_2_16384
    ruler_niah_single_2_32768 hotpotqa_2048 hotpotqa_8192 hotpotqa_16384
    ruler_niah_single_3_2048 ruler_niah_single_3_8192 ruler_niah_single_3_16384
    ruler_niah_single_2_65536)
fi
finished() {  # finished RUN DATA: every sample of DATA done in RUN
  [ -f "$1/summary.json" ] && .venv/bin/python -c '
import json, sys
summary = json.load(open(sys.argv[1] + "/summary.json"))
lines = sum(1 for _ in open(sys.argv[2]))
sys.exit(0 if summary["done"] == lines and summary["total"] == lines else 1)' "$1" "$2"
}
for cell in "${CELLS[@]}"; do
  data="$DATA/$cell.jsonl"
  [ -f "$data" ] || { echo "same_machine.sh: no data $data" >&2; exit 2; }
  name="memagent-adapter-${cell%_*}-${cell##*_}"
  for run in "results/v2/same-machine/$name" "results/v2/runs/$name-focused"; do
    if finished "$run" "$data"; then echo "$run: complete"; continue; fi
    # as read before stop 70's default probe and stop 78's lookup decoding
    flags=(--adapter memory --exit-probe off --lookup-decoding off)
    case $run in *-focused) flags+=(--focused-notes on) ;; esac
    flock /tmp/longread-model.lock $LONGREAD eval run --data "$data" --agent memagent \
      "${flags[@]}" --out "$run" --concurrency 1
  done
done
