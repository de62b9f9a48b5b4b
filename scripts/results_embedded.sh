#!/usr/bin/env bash
# The results page docs/results.md (+ docs/results.png): the embedded SmolLM2-135M with and
# without its shipped memory adapter (issue 10), memagent beside the rag and full baselines, on
# RULER niah_single_2, RULER-HQA (HotpotQA) and niah_single_3 (uuid values: a needle type the
# adapter was never trained on) at 2K, 8K and 16K tokens, and memagent with the adapter at 32K.
# N samples per cell (default 20). Many hours on 2 CPU cores; every run is resumable, so rerun
# this script after an interruption and it carries on where it stopped. Cells run in order of
# importance (the adapter's first, then the base model's and the baselines' on the trained tasks,
# then theirs on the untrained one); CELLS=adapter (or base, or baselines) runs one group only;
# CELLS=agents the three memory agents on two-hop chains (issue 28); CELLS=gates the exit
# gate off and on (issue 29); CELLS=probe the shipped reading with the exit probe on every other
# results set (issue 29's default); CELLS=multikey the shipped adapter on RULER's niah_multikey_2
# (a haystack of other keys' needles, never trained on), with focused rereads as shipped and
# with stop 57's rule (issue 26, target 6);
# CELLS=lookup the shipped reading (probe on) with prompt-lookup decoding on the probe's sets
# (issue 26, targets 6 and 7: may it be the default?); CELLS=formatstop rememr1 with its shipped
# adapter and format stops (issue 28: its formats, 95% well formed?); CELLS=updategate
# memagent with stage sft29x's update gate, read as shipped with the shipped exit probe, on the
# probe's sets (issue 29: may the update gate ship?); CELLS=loopstop rememr1 as shipped with
# and without loop stops (issue 28: the decoding a looping reply wastes); CELLS=grammar rememr1
# as shipped with its format's grammar (issue 28: replies well formed on held-out wordings?),
# CELLS=grammaragain three of them again (the seconds of greedy decoding that checks its pick);
# CELLS=updateagain the default's HotpotQA 8K cell again, on the update gate cell's kind of CPU;
# CELLS=updategate29y stage sft29y's update gate (HotpotQA self-distilled) on HotpotQA, then needles;
# CELLS=gateprompt the shipped default with the update gate's prompt on HotpotQA 8K (a diagnosis);
# CELLS=hotpotqa50 those three HotpotQA 8K readings on the other 30 questions of the evaluation
# pool, so that they pair on all 50 (issue 29); CELLS=gateneedles stage sft29y's update gate on
# niah_single_2 at 8K, 16K and 32K (issue 29: may it ship as the gate's adapter?), and
# CELLS=gateagain the default's 16K cell again beside them, for seconds on one machine;
# CELLS=gaterest the update gate as shipped on a held-out wording and under memreread;
# CELLS=vt RULER's variable tracking at 4K, the model as released and each shipped agent;
# CELLS=exit64again the exit probe on and off at 64K again, for seconds on one machine;
# CELLS=cost26 stage 1e as it shipped against today's default at 32K, for seconds (issue 26);
# CELLS=longbase the model as released on niah_single_2 at 32K and 64K (issue 26's base rows);
# CELLS=none only rewrites the page from the runs made so far (a page written before every cell
# has run says so at the top).
#
#   HOTPOTQA=path/to/hotpotqa_dev_sample100.json scripts/results_embedded.sh
#
# The first round (10 samples, base model only, older prompts) is docs/results-v1.md, made from
# results/runs/ by this script's first version.
#
# `adapter` cells run the adapter shipped now. When recipes/smollm2/ship.py ships another stage,
# rename the old adapter cells' folders after the stage that made them
# (memagent-adapter-X -> memagent-sft1k-X: they can no longer resume, the file changed) and
# rerun: the page keeps their rows, labelled by stage (`memory adapter sft1k`), beside the new.
set -euo pipefail
cd "$(dirname "$0")/.."
make install >/dev/null

LONGREAD=.venv/bin/longread
HOTPOTQA=${HOTPOTQA:-../shared/data/hotpotqa_dev_sample100.json}
ROOT=results/v2
DATA=$ROOT/data
RUNS=$ROOT/runs
LENGTHS=(2048 8192 16384)
N=${N:-20}
CELLS=${CELLS:-all}
# The memory agent's setting, which the adapter was trained at (recipes/smollm2/sft1k.toml).
# The committed cells ran with the papers' 1,024-token final answers; given explicitly, so that
# they resume now that the adapter's own 32 (what it trained with) is the bundled model's default.
MEMAGENT_FLAGS=(--chunk-tokens 1000 --memory-tokens 256 --final-tokens 1024)
# Since issue 26, adapter cells run with plain flags (no settings given: the adapter's own,
# from its adapter.json: 1000/256/32 for the stages so far, final answers read with at least
# 64 tokens since stop 41), as a user's plain `ask` does;
# base cells keep MEMAGENT_FLAGS. Issue 26 adds niah_single_2 at 64K (N64 samples, default
# 10), the held-out wordings in the held-out prose (recipes/smollm2/heldout/) at 8K, and
# --section-first at 8K.
N64=${N64:-10}
HELD_OUT_CELLS=(unseen-ledger unseen-harbour unseen-archive unseen-locker unseen-greenhouse
  unseen-van)
# HotpotQA questions come from the evaluation half of the dev sample only: the first 50 records
# (recipes/smollm2/hotpotqa_eval_ids.txt); the adapter trained on the other 50.
if [ "$N" -gt 50 ]; then
  echo "N=$N: the HotpotQA evaluation pool holds 50 questions" >&2
  exit 2
