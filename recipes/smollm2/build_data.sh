#!/usr/bin/env bash
# Training data for the SmolLM2 memory adapter (issue 10), never overlapping an evaluation set.
#
# - RULER needles: evaluation sets use seed 0 (scripts/results_embedded.sh); training sets use
#   seeds from 1001, so no training document or needle is an evaluation one.
# - HotpotQA: the shared 100-question dev sample is split in two. The first 50 records
#   (hotpotqa_eval_ids.txt) are the evaluation pool: the results script takes the first N of
#   them, N <= 50. Training asks only the other 50 (--exclude); the evaluation questions'
#   paragraphs may still pad a training document as distractors, never as a question.
#
# Two generations of data live here: the first probe's (chunks of 500 tokens, probe-sft/) and
# the adapter's (chunks of 1000, the results script's memagent setting), more varied: two
# haystacks (RULER's essay and its noise), distractor needles (niah_multikey_1), multi-hop
# questions. niah_single_3 (uuid values) is never trained on: it is the unseen-task check.
#
#   HOTPOTQA=path/to/hotpotqa_dev_sample100.json recipes/smollm2/build_data.sh [grpo]
#
# With `grpo`, only what stage 2 reads (its training sets and heldout8k) is built.
set -euo pipefail
cd "$(dirname "$0")/../.."
LONGREAD=${LONGREAD:-.venv/bin/longread}
HOTPOTQA=${HOTPOTQA:-../shared/data/hotpotqa_dev_sample100.json}
OUT=${OUT:-recipes/smollm2/data}
build() { [ -d "$1" ] || "$LONGREAD" data "${@:2}" --out "$1"; }
ONLY=${1:-all}
case "$ONLY" in all | grpo) ;; *) echo "build_data.sh: unknown set group '$ONLY' (all, grpo)" >&2; exit 2 ;; esac

build "$OUT/heldout8k" ruler --task niah_single_2 --lengths 8192 --n 10 --seed 1003
# stage 2 (GRPO): longer documents than the warm start saw, where its notes can still go wrong
build "$OUT/grpo/niah_single_2" ruler --task niah_single_2 --lengths 5000 --n 60 --seed 1021
build "$OUT/grpo/niah_single_1" ruler --task niah_single_1 --lengths 4000 --n 30 --seed 1024 \
  --wording mixed --haystack noise-paragraphs
build "$OUT/grpo/niah_multikey_1" ruler --task niah_multikey_1 --lengths 4000 --n 40 --seed 1022
build "$OUT/grpo/hotpotqa" hotpotqa --input "$HOTPOTQA" --lengths 3000 --n 50 --seed 1023 \
  --exclude recipes/smollm2/hotpotqa_eval_ids.txt
[ "$ONLY" = grpo ] && exit 0

# probe-sft: 3 chunks of 500 tokens
build "$OUT/train/niah_single_2" ruler --task niah_single_2 --lengths 1300 --n 200 --seed 1001
build "$OUT/train/niah_single_1" ruler --task niah_single_1 --lengths 1300 --n 100 --seed 1002
build "$OUT/heldout" ruler --task niah_single_2 --lengths 2048 --n 10 --seed 1003

# the adapter: about 3 chunks of 1000 tokens
build "$OUT/train1k/niah_single_2" ruler --task niah_single_2 --lengths 3000 --n 150 --seed 1011
build "$OUT/train1k/niah_single_1" ruler --task niah_single_1 --lengths 2500 --n 50 --seed 1012
build "$OUT/train1k/niah_multikey_1" ruler --task niah_multikey_1 --lengths 3000 --n 50 --seed 1013
build "$OUT/train1k/hotpotqa" hotpotqa --input "$HOTPOTQA" --lengths 2500 --n 50 --seed 1014 \
  --exclude recipes/smollm2/hotpotqa_eval_ids.txt

