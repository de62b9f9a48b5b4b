"""The exit probe on two-hop questions (issue 29): does it say "no" while a hop is missing?

    .venv/bin/python bench/exit_probe_hops.py --adapter recipes/smollm2/runs/sft29s/adapter.gguf
        [--per-wording 10] [--hotpotqa ../shared/data/hotpotqa_dev_sample100.json]
        [--questions 50] [--seed 0] [--out FILE.jsonl]

No document is read: each case is one probe call (memagent's ``memagent_exit_probe`` prompt,
greedy, the adapter's prompt set) on notes made of the question's own evidence sentences, so
every note is true and traced (``--grounded-exit`` honours every "yes" here: only the probe
can tell a first hop from a whole answer, the failure of stage sft29r on HotpotQA 16K).

- **Two-hop chains** (``longread data chains``; the training templates and the held-out ones,
  which no stage trains on):
  - ``fact``: the code of a place, without the bridge to the question's item: no;
  - ``bridge``: the item was sent to the place, without its code: no;
  - ``other fact + bridge``: a distractor place's code and the bridge: no;
  - ``both``: the fact and the bridge: yes.
- **HotpotQA** (the evaluation half of the dev sample, ``recipes/smollm2/hotpotqa_eval_ids.txt``:
  questions no stage trained on):
  - ``first paragraph``: the supporting sentences of one gold paragraph: no;
  - ``both paragraphs``: every supporting sentence: yes.

These are the oracle's answers (``train/oracle.py``: "yes" once the notes hold every evidence
sentence). A wrong "yes" stops reading before the second hop; a missing "yes" only costs time.
Seconds: one to two per probe on the embedded model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from pathlib import Path
from typing import Any

from longread.agents.memagent import MemAgentConfig, probe_answer, probe_messages
from longread.data.chains import (
    ATTRIBUTES,
    BRIDGES,
    COLOURS,
    FACTS,
    OBJECTS,
    PLACE_KINDS,
    PLACE_NAMES,
    QUESTIONS,
)
from longread.data.hotpotqa import load_hotpotqa, parse_hotpot_records, supporting_sentences
from longread.llm.factory import BackendSettings, make_backend
from longread.llm.trained_settings import read_trained_settings

ROOT = Path(__file__).resolve().parent.parent
EVAL_IDS = ROOT / "recipes/smollm2/hotpotqa_eval_ids.txt"
EXPECTED_YES = {
    "fact": False,
    "bridge": False,
    "other fact + bridge": False,
    "both": True,
    "first paragraph": False,
    "both paragraphs": True,
}


def chain_cases(wording: str, rng: random.Random) -> tuple[str, dict[str, str]]:
    """One chain question and the notes of each chain case, in the training data's words."""
    attribute = rng.choice(ATTRIBUTES)
    item = f"{rng.choice(COLOURS)} {rng.choice(OBJECTS)}"
    place, other = rng.sample([f"{k} {n}" for k in PLACE_KINDS for n in PLACE_NAMES], 2)
    value, other_value = (str(rng.randrange(1_000_000, 10_000_000)) for _ in range(2))
    fact = rng.choice(FACTS[wording]).format(attribute=attribute, place=place, value=value)
    decoy = rng.choice(FACTS[wording]).format(attribute=attribute, place=other, value=other_value)
    bridge = rng.choice(BRIDGES[wording]).format(item=item, place=place)
    question = rng.choice(QUESTIONS[wording]).format(attribute=attribute, item=item)
    notes = {
        "fact": fact,
        "bridge": bridge,
        "other fact + bridge": f"{decoy} {bridge}",
        "both": f"{fact} {bridge}",
    }
    return question, notes


def hotpotqa_cases(path: str, limit: int) -> list[tuple[str, str, dict[str, str]]]:
    """(id, question, notes per case) for the evaluation half's questions whose supporting
    sentences span two paragraphs."""
    wanted = EVAL_IDS.read_text(encoding="utf-8").split()[:limit]
    records = {str(r.get("_id", r.get("id"))): r for r in load_hotpotqa(path)}
    out = []
    for question in parse_hotpot_records([records[i] for i in wanted if i in records]):
        facts = question.meta["supporting_facts"]
        record = records[question.id]
        titles = list(dict.fromkeys(str(f[0]) for f in facts))
        first = supporting_sentences(record["context"], [f for f in facts if f[0] == titles[0]])
        every = question.meta["evidence"]
        if len(titles) < 2 or not first or len(first) == len(every):
            continue
        notes = {"first paragraph": " ".join(first), "both paragraphs": " ".join(every)}
        out.append((question.id, question.question, notes))
    return out


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    backend = make_backend(BackendSettings(adapter=args.adapter, base_model=args.adapter is None))
    trained = read_trained_settings(args.adapter) if args.adapter not in (None, "memory") else None
    config = MemAgentConfig(exit_probe=True, prompt_set=trained.prompt_set if trained else "paper")
    rng = random.Random(args.seed)
    cases: list[tuple[str, str, str, dict[str, str]]] = []
    for wording in ("train", "heldout"):
        for number in range(args.per_wording):
            question, notes = chain_cases(wording, rng)
            cases.append((f"chains {wording}", str(number), question, notes))
    if args.hotpotqa:
        cases += [
            ("hotpotqa", i, q, n) for i, q, n in hotpotqa_cases(args.hotpotqa, args.questions)
        ]
    rows = []
    try:
        for source, index, question, notes in cases:
            for case, text in notes.items():
                messages = probe_messages(question, text, config.prompts)
                reply = (await backend.chat(messages, config.params(config.probe_tokens))).text
                rows.append({"source": source, "index": index, "case": case,
                             "question": question, "notes": text, "reply": reply,
                             "yes": probe_answer(reply)})  # fmt: skip
    finally:
        await backend.aclose()
    return rows


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Per source and case: how many probes said yes, against what the oracle says."""
    lines = ["| source | case | oracle | yes | malformed |", "|---|---|---|---:|---:|"]
    for source in dict.fromkeys(r["source"] for r in rows):
        for case in dict.fromkeys(r["case"] for r in rows if r["source"] == source):
            of = [r for r in rows if r["source"] == source and r["case"] == case]
            said = sum(r["yes"] is True for r in of)
            malformed = sum(r["yes"] is None for r in of)
            oracle = "yes" if EXPECTED_YES[case] else "no"
            lines.append(f"| {source} | {case} | {oracle} | {said}/{len(of)} | {malformed} |")
    right = sum(r["yes"] is EXPECTED_YES[r["case"]] for r in rows)
    early = sum(r["yes"] is True and not EXPECTED_YES[r["case"]] for r in rows)
    missing = sum(not EXPECTED_YES[r["case"]] for r in rows)
    lines += ["", f"{right} of {len(rows)} probes answered as the oracle would; "
              f"{early} of {missing} said yes with a hop missing (an early stop)."]  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default="memory", help="a LoRA .gguf, memory (the shipped "
                        "one) or none (the model as released)")  # fmt: skip
    parser.add_argument("--per-wording", type=int, default=10, help="chain questions per wording")
    parser.add_argument("--hotpotqa", default="../shared/data/hotpotqa_dev_sample100.json",
                        help="the HotpotQA dev sample, official JSON ('': none)")  # fmt: skip
    parser.add_argument("--questions", type=int, default=50, help="of its evaluation half")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="every probe's notes and reply, as JSON lines")
    args = parser.parse_args()
    if args.adapter == "none":
        args.adapter = None
    rows = asyncio.run(bench(args))
    print("\n".join(summary(rows)))
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