fi

sets() {  # build every set once, seed 0 (training sets use seeds from 1001)
  local csv
  csv=$(IFS=,; echo "${LENGTHS[*]}")
  for task in niah_single_2 niah_single_3; do
    [ -f "$DATA/ruler_${task}_${LENGTHS[-1]}.jsonl" ] ||
      $LONGREAD data ruler --task "$task" --lengths "$csv" --n "$N" --seed 0 --out "$DATA"
  done
  [ -f "$DATA/ruler_niah_single_2_32768.jsonl" ] ||
    $LONGREAD data ruler --task niah_single_2 --lengths 32768 --n "$N" --seed 0 --out "$DATA"
  [ -f "$DATA/hotpotqa_${LENGTHS[-1]}.jsonl" ] ||
    $LONGREAD data hotpotqa --input "$HOTPOTQA" --lengths "$csv" --n "$N" --seed 0 --out "$DATA"
  [ -f "$DATA/ruler_niah_single_2_65536.jsonl" ] ||
    $LONGREAD data ruler --task niah_single_2 --lengths 65536 --n "$N64" --seed 0 --out "$DATA"
  held_out unseen-ledger niah_single_2 heldout-ledger
  held_out unseen-harbour niah_single_1 heldout-harbour
  held_out unseen-archive niah_single_2 heldout-archive  # since stop 53
  held_out unseen-locker niah_single_2 heldout-locker  # since stop 54
  held_out unseen-greenhouse niah_single_2 heldout-greenhouse  # since stop 55
  held_out unseen-van niah_single_2 heldout-van  # since stop 56
  [ -f "$DATA/ruler_niah_multikey_2_8192.jsonl" ] ||  # issue 26 target 6, since stop 58
    $LONGREAD data ruler --task niah_multikey_2 --lengths 8192 --n "$N" --seed 0 --out "$DATA"
  for order in reversed forward; do  # issue 28: two-hop chains, the task rereading is for
    [ -f "$DATA/chains_${order}_8192.jsonl" ] ||
      $LONGREAD data chains --order "$order" --lengths 8192 --n "$N" --seed 0 --out "$DATA" \
        --distractor-order mixed  # the committed sets (stop 59); "same" has no first-code shortcut
  done
  same_order_chains  # since stop 62
}

hotpotqa_rest() {  # the evaluation pool's other 30 questions at 8K: samples 21-50 of its N=50 set
  local tmp
  [ -f "$DATA/hotpotqa_rest_8192.jsonl" ] && return
  tmp=$(mktemp -d)
  $LONGREAD data hotpotqa --input "$HOTPOTQA" --lengths 8192 --n 50 --seed 0 --out "$tmp"
  # the N=20 set is the first 20 lines of the N=50 one (checked here, or the pairs would overlap)
  head -n 20 "$tmp/hotpotqa_8192.jsonl" | cmp -s - "$DATA/hotpotqa_8192.jsonl" ||
    { echo "hotpotqa_rest: the N=20 set is not the start of the N=50 one" >&2; exit 1; }
  tail -n +21 "$tmp/hotpotqa_8192.jsonl" > "$DATA/hotpotqa_rest_8192.jsonl"
  rm -rf "$tmp"
}

vt_set() {  # RULER's variable tracking at 4K, the results sets' seed and N
  local tmp
  [ -f "$DATA/ruler_vt_4096.jsonl" ] && return
  tmp=$(mktemp -d)
  $LONGREAD data ruler --task vt --lengths 4096 --n "$N" --seed 0 --out "$tmp"
  mv "$tmp/ruler_vt_4096.jsonl" "$DATA/ruler_vt_4096.jsonl"
  rm -rf "$tmp"
}

same_order_chains() {  # the reversed chains, every distractor chain reversed too: no shortcut
  local tmp
  [ -f "$DATA/chains_reversed_same_8192.jsonl" ] && return
  tmp=$(mktemp -d)
  $LONGREAD data chains --order reversed --lengths 8192 --n "$N" --seed 0 --out "$tmp" \
    --distractor-order same
  mv "$tmp/chains_reversed_8192.jsonl" "$DATA/chains_reversed_same_8192.jsonl"
  rm -rf "$tmp"
}

held_out() {  # held_out NAME TASK WORDING: a held-out wording in the held-out prose, 8K
  local tmp
  [ -f "$DATA/${1}_8192.jsonl" ] && return
  tmp=$(mktemp -d)
  $LONGREAD data ruler --task "$2" --lengths 8192 --n "$N" --seed 0 --wording "$3" \
    --haystack recipes/smollm2/heldout/pydoc-prose.txt --out "$tmp"
  mv "$tmp/ruler_${2}_8192.jsonl" "$DATA/${1}_8192.jsonl"
  rm -rf "$tmp"
}

complete() {  # complete RUN_DIR DATA: every sample of DATA is done in RUN_DIR
  [ -f "$1/results.sqlite" ] && .venv/bin/python - "$1/results.sqlite" "$2" <<'PY'
import sqlite3, sys
done = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True).execute(
    "select count(*) from results where status = 'done'").fetchone()[0]
sys.exit(0 if done >= sum(1 for line in open(sys.argv[2]) if line.strip()) else 1)
PY
}

