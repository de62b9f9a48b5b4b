#!/usr/bin/env bash
# Held-out checks of a stage's adapter (issue 26): memagent through `longread eval run` (the
# package's Q8_0 model, greedy, the adapter's own trained settings from its adapter.json) on
# held-out sets of recipes/smollm2/data (seeds no training set and no evaluation set uses).
# Resumable: rerun after an interruption. Each check's summary is copied to
# recipes/smollm2/curves/STAGE/SET-summary.json (committed; the runs are not).
#
#   recipes/smollm2/check_stage.sh STAGE ADAPTER.gguf [SET ...]
#   recipes/smollm2/check_stage.sh sft2a recipes/smollm2/runs/sft2a/adapter.gguf heldout8k-unseen
#   recipes/smollm2/check_stage.sh sft1e memory heldout8k-unseen   # the shipped adapter
#
# Default sets: heldout8k-ledger heldout8k-unseen-keyless (unseen wordings in unseen prose),
# heldout8k heldout8k-plain.
# SECTION_FIRST=1 reads with --section-first (checks named SET-section-first).
# EXIT_GATE=on|off reads with --exit-gate on/off (checks named SET-exit-on/-exit-off), and
# EXIT_PROBE=on|off with --exit-probe on/off (SET-probe-on/-probe-off); unset, the adapter's
# adapter.json decides (issue 29). GROUNDED_EXIT=on reads with --grounded-exit on (SET-grounded);
# unset or off, with --grounded-exit off (an adapter trained to exit would ground by default).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
stage=$1 adapter=$2
shift 2
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(heldout8k-ledger heldout8k-unseen-keyless heldout8k heldout8k-plain)
flags=()
suffix=""
if [ "${SECTION_FIRST:-0}" = 1 ]; then flags+=(--section-first); suffix=-section-first; fi
case "${EXIT_GATE:-}" in
  "") ;;
  on|off) flags+=(--exit-gate "$EXIT_GATE"); suffix="$suffix-exit-$EXIT_GATE" ;;
  *) echo "EXIT_GATE must be on or off, not $EXIT_GATE" >&2; exit 2 ;;
esac
case "${EXIT_PROBE:-}" in
  "") ;;
  on|off) flags+=(--exit-probe "$EXIT_PROBE"); suffix="$suffix-probe-$EXIT_PROBE" ;;
  *) echo "EXIT_PROBE must be on or off, not $EXIT_PROBE" >&2; exit 2 ;;
esac
# memagent's shipped reading has the exit probe on since stop 71; these checks read without it
[ "$adapter" = memory ] && [ -z "${EXIT_PROBE:-}" ] && flags+=(--exit-probe off)
case "${GROUNDED_EXIT:-}" in
  "" | off) flags+=(--grounded-exit off) ;;  # the names from before it was the default
  on) flags+=(--grounded-exit on); suffix="$suffix-grounded" ;;
  *) echo "GROUNDED_EXIT must be on or off, not $GROUNDED_EXIT" >&2; exit 2 ;;
esac
mkdir -p "recipes/smollm2/curves/$stage"
for set in "${sets[@]}"; do
  out="recipes/smollm2/runs/checks/$stage-$set$suffix"
  .venv/bin/longread eval run --data "recipes/smollm2/data/$set" --agent memagent \
    --adapter "$adapter" --lookup-decoding off "${flags[@]}" --out "$out" --concurrency 1 --no-progress
  cp "$out/summary.json" "recipes/smollm2/curves/$stage/$set$suffix-summary.json"
  .venv/bin/python -c 'import json,sys; s=json.load(open(sys.argv[1])); print(sys.argv[2], {k: s[k] for k in s if k in ("n", "accuracy", "sub_em", "mean_seconds")})' \
    "$out/summary.json" "$stage $set$suffix"
done