# stage 1c: the same skill in other wordings (--wording mixed: RULER's sentence, make demo's
# key-less "The special magic number is N.", and a "secret ... of KEY" one), so the notes do not
# hinge on one sentence; HotpotQA's training questions again, with other distractors
build "$OUT/train1c/niah_single_1" ruler --task niah_single_1 --lengths 3000 --n 60 --seed 1031 \
  --wording mixed
build "$OUT/train1c/niah_single_2" ruler --task niah_single_2 --lengths 3000 --n 60 --seed 1032 \
  --wording mixed
build "$OUT/train1c/niah_multikey_1" ruler --task niah_multikey_1 --lengths 3000 --n 30 \
  --seed 1033 --wording mixed
build "$OUT/train1c/hotpotqa" hotpotqa --input "$HOTPOTQA" --lengths 3000 --n 50 --seed 1034 \
  --exclude recipes/smollm2/hotpotqa_eval_ids.txt
build "$OUT/heldout8k-plain" ruler --task niah_single_1 --lengths 8192 --n 5 --seed 1004 \
  --wording plain

# stage 1d: 1c's adapter copied `make demo`'s noise (paragraphs of four noise lines) into its
# notes, a layout no earlier stage saw: needles in that layout, and new essay documents
build "$OUT/train1d/niah_single_1" ruler --task niah_single_1 --lengths 3000 --n 40 --seed 1041 \
  --wording mixed --haystack noise-paragraphs
build "$OUT/train1d/niah_single_2" ruler --task niah_single_2 --lengths 3000 --n 30 --seed 1042 \
  --wording mixed
# (8000, not 8192: its ids must differ from heldout8k-plain's when a stage evaluates both)
build "$OUT/heldout8k-paragraphs" ruler --task niah_single_1 --lengths 8000 --n 5 --seed 1005 \
  --wording plain --haystack noise-paragraphs
# stage 1e: 1d's adapter still copied the paragraphs of noise (0% on heldout8k-paragraphs):
# more of that layout, over half of the stage's documents (2900 tokens: ids unlike train1d's)
build "$OUT/train1e/niah_single_1" ruler --task niah_single_1 --lengths 2900 --n 60 --seed 1051 \
  --wording mixed --haystack noise-paragraphs
# stage 1f: noisy notes (run.noisy_notes) on longer documents, so most updates come after
# filler could have been copied; heldout32k (not an evaluation set: seed 1006) chooses 1e or 1f
build "$OUT/train1f/niah_single_2" ruler --task niah_single_2 --lengths 6000 --n 40 --seed 1061
build "$OUT/train1f/niah_single_1" ruler --task niah_single_1 --lengths 6000 --n 20 --seed 1062 \
  --wording mixed --haystack noise-paragraphs
build "$OUT/train1f/niah_multikey_1" ruler --task niah_multikey_1 --lengths 5000 --n 20 \
  --seed 1063
build "$OUT/heldout32k" ruler --task niah_single_2 --lengths 32000 --n 10 --seed 1006
# ... and 10 more (issue 26: 2a against 2b at N=20; 32001 keeps the ids apart)
build "$OUT/heldout32k-b" ruler --task niah_single_2 --lengths 32001 --n 10 --seed 1015
# ... and 10 more 8K ones (the section-first check at N=20 with heldout8k)
build "$OUT/heldout8k-b" ruler --task niah_single_2 --lengths 8193 --n 10 --seed 1016


# Issue 26, stage 2a (sft2a.toml): every training wording ("varied": RULER's, the demo's and
# eight others, keyed and key-less; never the heldout-* ones), three generated haystacks and
# real prose (Wikipedia paragraphs of the HotpotQA training half, a shuffle per set; lengths
# differ by the shuffle so that sample ids stay unique), lengths
# up to 16K so that late memory states are shown (the stage keeps a quarter of the updates
# without evidence: run.update_share). UUID values stay out of training (niah_single_3 is the
# unseen-value check), as do the held-out haystack (recipes/smollm2/heldout/) and wordings.
build "$OUT/train2a/niah_single_2" ruler --task niah_single_2 --lengths 4000,8000,16000 --n 30 \
  --seed 2001 --wording varied