cell() {  # cell AGENT MODEL SET LENGTH [HOW]; MODEL: adapter, shared, gate or base (--adapter
  # memory: the agent's own shipped adapter, else the shared one; --adapter memory:memagent:
  # the shared one; --adapter memory --update-gate on: the gate's; --base-model) or a recipe stage; HOW: section-first (with --section-first), exit-on /
  # exit-off (--exit-gate on/off), probe-on / probe-off (--exit-probe on/off), grounded
  # (--grounded-exit on; an exit on without it reads --grounded-exit off), notes
  # (--grounded-notes on), focused (--focused-notes on), exact (--exact-copies on), reread
  # (--focused-reread on), no-reread (--focused-reread off), rule-STOP (an earlier rule of
  # focused rereads, by recipes/smollm2/earlier_rule.py STOP), max-reread-N (--max-reread N), decide-STAGE
  # (--decision-adapter recipes/smollm2/runs/STAGE/adapter.gguf), lookup (--lookup-decoding on; without it --lookup-decoding off),
  # format-stop (--format-stop on), loop-stop (--loop-stop on), grammar (--format-grammar on), keep (--update-gate on), probe-shipped (the exit probe's
  # calls with memagent's shipped probe adapter: --probe-adapter, for a recipe stage's cells),
  # again (no flag: a rerun in its own folder), or several joined by +
  # (section-first+exit-off); the run folder's name ends with HOW
  local agent=$1 model=$2 set=$3 length=$4 how=${5:-} flags=() part runner=("$LONGREAD")
  local out="$RUNS/$agent-$model-$set-$length${5:+-$5}" data="$DATA/${set}_${length}.jsonl"
  # A finished cell is left as it is: resuming it would load the model for nothing and add an
  # empty session to the run's records.
  if complete "$out" "$data"; then echo "$out: complete"; return; fi
  # the base model reads at the adapter's settings with the papers' final answers; an adapter
  # cell of the stage shipped now with plain flags (the adapter's own settings)
  [ "$agent" = memagent ] && [ "$model" = base ] && flags+=("${MEMAGENT_FLAGS[@]}")
  for part in ${how//+/ }; do
    case $part in
      section-first) flags+=(--section-first) ;;
      exit-on | exit-off) flags+=(--exit-gate "${part#exit-}") ;;
      probe-on | probe-off) flags+=(--exit-probe "${part#probe-}") ;;
      grounded) flags+=(--grounded-exit on) ;;
      notes) flags+=(--grounded-notes on) ;;
      focused) flags+=(--focused-notes on) ;;
      exact) flags+=(--exact-copies on) ;;
      reread) flags+=(--focused-reread on) ;;
      no-reread) flags+=(--focused-reread off) ;;  # an adapter shipped to reread, without
      rule-*) runner=(.venv/bin/python recipes/smollm2/earlier_rule.py "${part#rule-}") ;;
      max-reread-*) flags+=(--max-reread "${part#max-reread-}") ;;  # memreread's rounds
      # memreread's decide and integrate calls with a recipe stage's adapter (the rest: MODEL's)
      decide-*) flags+=(--decision-adapter "recipes/smollm2/runs/${part#decide-}/adapter.gguf") ;;
      lookup) flags+=(--lookup-decoding on) ;;
      format-stop) flags+=(--format-stop on) ;;
      loop-stop) flags+=(--loop-stop on) ;;
      grammar) flags+=(--format-grammar on) ;;
      keep) flags+=(--update-gate on) ;;
      probe-shipped) flags+=(--probe-adapter src/longread/adapters/smollm2-135m-memagent.gguf) ;;
      again) ;;  # the same reading in a folder of its own: a rerun after a speed-only change
      *) echo "cell: unknown HOW $part" >&2; exit 2 ;;
    esac
  done
  # an exit on without `grounded` is the papers' gate, though an adapter trained to exit
  # grounds its exits by default
  case "+$how+" in
    *+grounded+*) ;;
    *+probe-on+* | *+exit-on+*) flags+=(--grounded-exit off) ;;
  esac
  # memagent's shipped reading has the exit probe on since stop 71: its plain adapter cells,
  # made before, keep the reading without it (the shipped default is the probe-on+grounded
  # cells)
  case "$agent:$model:+$how+" in
    *+probe-o*+* | *+exit-o*+*) ;;
    memagent:adapter:*) flags+=(--exit-probe off) ;;
  esac
  # lookup decoding is on by default since stop 78: every cell made before read one token a
  # step, and a cell without `lookup` still does, so that it resumes as it began
  case "+$how+" in *+lookup+*) ;; *) flags+=(--lookup-decoding off) ;; esac
  [ "$model" = base ] && flags+=(--base-model)
  # an `adapter` cell with the update gate on (`keep`) is the shared adapter shown the gate's
  # sentence, as it was before the gate got an adapter of its own; a `gate` cell is what
  # `--update-gate on` reads with now: the gate's shipped adapter for the updates (stop 80)
  case "$model:+$how+" in
    adapter:*+keep+*) flags+=(--adapter memory:memagent) ;;
    adapter:*) flags+=(--adapter memory) ;;
    gate:*) flags+=(--adapter memory --update-gate on) ;;
  esac
  [ "$model" = shared ] && flags+=(--adapter memory:memagent)  # the shared adapter, any agent
  case $model in adapter | base | shared | gate) ;; *) flags+=(--adapter "recipes/smollm2/runs/$model/adapter.gguf") ;; esac
  "${runner[@]}" eval run --data "$data" --agent "$agent" "${flags[@]}" --out "$out" \
    --concurrency 1
}

