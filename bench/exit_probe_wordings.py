"""The exit probe by needle wording (issue 29): does it say "yes" to notes that hold the
needle, and "no" to notes that do not, for every wording, trained or held out?

    .venv/bin/python bench/exit_probe_wordings.py --adapter recipes/smollm2/runs/sft29q/adapter.gguf
        [--per-wording 3] [--seed 0] [--out FILE.jsonl]
    .venv/bin/python bench/exit_probe_wordings.py --rescore FILE.jsonl

No document is read: each case is one probe call (memagent's ``memagent_exit_probe`` prompt,
the problem and the notes, greedy, the adapter's prompt set) on notes written by hand, the
shapes the oracle trains and the policy writes:

- ``needle``: the notes are the needle sentence (what the oracle's notes hold once the needle is
  read): the probe should say yes;
- ``needle + filler``: a filler sentence, then the needle (notes that copied some noise too):
  yes;
- ``made-up``: the oracle's false claim (``train.oracle.false_claim``: the question's words with
  a wrong value, as a model writes before the evidence): no;
- ``filler``: a sentence of noise only: no.

Per wording (the ten training wordings and the held-out ones, which no stage trains on) it
prints the share of "yes" in each case, so a probe that stops only on the wordings it was shown
(stage sft29q on ``make demo``'s key-less wording, bench/exit_gate.py) shows where. A wrong
"yes" on made-up notes is the costly error (reading stops before the evidence); a missing "yes"
on the needle only costs time. Seconds: a few per wording on the embedded model.

Each row also says whether ``--grounded-exit`` would honour its "yes" (``grounded``): the notes
traced (``citations/grounding.py``) to a section that holds the needle between two fillers, as
a document would. ``--rescore FILE`` prints the tables of an earlier ``--out`` file with that
column recomputed, without the model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from pathlib import Path
from typing import Any

from longread.agents.memagent import NO_MEMORY, MemAgentConfig, probe_answer, probe_messages
from longread.citations import Provenance
from longread.citations.grounding import exit_grounded
from longread.data._niah import HELDOUT_WORDINGS, WORDINGS, Wording
from longread.llm.factory import BackendSettings, make_backend
from longread.llm.trained_settings import read_trained_settings
from longread.text.chunking import Chunk
from longread.train.oracle import false_claim

# Keys in RULER's adjective-noun shape; filler in RULER's noise and in its essay's register.
KEYS = ("amber-lantern", "quiet-meadow", "brisk-falcon", "hollow-pine", "silver-dune")
FILLERS = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.",
    "Most startups fail because they make something nobody wants, not because of competitors.",
)
CASES = ("needle", "needle + filler", "made-up", "filler")
EXPECTED_YES = {"needle": True, "needle + filler": True, "made-up": False, "filler": False}


def notes_for(case: str, needle: str, question: str, value: str, rng: random.Random) -> str:
    """The notes of one case (see the module's docstring)."""
    filler = rng.choice(FILLERS)
    if case == "needle":
        return needle
    if case == "needle + filler":
        return f"{filler} {needle}"
    if case == "made-up":
        return false_claim(question, [value], rng)
    return filler


def needle_and_question(wording: Wording, key: str, value: str) -> tuple[str, str]:
    """One needle sentence and its question, numbers as the values (RULER's niah_single_2)."""
    needle = wording.needle.format(noun="number", nouns="numbers", key=key, value=value)
    return needle, wording.question.format(noun="number", key=key)


def grounded(question: str, notes: str, needle: str) -> bool:
    """Whether the grounded exit would honour a "yes" to ``notes``, read from a section that
    holds ``needle`` between the two fillers."""
    section = f"{FILLERS[0]} {needle} {FILLERS[1]}"
    provenance = Provenance()
    provenance.on_update(NO_MEMORY, notes, Chunk(0, section, 0))
    return exit_grounded(notes, question, provenance)


async def probe(backend: Any, config: MemAgentConfig, question: str, notes: str) -> str:
    completion = await backend.chat(
        probe_messages(question, notes, config.prompts), config.params(config.probe_tokens)
    )
    return completion.text


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    backend = make_backend(BackendSettings(adapter=args.adapter, base_model=args.adapter is None))
    trained = read_trained_settings(args.adapter) if args.adapter not in (None, "memory") else None
    config = MemAgentConfig(exit_probe=True, prompt_set=trained.prompt_set if trained else "paper")
    rng = random.Random(args.seed)
    wordings = [(n, w, False) for n, w in WORDINGS.items()]
    wordings += [(n, w, True) for n, w in HELDOUT_WORDINGS.items()]
    rows = []
    try:
        for name, wording, held_out in wordings:
            for index in range(args.per_wording):
                value = str(rng.randrange(1_000_000, 10_000_000))
                needle, question = needle_and_question(wording, rng.choice(KEYS), value)
                for case in CASES:
                    notes = notes_for(case, needle, question, value, rng)
                    reply = await probe(backend, config, question, notes)
                    row = {
                        "wording": name, "held_out": held_out, "keyed": wording.keyed,
                        "index": index, "case": case, "question": question, "notes": notes,
                        "reply": reply, "yes": probe_answer(reply), "needle": needle,
                        "grounded": grounded(question, notes, needle),
                    }  # fmt: skip
                    rows.append(row)
    finally:
        await backend.aclose()
    return rows


def yes_share(rows: list[dict[str, Any]]) -> str:
    """How many said yes, as "2/3"; a reply neither yes nor no is not a yes (the agent
    reads on)."""
    return f"{sum(r['yes'] is True for r in rows)}/{len(rows)}" if rows else "-"


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """The table: per wording, how many probes said yes in each case (ideal: all, all, none,
    none), and how many replies were neither yes nor no."""
    header = " | ".join(f"yes: {case}" for case in CASES)
    lines = [
        f"| wording | trained | keyed | {header} | malformed |",
        "|---|---|---|" + "---:|" * (len(CASES) + 1),
    ]
    for name in dict.fromkeys(r["wording"] for r in rows):
        of = [r for r in rows if r["wording"] == name]
        cells = [yes_share([r for r in of if r["case"] == case]) for case in CASES]
        malformed = sum(r["yes"] is None for r in of)
        trained = "held out" if of[0]["held_out"] else "yes"
        keyed = "yes" if of[0]["keyed"] else "no"
        lines.append(f"| {name} | {trained} | {keyed} | " + " | ".join(cells) + f" | {malformed} |")
    right = sum(r["yes"] is EXPECTED_YES[r["case"]] for r in rows)
    lines.append("")
    lines.append(f"{right} of {len(rows)} probes answered as the oracle would.")
    return [*lines, "", *grounded_summary(rows)]


def grounded_summary(rows: list[dict[str, Any]]) -> list[str]:
    """Per case: how many probes said yes, and how many of those exits ``--grounded-exit``
    would honour (ideal: every needle yes, no made-up or filler one)."""
    lines = ["| case | yes | exits honoured with --grounded-exit |", "|---|---:|---:|"]
    for case in CASES:
        said = [r for r in rows if r["case"] == case and r["yes"] is True]
        total = sum(r["case"] == case for r in rows)
        honoured = sum(r["grounded"] for r in said)
        lines.append(f"| {case} | {len(said)}/{total} | {honoured}/{total} |")
    return lines


def rescored(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` of an earlier run with ``grounded`` recomputed; rows from before the bench
    kept the needle take it from their ``needle`` case's notes."""
    needles = {(r["wording"], r["index"]): r["notes"] for r in rows if r["case"] == "needle"}
    for r in rows:
        r["needle"] = r.get("needle") or needles[r["wording"], r["index"]]
        r["grounded"] = grounded(r["question"], r["notes"], r["needle"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default="memory", help="a LoRA .gguf, memory (the shipped "
                        "one) or none (the model as released)")  # fmt: skip
    parser.add_argument("--per-wording", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="every probe's notes and reply, as JSON lines")
    parser.add_argument("--rescore", type=Path, help="an earlier --out file: its tables, no model")
    args = parser.parse_args()
    if args.adapter == "none":
        args.adapter = None
    if args.rescore:
        lines = args.rescore.read_text(encoding="utf-8").splitlines()
        rows = rescored([json.loads(line) for line in lines if line.strip()])
    else:
        rows = asyncio.run(bench(args))
    print("\n".join(summary(rows)))
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