build "$OUT/train2a/niah_single_1" ruler --task niah_single_1 --lengths 3000,8000 --n 20 \
  --seed 2002 --wording varied --haystack noise-paragraphs
build "$OUT/train2a/niah_single_1-lines" ruler --task niah_single_1 --lengths 4000 --n 20 \
  --seed 2003 --wording varied
build "$OUT/train2a/niah_multikey_1" ruler --task niah_multikey_1 --lengths 6000 --n 30 \
  --seed 2004 --wording varied
for shuffle in 1 2 3 4; do
  wiki="$OUT/haystacks/wiki-$shuffle.txt"
  [ -f "$wiki" ] || .venv/bin/python recipes/smollm2/prose_haystacks.py wiki "$HOTPOTQA" \
    recipes/smollm2/hotpotqa_eval_ids.txt "$wiki" --seed "$shuffle"
  build "$OUT/train2a/wiki-$shuffle" ruler --task niah_single_2 \
    --lengths "$((3000 + shuffle)),$((8000 + shuffle))" --n 8 \
    --seed "$((2010 + shuffle))" --wording varied --haystack "$wiki"
done
# Stage 2c (sft2c.toml): a new wording per sample (--wording composed) and technical prose
# (the standard library's docstrings: the held-out text's genre, not its text), each prose
# file a fresh shuffle so that documents do not share their first sections. Sample ids are
# task-length-index, so every set here has lengths no set of the same stage list uses.
for shuffle in 1 2 3 4 5 6; do
  docs="$OUT/haystacks/docstrings-$shuffle.txt"
  [ -f "$docs" ] || .venv/bin/python recipes/smollm2/prose_haystacks.py docstrings "$docs" \
    --seed "$shuffle"
  build "$OUT/train2c/docstrings-$shuffle" ruler --task niah_single_2 \
    --lengths "$((3010 + shuffle)),$((8010 + shuffle))" --n 4 \
    --seed "$((2200 + shuffle))" --wording composed --haystack "$docs"
done
for shuffle in 5 6 7 8; do
  wiki="$OUT/haystacks/wiki-$shuffle.txt"
  [ -f "$wiki" ] || .venv/bin/python recipes/smollm2/prose_haystacks.py wiki "$HOTPOTQA" \
    recipes/smollm2/hotpotqa_eval_ids.txt "$wiki" --seed "$shuffle"
  build "$OUT/train2c/wiki-$shuffle" ruler --task niah_single_2 \
    --lengths "$((3020 + shuffle)),$((8020 + shuffle))" --n 4 \
    --seed "$((2200 + shuffle))" --wording composed --haystack "$wiki"
done
build "$OUT/train2c/niah_single_2" ruler --task niah_single_2 --lengths 4003,8003,16003 --n 8 \
  --seed 2211 --wording composed
build "$OUT/train2c/niah_single_1" ruler --task niah_single_1 --lengths 3003,8003 --n 6 \
  --seed 2212 --wording composed --haystack noise-paragraphs
build "$OUT/train2c/niah_multikey_1" ruler --task niah_multikey_1 --lengths 6003 --n 10 \
  --seed 2213 --wording composed
# Held-out checks of the stage (seeds 1007-1009: not evaluation seeds, not trained): unseen
# wordings in an unseen real-prose haystack, and long needles
build "$OUT/heldout8k-unseen" ruler --task niah_single_2 --lengths 8192 --n 10 --seed 1007 \
  --wording heldout-archive --haystack recipes/smollm2/heldout/pydoc-prose.txt