start=$(date +%s)
# The script's own sessions, interrupted ones included, so the page can say how long the whole
# run took across sessions.
record_session() {
  local status=$? seconds=$(( $(date +%s) - start ))
  echo "{\"started\": \"$(date -u -d "@$start" +%FT%TZ)\", \"seconds\": $seconds, \"exit\": $status}" \
    >> "$ROOT/invocations.jsonl"
  echo "this session of scripts/results_embedded.sh took $seconds s"
}
mkdir -p "$ROOT"
sets
trap record_session EXIT
SETS=(ruler_niah_single_2 hotpotqa ruler_niah_single_3)
TRAINED=(ruler_niah_single_2 hotpotqa)  # the tasks the adapter trained on
want() { [ "$CELLS" = all ] || [ "$CELLS" = "$1" ]; }
baselines() {  # baselines SET...: full and rag, the target's comparison (full) first
  local set length agent
  for set in "$@"; do
    for length in "${LENGTHS[@]}"; do
      for agent in full rag; do cell "$agent" base "$set" "$length"; done
    done
  done
}
memory_cells() {  # memory_cells MODEL [HOW]: every cell a memory adapter reads (MODEL: adapter,
  # the one shipped, or a recipe stage; HOW as in `cell`, for every cell)
  local model=$1 how=${2:-} set length
  for set in "${SETS[@]}"; do
    for length in "${LENGTHS[@]}"; do cell memagent "$model" "$set" "$length" "$how"; done
  done
  cell memagent "$model" ruler_niah_single_2 32768 "$how"
  cell memagent "$model" ruler_niah_single_2 65536 "$how"
  for set in "${HELD_OUT_CELLS[@]}"; do cell memagent "$model" "$set" 8192 "$how"; done
  cell memagent "$model" ruler_niah_single_2 8192 "section-first${how:++$how}"
}
want adapter && memory_cells adapter
# The cells the targets compare against come before the untrained task's: the base model at
# each length on both trained tasks (shortest first), then full and rag on them; an interrupted
# run leaves those done first.
if want base; then
  for length in "${LENGTHS[@]}"; do
    for set in "${TRAINED[@]}"; do cell memagent base "$set" "$length"; done
  done
fi
want baselines && baselines "${TRAINED[@]}"
if want base; then
  for length in "${LENGTHS[@]}"; do cell memagent base ruler_niah_single_3 "$length"; done
fi
want baselines && baselines ruler_niah_single_3
# The base model on long needles (issue 26's rows from 2K to 64K): last, the slowest cells
# (it writes its memory to the cap at every update); CELLS=longbase runs these two alone
if want base || want longbase; then
  cell memagent base ruler_niah_single_2 32768
  cell memagent base ruler_niah_single_2 65536
fi
# STAGES="sft2a grpo2b": recipe stages not shipped, on every cell the shipped adapter reads
# (their adapter.gguf in recipes/smollm2/runs/STAGE: a training run's, or
# recipes/smollm2/export_stage.py STAGE for a committed one), so that a stage compares with
# the shipped adapter set by set (`longread eval compare`) before it ships. STAGE_HOW=exit-off
# reads them all with the exit gate off (a stage trained with it, read the papers' way), and
# probe-on / probe-off likewise; the folders' names then end with it (CELLS=gates's folders
# are reused: STAGE_HOW=probe-on after CELLS=gates runs only the cells it has not).
for stage in ${STAGES:-}; do memory_cells "$stage" "${STAGE_HOW:-}"; done
# Issue 28: the three memory agents on reversed two-hop chains and their forward control, 8K
# (CELLS=agents); the model as released first: the floor a trained agent must beat
# AGENT_STAGES="memreread:sft28r rememr1:sft28m": an agent with a recipe stage's adapter
# (recipes/smollm2/runs/STAGE/adapter.gguf), run first, on reversed chains and on
# niah_single_2 (the targets: 20 points above memagent's shipped default on the chains, no
# worse on the needles), with that default's own cells before them
if want agents; then
  cell memagent adapter chains_reversed 8192
  cell memagent adapter chains_reversed_same 8192  # the set without the shortcut (stop 62)
  # stop 62: MemReread with its decision stage, read the shipped adapter's way
  cell memreread sft28w chains_reversed_same 8192 notes+focused+exact+reread
  cell memreread sft28w ruler_niah_single_2 8192 notes+focused+exact+reread
  # stop 63: the other targets (no worse at 16K; HotpotQA not below the model as released)
  cell memreread sft28w ruler_niah_single_2 16384 notes+focused+exact+reread
  cell memreread sft28w hotpotqa 8192 notes+focused+exact+reread
  # three rounds (the reference allows 2 or 3): in 2 samples the second round found the place
  cell memreread sft28w chains_reversed_same 8192 notes+focused+exact+reread+max-reread-3
  # stop 64: memreread with the shared adapter (its default until stop 64), read its way
  cell memreread shared chains_reversed_same 8192
  cell memreread shared hotpotqa 8192
  # stop 64: sft28z (sft28w with HotpotQA's episodes and the decision after a first hop
  # weighed 3x), memreread's own shipped adapter since stop 64
  cell memreread sft28z chains_reversed_same 8192 notes+focused+exact+reread
  cell memreread sft28z ruler_niah_single_2 8192 notes+focused+exact+reread
  cell memreread sft28z ruler_niah_single_2 16384 notes+focused+exact+reread
  cell memreread sft28z hotpotqa 8192 notes+focused+exact+reread
  # stop 65: ReMemR1 with sft28o (its format's warm start, from sft28n), read the papers' way (ReMemR1
  # had no reading rules until stop 67); the needles first (no worse than memagent's shipped default)
  cell rememr1 sft28o ruler_niah_single_2 8192
  cell rememr1 sft28o chains_reversed_same 8192
  cell rememr1 sft28o hotpotqa 8192
  cell rememr1 sft28o ruler_niah_single_2 16384
  # stop 65: sft28q (no reason sentence): its needle probe took every needle in
  cell rememr1 sft28q ruler_niah_single_2 8192
  cell rememr1 sft28q ruler_niah_single_2 16384
  cell rememr1 sft28q hotpotqa 8192  # stop 66: rememr1's shipped adapter since
  cell rememr1 sft28q chains_reversed_same 8192
  # stop 66: sft28aa (sft28q shown made-up and noisy notes, the reply the clean memory): both
  # of sft28q's 16K misses kept a made-up note over the needle
  cell rememr1 sft28aa ruler_niah_single_2 16384
  cell rememr1 sft28aa ruler_niah_single_2 8192
  cell rememr1 sft28aa hotpotqa 8192
  # stop 66: grpo28m, RLMLR from sft28q (12 steps; its peft not kept: RL moved the notes toward
  # filler, CAMPAIGN.md)
  cell rememr1 grpo28m hotpotqa 8192
  # stop 67: rememr1 with the shipped sft28q read with longread's memory options (grounded and
  # focused notes, exact copies; rememr1 has them since stop 67): sft28q's 16K misses were a
  # made-up note kept over the needle
  cell rememr1 sft28q ruler_niah_single_2 16384 notes+focused+exact
  cell rememr1 sft28q ruler_niah_single_2 8192 notes+focused+exact
  cell rememr1 sft28q hotpotqa 8192 notes+focused+exact
  cell rememr1 sft28q chains_reversed_same 8192 notes+focused+exact
  # stop 68: rememr1 with its shipped adapter read as shipped, plus focused rereads (rememr1 has
  # them since stop 68, and its adapter ships to read with them): its last 16K miss called the
  # glued needle's section empty; held-out wordings first without, then with them
  cell rememr1 adapter ruler_niah_single_2 16384 reread
  cell rememr1 adapter unseen-van 8192 no-reread
  cell rememr1 adapter unseen-van 8192 reread
  cell rememr1 adapter unseen-locker 8192 no-reread
  cell rememr1 adapter unseen-locker 8192 reread
  cell rememr1 adapter ruler_niah_single_2 8192 reread
  cell rememr1 adapter hotpotqa 8192 reread
  cell rememr1 adapter chains_reversed_same 8192 reread
  # stop 67: grpo28r, ReA-GRPO from memreread's shipped sft28z (6 steps), read as sft28z ships
  cell memreread grpo28r chains_reversed_same 8192 notes+focused+exact+reread
  cell memreread grpo28r hotpotqa 8192 notes+focused+exact+reread
  for agent_stage in ${AGENT_STAGES:-}; do
    cell "${agent_stage%%:*}" "${agent_stage#*:}" chains_reversed 8192
    cell "${agent_stage%%:*}" "${agent_stage#*:}" chains_reversed_same 8192
    cell "${agent_stage%%:*}" "${agent_stage#*:}" ruler_niah_single_2 8192
  done
  for set in chains_reversed chains_forward; do
    for agent in memagent memreread rememr1; do cell "$agent" base "$set" 8192; done
  done
