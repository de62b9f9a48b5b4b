"""Empty-memory arrival states for GRPO (issue 26), cut from training documents with no model
call.

    .venv/bin/python recipes/smollm2/empty_arrivals.py DATA [DATA ...] --out OUT.jsonl
        [--chunk-tokens 1000] [--before 0.25] [--at-end 0] [--seed 0] [--section-first]
        [--only arrival|before|end] [--id-tag TAG]

With ``--focused-notes on`` the shipped adapter reaches every needle with empty notes: filler
it copied is cleared before the needle comes. Its misses at 16K and 32K are then all one kind
(``needle_states.py``): "empty notes: needle skipped", the update answers "No previous memory"
to the section that holds the needle. So the state to train from needs no reading pass to
find (as ``state_reset.py``'s do): it is "No previous memory" and the needle's section, cut
here from each training sample as the agent cuts it (its tokenizer, ``--chunk-tokens``).

- **arrival**: the needle's section alone (2 calls a rollout: the update, the answer);
- **before** (a ``--before`` share of the samples): the one or two sections before it too,
  also from empty notes, where filler gets written first (3-4 calls).

- **end** (an ``--at-end`` share): the needle's section as a RULER document ends when the
  needle sits at depth 100%: the essay cut to its word budget mid-sentence, then the needle's
  sentence, then nothing. The shipped adapter misses that needle in niah_single_2 sample 3 at
  2K, 16K and 32K (the 8K cut falls on a sentence end, and it is found there); training
  documents have it about once in 40 needles (depth 100%) and only when the cut falls
  mid-sentence.

``--section-first`` marks the states to be rolled out in that order (``meta["section_first"]``,
ids ending "-sf"): the shipped adapter read that way misses the same way, from empty notes.

Each row is a `longread train` sample whose ``meta["memory"]`` holds the notes to start from
(``train/rollouts.py``), as ``state_reset.py`` writes them. DATA are JSONL files or folders of
them (`longread data` output); use training seeds only, never an evaluation set's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
from pathlib import Path

from longread.agents.base import prepare_chunks
from longread.agents.memagent import NO_MEMORY
from longread.data.loaders import data_files, load_files
from longread.llm.factory import BackendSettings, make_backend, make_tokenizer
from longread.text.tokenizer import Tokenizer
from longread.train.rollouts import reset_state_record

# where a sentence ends: its punctuation and the space after it (or a line break)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")


def sections_of(text: str, tokenizer: Tokenizer, chunk_tokens: int) -> list[str]:
    """The document's sections, as memagent cuts it."""
    chunks = asyncio.run(prepare_chunks(text, tokenizer, chunk_tokens))
    return [chunk.text for chunk in chunks]


def states(
    sample,
    sections: list[str],
    rng: random.Random,
    before: float,
    section_first: bool = False,
    at_end: float = 0.0,
    tag: str = "",
) -> list[dict]:
    """The sample's arrival state, with probability ``before`` a state one or two sections
    earlier, and with probability ``at_end`` an "end" state (``ending_at_needle``); none when
    no section holds the gold answer whole. ``section_first``: the states are rolled out in
    that order (the section before the question in the update prompt). ``tag`` ends every
    id, so that files cut from the same documents with other seeds can train together."""
    gold = sample.answers[0]
    arrival = next((i for i, text in enumerate(sections) if gold in text), None)
    if arrival is None:
        return []
    rows = [_state(sample, "arrival", sections[arrival : arrival + 1], section_first, tag)]
    if arrival > 0 and rng.random() < before:
        start = max(0, arrival - rng.choice((1, 2)))
        rows.append(_state(sample, "before", sections[start : arrival + 1], section_first, tag))
    if at_end > 0 and rng.random() < at_end:
        ending = ending_at_needle(sections[arrival], gold, rng)
        if ending is not None:
            rows.append(_state(sample, "end", [ending], section_first, tag))
    return rows


def ending_at_needle(section: str, gold: str, rng: random.Random) -> str | None:
    """The section as a RULER document ends when its needle sits at depth 100%: the essay cut
    to a word budget, so its last sentence stops mid-way, then the needle's sentence, then
    nothing. None where the needle is a line of its own (noise haystacks end on whole lines) or
    has fewer than two words of sentence before it to cut."""
    at = section.index(gold)
    ends = [m.end() for m in SENTENCE_END.finditer(section, 0, at)]
    start = ends[-1] if ends else 0
    if start == 0 or section[start - 1] == "\n":
        return None
    after = SENTENCE_END.search(section, at + len(gold))
    needle = section[start : after.start() if after else len(section)].strip()
    kept = section[:start].rstrip()
    last = [m.end() for m in SENTENCE_END.finditer(kept)]
    words = kept[last[-1] if last else 0 :].split()
    if len(words) < 2:
        return None
    cut = len(words) - rng.randint(1, len(words) - 1)  # keep at least one word of it
    head = kept[: last[-1] if last else 0]
    return f"{head}{' '.join(words[:cut])} {needle}"


def _state(sample, kind: str, sections: list[str], section_first: bool, tag: str) -> dict:
    state_id = f"{sample.id}-empty-{kind}" + ("-sf" if section_first else "")
    state_id += f"-{tag}" if tag else ""
    return reset_state_record(sample, state_id, kind, NO_MEMORY, sections, section_first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", type=Path, help="JSONL files or folders of them")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--chunk-tokens", type=int, default=1000)
    parser.add_argument("--before", type=float, default=0.25, help="share with a before state")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--at-end", type=float, default=0.0, help="share with an end state (needle last)"
    )
    parser.add_argument(
        "--only", choices=("arrival", "before", "end"), help="write only the states of this kind"
    )
    parser.add_argument(
        "--section-first", action="store_true", help="states rolled out in the section-first order"
    )
    parser.add_argument(
        "--id-tag", default="", help="appended to every id (files cut from the same documents)"
    )
    args = parser.parse_args()
    for name in ("before", "at_end"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            sys.exit(f"empty_arrivals.py: --{name.replace('_', '-')} is a share, between 0 and 1")
    files = [f for path in args.data for f in (data_files(str(path)) if path.is_dir() else [path])]
    missing = [str(f) for f in files if not Path(f).is_file()]
    if missing:
        sys.exit(f"empty_arrivals.py: no such file: {missing[0]}")
    settings = BackendSettings(backend="llamacpp")
    tokenizer = asyncio.run(make_tokenizer(make_backend(settings), settings))
    rng = random.Random(args.seed)
    rows: list[dict] = []
    skipped = 0
    for sample in load_files(files):
        sections = sections_of(sample.context, tokenizer, args.chunk_tokens)
        found = states(
            sample, sections, rng, args.before, args.section_first, args.at_end, args.id_tag
        )
        skipped += not found
        rows += [r for r in found if args.only in (None, r["meta"]["state"])]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    kinds = [r["meta"]["state"] for r in rows]
    print(
        f"{args.out}: {kinds.count('arrival')} arrival, {kinds.count('before')} before and "
        f"{kinds.count('end')} end states; {skipped} samples with no section holding the gold "
        "whole"
    )


if __name__ == "__main__":
    main()
