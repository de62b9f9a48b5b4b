#!/usr/bin/env bash
# The results page docs/results.md (+ docs/results.png): memagent, rag and full on the embedded
# SmolLM2-135M, on RULER niah_single_2 and RULER-HQA (HotpotQA) at 2K, 8K and 16K tokens, 10
# samples per cell. Hours on 2 CPU cores; every run is resumable, so rerun this script after an
# interruption and it carries on where it stopped.
#
#   HOTPOTQA=path/to/hotpotqa_dev.json scripts/results_embedded.sh
set -euo pipefail
cd "$(dirname "$0")/.."
make install >/dev/null

LONGREAD=.venv/bin/longread
HOTPOTQA=${HOTPOTQA:-../shared/data/hotpotqa_dev_sample100.json}
DATA=results/data
RUNS=results/runs
LENGTHS=(2048 8192 16384)
N=${N:-10}
# SmolLM2 keeps a fact in memory only with small chunks and a small memory cap (see README).
MEMAGENT_FLAGS=(--chunk-tokens 1000 --memory-tokens 256)

lengths_csv=$(IFS=,; echo "${LENGTHS[*]}")
[ -f "$DATA/ruler_niah_single_2_${LENGTHS[-1]}.jsonl" ] ||
  $LONGREAD data ruler --task niah_single_2 --lengths "$lengths_csv" --n "$N" --seed 0 --out "$DATA"
[ -f "$DATA/hotpotqa_${LENGTHS[-1]}.jsonl" ] ||
  $LONGREAD data hotpotqa --input "$HOTPOTQA" --lengths "$lengths_csv" --n "$N" --seed 0 --out "$DATA"

start=$(date +%s)
# The script's own sessions, interrupted ones included, so the page can say how long the whole
# run took across sessions.
record_session() {
  local status=$? seconds=$(( $(date +%s) - start ))
  echo "{\"started\": \"$(date -u -d "@$start" +%FT%TZ)\", \"seconds\": $seconds, \"exit\": $status}" \
    >> results/invocations.jsonl
  echo "this session of scripts/results_embedded.sh took $seconds s"
}
trap record_session EXIT
for agent in rag full memagent; do
  flags=()
  [ "$agent" = memagent ] && flags=("${MEMAGENT_FLAGS[@]}")
  for set in ruler_niah_single_2 hotpotqa; do
    for length in "${LENGTHS[@]}"; do
      $LONGREAD eval run --data "$DATA/${set}_${length}.jsonl" --agent "$agent" "${flags[@]}" \
        --out "$RUNS/$agent-$set-$length" --concurrency 1
    done
  done
done
trap - EXIT
record_session

report=$(mktemp)
$LONGREAD eval report "$RUNS"/* --markdown "$report" --plot docs/results.png
total=$(.venv/bin/python -c 'import json,sys; print(round(sum(json.loads(l)["seconds"] for l in open(sys.argv[1]))))' results/invocations.jsonl)
sessions=$(wc -l < results/invocations.jsonl)
{
  echo "# Results on the embedded model"
  echo
  echo "Made by \`scripts/results_embedded.sh\` (N=$N samples per cell) with longread" \
    "$(.venv/bin/python -c 'import longread; print(longread.__version__)'), on $(nproc) CPU cores" \
    "($(lscpu | sed -n 's/^Model name: *//p')), no GPU. The script ran in $sessions session(s)" \
    "taking $total s of wall time in all (\`results/invocations.jsonl\`); rerunning it resumes" \
    "any unfinished cell and rewrites this page. The model is the embedded SmolLM2-135M-Instruct" \
    "(Q8_0 via llama-cpp-python, 8192-token window)."
  echo
  [ -f docs/results_notes.md ] && cat docs/results_notes.md && echo
  echo "![accuracy against context length](results.png)"
  echo
  sed '1{/^# Evaluation report$/d}' "$report"
} > docs/results.md
rm -f "$report"
echo "wrote docs/results.md and docs/results.png"
