#!/bin/bash
# Every same-machine pair that recipes/smollm2/same_machine.sh made, compared in one table:
# the shipped adapter read the papers' way (results/v2/same-machine/) against the same with
# --focused-notes on (results/v2/runs/...-focused), sample by sample, with a pooled row.
#
#   recipes/smollm2/same_machine_compare.sh [--metric headline|strict|sub_em|em]
#
# Only pairs whose two runs both have samples are listed; `eval compare` pairs the samples
# both finished, so a pair still running counts what it has.
set -euo pipefail
cd "$(dirname "$0")/../.."
started() {  # started RUN: a run folder with at least one finished sample
  [ -f "$1/summary.json" ] && grep -q '"done": [1-9]' "$1/summary.json"
}
pairs=()
for plain in results/v2/same-machine/memagent-adapter-*; do
  focused="results/v2/runs/$(basename "$plain")-focused"
  if started "$plain" && started "$focused"; then pairs+=("$plain" "$focused"); fi
done
[ ${#pairs[@]} -gt 0 ] || { echo "same_machine_compare.sh: no pair yet (run same_machine.sh)" >&2; exit 2; }
.venv/bin/longread eval compare "$@" "${pairs[@]}"