fi
# Issue 26, target 6 (CELLS=multikey): other keys' needles share the question's frame; the
# shipped reading knows the question's key since stop 58 (question_keys), stop 57's rule did not
if want multikey; then
  cell memagent adapter ruler_niah_multikey_2 8192
  cell memagent adapter ruler_niah_multikey_2 8192 rule-stop57
  # several questions now read section-first by default: its check on multi-hop questions
  cell memagent adapter hotpotqa 8192 section-first
fi
# Issue 29 (CELLS=gates): the exit gate off, then on, with one stage's adapter trained with
# it (GATE_STAGE, default sft29q: recipes/smollm2/runs/$GATE_STAGE/adapter.gguf; GATE_KIND
# probe, the default, for an adapter trained with the exit probe, exit for the <exit/> tag),
# on HotpotQA at 8K and 16K (the gate's safety: a second hop may come late) and
# niah_single_2 at 32K and 64K (its speed); each pair in a row, so an interrupted run leaves
# whole pairs; then the probe with the grounded exit (--grounded-exit on: an exit counts
# only on notes found in the sections read), HotpotQA 16K and 32K first: the early stops it
# must remove and the speed-up it must keep
if want gates; then
  for set_length in "hotpotqa 8192" "hotpotqa 16384" "ruler_niah_single_2 32768" \
    "ruler_niah_single_2 65536"; do
    for how in "${GATE_KIND:-probe}-off" "${GATE_KIND:-probe}-on"; do
      # shellcheck disable=SC2086  # set_length is two words on purpose
      cell memagent "${GATE_STAGE:-sft29q}" $set_length "$how"
    done
  done
  for set_length in "hotpotqa 16384" "ruler_niah_single_2 32768" "hotpotqa 8192" \
    "ruler_niah_single_2 65536"; do
    # shellcheck disable=SC2086
    cell memagent "${GATE_STAGE:-sft29q}" $set_length "${GATE_KIND:-probe}-on+grounded"
  done
  # The shipped reading with the exit probe (stop 69): the shared adapter's updates, read as it
  # ships, and memagent's shipped probe adapter (sft29q, for the probe's calls only); the
  # probe-off pairs are the shipped reading's own cells (memagent-grpo26b-run-step6-*), made on
  # another machine, so 32K's probe-off runs again beside it for the seconds
  for set_length in "ruler_niah_single_2 32768" "hotpotqa 8192" "ruler_niah_single_2 65536" \
    "hotpotqa 16384"; do
    # shellcheck disable=SC2086
    cell memagent adapter $set_length probe-on+grounded
  done
  cell memagent adapter ruler_niah_single_2 32768 probe-off