# (heldout-archive is the shape of the training wording "record"; the two below are not:
# heldout8k-ledger's lengths keep its ids apart from heldout8k's)
build "$OUT/heldout8k-ledger" ruler --task niah_single_2 --lengths 8191 --n 10 --seed 1009 \
  --wording heldout-ledger --haystack recipes/smollm2/heldout/pydoc-prose.txt
build "$OUT/heldout8k-unseen-keyless" ruler --task niah_single_1 --lengths 8100 --n 5 \
  --seed 1008 --wording heldout-harbour --haystack recipes/smollm2/heldout/pydoc-prose.txt
# Stage 2b (grpo2b.toml): long training documents the stage 2a adapter reads with `eval run`
# (recipes/smollm2/states.sh); the memory states its traces show become state-reset samples
build "$OUT/states2b/niah_single_2" ruler --task niah_single_2 --lengths 32000 --n 6 \
  --seed 2101 --wording varied
build "$OUT/states2b/niah_single_1" ruler --task niah_single_1 --lengths 16000 --n 6 \
  --seed 2102 --wording varied --haystack noise-paragraphs
build "$OUT/states2b/wiki" ruler --task niah_single_2 --lengths 16001 --n 6 --seed 2103 \
  --wording varied --haystack "$OUT/haystacks/wiki-1.txt"
# ... and 8K training documents it reads in the section-first order (STATES=states2c
# SECTION_FIRST=1 recipes/smollm2/states.sh), where stage 2a writes a made-up answer first
build "$OUT/states2c/niah_single_2" ruler --task niah_single_2 --lengths 8000 --n 10 --seed 2104
build "$OUT/states2c/varied" ruler --task niah_single_2 --lengths 8001 --n 8 --seed 2105 \
  --wording varied
build "$OUT/states2c/wiki" ruler --task niah_single_2 --lengths 8002 --n 6 --seed 2106 \
  --wording varied --haystack "$OUT/haystacks/wiki-2.txt"
# Issue 28: warm starts of MemReread's and ReMemR1's formats (sft28r.toml, sft28m.toml):
# (every chains set here has mixed distractor orders, the only kind before stop 61: a
# reversed sample's first code is its answer about half the time; see `data chains --help`)
MIXED=(--distractor-order mixed)
# two-hop chains, reversed (the hop must be asked or recalled) and forward (nothing to reread),
# in the generated essay and in Wikipedia prose; training templates only (--wording heldout is
# the unseen-wording check), seeds 2301 and up (evaluation sets use seed 0)
build "$OUT/train28/chains-reversed" chains "${MIXED[@]}" --order reversed \
  --lengths 3000,6000 --n 24 \
  --seed 2301
build "$OUT/train28/chains-forward" chains "${MIXED[@]}" --order forward \
  --lengths 3001,6001 --n 8 --seed 2302
build "$OUT/train28/chains-wiki" chains "${MIXED[@]}" --order reversed \
  --lengths 4000 --n 12 --seed 2303 \
  --haystack "$OUT/haystacks/wiki-5.txt"
build "$OUT/train28/niah_single_2" ruler --task niah_single_2 --lengths 4004 --n 12 \
  --seed 2304 --wording varied
# ... and stage sft28s (sft28s.toml): more reversed chains, up to the evaluation's 8K, where
# the root pass must keep the bridge through more filler (new seeds, training templates)
build "$OUT/train28s/chains-reversed" chains "${MIXED[@]}" --order reversed \
  --lengths 4002,8002 --n 20 \
  --seed 2311
build "$OUT/train28s/chains-wiki" chains "${MIXED[@]}" --order reversed \
  --lengths 8004 --n 10 --seed 2312 \
  --haystack "$OUT/haystacks/wiki-5.txt"
build "$OUT/train28s/chains-forward" chains "${MIXED[@]}" --order forward \
  --lengths 4001,8001 --n 6 --seed 2313