fi
# Issue 29's default (CELLS=probe): the exit probe may be on by default for the embedded model
# only if it costs no accuracy on any results set, so the shipped reading with the probe on
# every results set memagent's shipped default has a cell on (after CELLS=gates's four). Stop
# 70: niah_multikey_2 lost with stop 69's grounded exit (its folder is kept as ...-unkeyed);
# the cell here reads with the keyed exit (every note about the question names its key)
if want probe; then
  for set_length in "ruler_niah_single_2 8192" "ruler_niah_single_2 16384" \
    "ruler_niah_single_2 2048" "ruler_niah_single_3 8192" "ruler_niah_single_3 16384" \
    "ruler_niah_single_3 2048" "hotpotqa 2048" "ruler_niah_multikey_2 8192" \
    "chains_reversed_same 8192"; do
    # shellcheck disable=SC2086
    cell memagent adapter $set_length probe-on+grounded
  done
  for set in "${HELD_OUT_CELLS[@]}"; do cell memagent adapter "$set" 8192 probe-on+grounded; done
  cell memagent adapter ruler_niah_single_2 8192 section-first+probe-on+grounded
fi
# Issue 26, targets 6 and 7 (CELLS=lookup): prompt-lookup decoding (--lookup-decoding) may be the
# embedded model's default for greedy calls only if no results set loses: the shipped reading
# (the probe on) with it, on the sets CELLS=probe ran, paired with those cells by
# `longread eval compare`. The sets where replies copy the most, and the longest, first.
if want lookup; then
  for set_length in "hotpotqa 8192" "ruler_niah_single_2 32768" "ruler_niah_multikey_2 8192" \
    "unseen-van 8192" "ruler_niah_single_3 16384" "chains_reversed_same 8192" \
    "ruler_niah_single_2 8192" "ruler_niah_single_2 16384" "hotpotqa 16384" \
    "ruler_niah_single_3 8192" "hotpotqa 2048" "ruler_niah_single_2 2048" \
    "ruler_niah_single_3 2048"; do
    # shellcheck disable=SC2086
    cell memagent adapter $set_length probe-on+grounded+lookup
  done
  for set in "${HELD_OUT_CELLS[@]}"; do
    [ "$set" = unseen-van ] || cell memagent adapter "$set" 8192 probe-on+grounded+lookup
  done
  cell memagent adapter ruler_niah_single_2 8192 section-first+probe-on+grounded+lookup
  cell memagent adapter ruler_niah_single_2 65536 probe-on+grounded+lookup
fi
# Issue 28 (CELLS=formatstop): rememr1's shipped adapter read as shipped with format stops
# (--format-stop on: a step's reply ends at a second <update> after a closed block), paired by
# `longread eval compare` and recipes/smollm2/agent_formats.py with the `reread` cells above.
# The sets whose replies broke the format most first.
if want formatstop; then
  for set_length in "chains_reversed_same 8192" "hotpotqa 8192" "ruler_niah_single_2 8192" \
    "ruler_niah_single_2 16384"; do
    # shellcheck disable=SC2086
    cell rememr1 adapter $set_length reread+format-stop
  done
fi
# Issue 29 (CELLS=updategate): stage sft29x's update gate (<keep/> where a section adds nothing)
# may ship only if no results set loses against the shipped default: sft29x's updates read as
# memagent ships (grounded, focused notes, exact copies, focused rereads) with the shipped exit
# probe, on the sets CELLS=probe ran, paired with those cells by `longread eval compare`; the
# longest first (the gate's speed), then the sets where a kept needle costs most. Needs
# recipes/smollm2/runs/sft29x/adapter.gguf (`.venv/bin/python recipes/smollm2/export_stage.py
# sft29x` on a fresh clone).
if want updategate; then
  how=keep+notes+focused+exact+reread+probe-on+grounded+probe-shipped
  for set_length in "ruler_niah_single_2 32768" "ruler_niah_single_2 8192" \
    "ruler_niah_single_2 16384" "hotpotqa 8192" "ruler_niah_single_3 16384" \
    "ruler_niah_multikey_2 8192" "chains_reversed_same 8192" "hotpotqa 16384" \
    "ruler_niah_single_3 8192" "hotpotqa 2048" "ruler_niah_single_2 2048" \
    "ruler_niah_single_3 2048"; do
    # shellcheck disable=SC2086
    cell memagent sft29x $set_length "$how"
  done
  for set in "${HELD_OUT_CELLS[@]}"; do cell memagent sft29x "$set" 8192 "$how"; done
  cell memagent sft29x ruler_niah_single_2 8192 "section-first+$how"
  cell memagent sft29x ruler_niah_single_2 65536 "$how"
fi
# Issue 28 (CELLS=loopstop): rememr1 read as shipped (format stops included), with loop stops
# (--loop-stop on: a step's reply ends where it falls into a loop) and without, one pair per set
# on one machine, so that seconds compare; the held-out wordings first, where the loops are
# (stop 74's replay of the stop-68 runs: 59% of locker's decoded tokens, 30% of van's).
if want loopstop; then
  for set_length in "unseen-locker 8192" "unseen-van 8192" "hotpotqa 8192"; do
    for how in format-stop format-stop+loop-stop; do
      # shellcheck disable=SC2086
      cell rememr1 adapter $set_length "$how"
    done
  done
fi
# Issue 28 (CELLS=grammar): rememr1 read as shipped (format and loop stops) with its step
# replies decoded under their format's grammar (--format-grammar on), paired (`longread eval
# compare`; agent_formats.py for the share well formed) with the cells read as shipped without
# it: CELLS=loopstop's (locker, van) and CELLS=formatstop's (loop stops change no reply's
# reading: stop 74's replay). The held-out wordings first, where the format breaks.
if want grammar; then
  for set_length in "unseen-locker 8192" "unseen-van 8192" "hotpotqa 8192" \
    "chains_reversed_same 8192" "ruler_niah_single_2 8192"; do
    # shellcheck disable=SC2086
    cell rememr1 adapter $set_length format-stop+loop-stop+grammar
  done
fi
# Issue 28 (CELLS=grammaragain): the same grammar cells again after greedy decoding under a
# grammar came to check only its pick (llamacpp_grammar.GreedyUnderGrammar): the same replies
# (`longread eval compare` with the cells above), and the seconds against the cells read as
# shipped without the grammar, read again beside them (one session's seconds compare; another
# session's, even on the same kind of CPU, ran up to 1.45x slower for the same tokens).
if [ "$CELLS" = grammaragain ]; then  # not in CELLS=all: a rerun
  for set_length in "hotpotqa 8192" "chains_reversed_same 8192" "ruler_niah_single_2 8192"; do
    # shellcheck disable=SC2086
    cell rememr1 adapter $set_length format-stop+loop-stop+grammar+again
  done
  for set_length in "ruler_niah_single_2 8192" "hotpotqa 8192"; do
    # shellcheck disable=SC2086
    cell rememr1 adapter $set_length format-stop+loop-stop+again
  done
fi
# Issue 29 (CELLS=updateagain): the shipped default's HotpotQA 8K cell read again on the kind of
# CPU that read sft29x's updategate cell (its first cell ran on another kind: greedy replies can
# change with the kernels), so that `longread eval compare` pairs the update gate on one kind.
if [ "$CELLS" = updateagain ]; then  # not in CELLS=all: a rerun
  cell memagent adapter hotpotqa 8192 probe-on+grounded+again
fi
# Issue 29 (CELLS=updategate29y): stage sft29y (sft29x with HotpotQA rows self-distilled from
# the shipped adapter's own replies) read as CELLS=updategate reads sft29x; HotpotQA first (the
# set sft29x lost), each beside the default's cell read again on this kind of CPU (`+again`),
# then the needle sets. Needs recipes/smollm2/runs/sft29y/adapter.gguf (`.venv/bin/python
# recipes/smollm2/export_stage.py sft29y` on a fresh clone).
if [ "$CELLS" = updategate29y ]; then  # not in CELLS=all: a candidate's check
  how=keep+notes+focused+exact+reread+probe-on+grounded+probe-shipped
  cell memagent sft29y hotpotqa 8192 "$how"
  cell memagent sft29y hotpotqa 16384 "$how"
  cell memagent adapter hotpotqa 16384 probe-on+grounded+again
  for length in 8192 16384 32768; do cell memagent sft29y ruler_niah_single_2 "$length" "$how"; done
fi
# Issue 29 (CELLS=gateprompt): the shipped default read with the update gate on, i.e. the
# update prompt with the gate's sentence, which its adapter never trained on: does the prompt
# alone move HotpotQA's notes (sft29x and sft29y both lost there)? Pairs with `+again`.
if [ "$CELLS" = gateprompt ]; then  # not in CELLS=all: a diagnosis
  cell memagent adapter hotpotqa 8192 probe-on+grounded+keep
fi
# Issue 29 (CELLS=hotpotqa50): at N=20 the update gate's HotpotQA 8K pairs (5, 3 and 2 of 20)
# cannot be told apart, so the same three readings read the pool's other 30 questions; pair them
# with `longread eval compare` over both sets (its pooled row). Needs sft29y as CELLS=updategate29y.
if [ "$CELLS" = hotpotqa50 ]; then  # not in CELLS=all: a candidate's check
  hotpotqa_rest
  cell memagent adapter hotpotqa_rest 8192 probe-on+grounded+again
  cell memagent adapter hotpotqa_rest 8192 probe-on+grounded+keep
  cell memagent sft29y hotpotqa_rest 8192 keep+notes+focused+exact+reread+probe-on+grounded+probe-shipped
fi
# Issue 29 (CELLS=gateneedles): sft29y read as CELLS=updategate29y reads it, on the needle sets
# only (its HotpotQA cells are CELLS=hotpotqa50's).
if [ "$CELLS" = gateneedles ]; then  # not in CELLS=all: a candidate's check
  for length in 8192 16384 32768; do
    cell memagent sft29y ruler_niah_single_2 "$length" \
      keep+notes+focused+exact+reread+probe-on+grounded+probe-shipped
  done
fi
if [ "$CELLS" = gateagain ]; then  # not in CELLS=all: a rerun
  cell memagent adapter ruler_niah_single_2 16384 probe-on+grounded+again
fi
# Issue 29 (CELLS=gaterest): the update gate as shipped (`gate`: --update-gate on) where it was
# not measured: memagent (the gate's adapter) on a held-out wording in held-out prose, and
# memreread, each paired by answers with the gate-off cells (`memagent adapter ...
# probe-on+grounded`, `memreread sft28z ...`). memreread keeps its own adapter under the gate
# since stop 81 (the gate then only its prompt's sentence); stop 80 gave it the gate's adapter,
# its folders end `-stop80` (reversed chains 0 of 20: why it no longer does).
if [ "$CELLS" = gaterest ]; then  # not in CELLS=all: a candidate's check
  cell memagent gate unseen-van 8192 probe-on+grounded
  cell memreread gate chains_reversed_same 8192
  cell memreread gate ruler_niah_single_2 8192