build "$OUT/heldout28/chains-reversed" chains "${MIXED[@]}" --order reversed \
  --lengths 8192 --n 10 --seed 1010
build "$OUT/heldout28/chains-heldout" chains "${MIXED[@]}" --order reversed \
  --lengths 8190 --n 10 --seed 1011 \
  --wording heldout
# Issue 26, stage grpo26a (grpo26a.toml): the shipped adapter's only miss with focused notes,
# empty notes at the needle's section, as GRPO states cut from stage 2a's and 2c's training
# documents (recipes/smollm2/empty_arrivals.py: the model's tokenizer, no model call)
[ -f "$OUT/states-empty26.jsonl" ] || .venv/bin/python recipes/smollm2/empty_arrivals.py \
  "$OUT/train2a/niah_single_2" "$OUT/train2c" --out "$OUT/states-empty26.jsonl" --seed 26
# ... and the same states marked to be rolled out section-first (stage grpo26b, grpo26b.toml)
[ -f "$OUT/states-empty26-sf.jsonl" ] || .venv/bin/python recipes/smollm2/empty_arrivals.py \
  "$OUT/train2a/niah_single_2" "$OUT/train2c" --out "$OUT/states-empty26-sf.jsonl" --seed 26 \
  --section-first
# ... and "end" states (empty_arrivals.py --at-end): the needle's section cut as RULER documents
# end when the needle sits at depth 100%, the essay's last sentence cut mid-way (grpo26b); the
# same cut from the held-out checks is the check
[ -f "$OUT/states-empty26-end.jsonl" ] || .venv/bin/python recipes/smollm2/empty_arrivals.py \
  "$OUT/train2a/niah_single_2" "$OUT/train2c" --out "$OUT/states-empty26-end.jsonl" --seed 27 \
  --before 0 --at-end 1 --only end
[ -f "$OUT/heldout-arrivals-end.jsonl" ] || .venv/bin/python recipes/smollm2/empty_arrivals.py \
  "$OUT/heldout8k" "$OUT/heldout8k-b" "$OUT/heldout32k" "$OUT/heldout32k-b" \
  --out "$OUT/heldout-arrivals-end.jsonl" --before 0 --at-end 1 --only end
# Stage grpo26c (grpo26c.toml): "before" states in both orders, one or two filler sections
# from empty notes and then the needle's, where grpo26b learnt to write a made-up "... is 11."
# and keep it; the same cut from the held-out checks is their check. The ids end "-s28":
# states-empty26*.jsonl hold before states of some of the same documents under the plain ids
for order in paper sf; do
  flag=(); [ $order = sf ] && flag=(--section-first)
  [ -f "$OUT/states-before26-$order.jsonl" ] || .venv/bin/python recipes/smollm2/empty_arrivals.py \
    "$OUT/train2a/niah_single_2" "$OUT/train2c" --out "$OUT/states-before26-$order.jsonl" \
    --seed 28 --before 1 --only before --id-tag s28 "${flag[@]}"
done
[ -f "$OUT/heldout-arrivals-before.jsonl" ] || .venv/bin/python recipes/smollm2/empty_arrivals.py \
  "$OUT/heldout8k" "$OUT/heldout8k-b" "$OUT/heldout32k" "$OUT/heldout32k-b" \
  --out "$OUT/heldout-arrivals-before.jsonl" --before 1 --only before
# ... and the same state cut from held-out checks (seeds 1003, 1006, 1015, 1016: never trained,
# not evaluation seeds): `eval run` on this file reads each needle's section from empty notes,
# 2 calls a sample, a few minutes an adapter
[ -f "$OUT/heldout-arrivals.jsonl" ] || .venv/bin/python recipes/smollm2/empty_arrivals.py \
  "$OUT/heldout8k" "$OUT/heldout8k-b" "$OUT/heldout32k" "$OUT/heldout32k-b" \
  --out "$OUT/heldout-arrivals.jsonl" --before 0