fi
# Issue 29 (CELLS=exit64again): the exit probe's first target at 64K in seconds on one machine
# (stop 69 paired 32K only: 2.22x; 64K had prefill counts, 2.68x less): the shipped reading with
# the probe, then without it, one after the other; `longread eval compare` pairs the samples
# both finished (the probe-off one takes about 2.5x as long: it may be stopped part way).
if [ "$CELLS" = exit64again ]; then  # not in CELLS=all: a rerun
  cell memagent adapter ruler_niah_single_2 65536 probe-on+grounded+again
  cell memagent adapter ruler_niah_single_2 65536 probe-off+again
fi
# Issue 26, target 7 (CELLS=cost26): seconds a sample, the adapter shipped before RL (stage 1e,
# read as it shipped: no reading option, `.venv/bin/python recipes/smollm2/export_stage.py
# sft1e` first) against the default a user gets now (grpo26b with its reading options, the exit
# probe and lookup decoding), niah_single_2 32K, one machine, the default first.
if [ "$CELLS" = cost26 ]; then  # not in CELLS=all: a rerun for seconds
  cell memagent adapter ruler_niah_single_2 32768 probe-on+grounded+lookup+again
  cell memagent sft1e ruler_niah_single_2 32768 again
fi
# Issue 28 (CELLS=vt): RULER's variable tracking, the other task that needs a reader to follow
# a chain, at 4K (its official templates, evaluation seed 0): the model as released under
# memagent first (the floor), then each memory agent with its shipped adapter, read as shipped.
if [ "$CELLS" = vt ]; then  # not in CELLS=all: the floor of a task no stage trained on
  vt_set
  cell memagent base ruler_vt 4096
  cell memreread adapter ruler_vt 4096
  cell rememr1 adapter ruler_vt 4096
  cell memagent adapter ruler_vt 4096 probe-on+grounded
fi
trap - EXIT
record_session

missing=0
for agent_model in memagent-adapter memagent-base rag-base full-base; do
  for set in "${SETS[@]}"; do
    for length in "${LENGTHS[@]}"; do
      complete "$RUNS/$agent_model-$set-$length" "$DATA/${set}_${length}.jsonl" ||
        missing=$((missing + 1))
    done
  done
done

# The speed option left on by default (the fast exact tokenizer, issue 11) must change no row:
# every sample of every set must read the same as with llama.cpp's own tokenizer.
same_chunks_rc=0
same_chunks=$(.venv/bin/python scripts/same_chunks.py "$DATA"/*.jsonl 2>/dev/null | tail -1) ||
  same_chunks_rc=$?
if [ "$same_chunks_rc" = 0 ]; then
  same_chunks_verdict="A run whose every chunk and count is the same is the same run: these rows are what the slower path gives."
else
  same_chunks_verdict="**Some samples differ** (rerun the script named for which): rows of those samples may differ from the slower path's."
fi

report=$(mktemp)
$LONGREAD eval report "$RUNS"/* --markdown "$report" --plot docs/results.png
total=$(.venv/bin/python -c 'import json,sys; print(round(sum(json.loads(l)["seconds"] for l in open(sys.argv[1]))))' "$ROOT/invocations.jsonl")
sessions=$(wc -l < "$ROOT/invocations.jsonl")
shipped_stage=$(.venv/bin/python -c 'from longread.llm.memory_adapter import memory_adapter_provenance as shipped
print(shipped()["stage"])')
# the agents that ship an adapter of their own, and its stage ("memreread: sft28z")
own_stages=$(.venv/bin/python -c 'from longread.llm.memory_adapter import shipped_provenances
print(", ".join(f"{r['"'"'agent'"'"']}: {r['"'"'stage'"'"']}" for r in shipped_provenances() if r.get("agent")) or "none")')
{
  echo "# Results on the embedded model"
  echo
  if [ "$missing" -gt 0 ]; then
    echo "> **Partial page:** $missing of the script's cells have not run yet (or not to the" \
      "end); the tables below hold the runs made so far, and cells still running may hold" \
      "fewer than N samples (the n column says). Rerun the script to go on."
    echo
  fi
  echo "Made by \`scripts/results_embedded.sh\` (N=$N samples per cell) with longread" \
    "$(.venv/bin/python -c 'import longread; print(longread.__version__)'), on $(nproc) CPU cores" \
    "($(lscpu | sed -n 's/^Model name: *//p')), no GPU. The script ran in $sessions session(s)" \
    "taking $total s of wall time in all (\`$ROOT/invocations.jsonl\`); rerunning it resumes" \
    "any unfinished cell and rewrites this page. The model is the embedded SmolLM2-135M-Instruct" \
    "(Q8_0 via llama-cpp-python, 8192-token window): \`+ memory adapter STAGE\` rows apply a" \
    "memory adapter longread shipped, named by the recipe stage that made it (the one shipped" \
    "now: $shipped_stage, run with \`--adapter memory\`; agents' own adapters: $own_stages), the others run the model as released" \
    "(\`--base-model\`). The first round of results is [results-v1.md](results-v1.md)."
  echo
  echo "The speed option on by default, fast exact tokenization (issue 11), against llama.cpp's" \
    "own tokenizer over every sample of these sets (token ids, memagent and rag chunks):" \
    "\`scripts/same_chunks.py\` found ${same_chunks:-nothing (it failed)}. $same_chunks_verdict"
  echo
  [ -f docs/results_notes.md ] && cat docs/results_notes.md && echo
  echo "![accuracy against context length](results.png)"
  echo
  sed '1{/^# Evaluation report$/d}' "$report"
} > docs/results.md
rm -f "$report"
echo "wrote docs/results.md and docs/results.png"
