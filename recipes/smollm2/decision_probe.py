"""What does an adapter's MemReread decision ask, in the states a reversed chain leaves? (issue 28)

    .venv/bin/python recipes/smollm2/decision_probe.py DATA ADAPTER [ADAPTER ...]

The warm starts up to sft28t learnt the decision's format but copied the root notes (or the
question) into `<subquestion>`, so a reread had nothing to look for (CAMPAIGN.md, stops 61-62).
For each reversed chain of DATA (held-out chains: `data/heldout28/chains-reversed`), this asks
each ADAPTER (a GGUF) MemReread's own decide prompt, greedy, in five states, and counts the
replies that do what the oracle does:

- **bridge**: the notes hold the bridge ("The olive satchel ended up at Warehouse Oscar."):
  ask the place's code (the reply names the place and "code");
- **code**: the notes hold another place's code sentence, no bridge: ask the first hop (the
  reply names the item, not "code");
- **empty**: "No previous memory": ask the first hop;
- **answered**: the notes hold the bridge and the fact: `<stop/>`;
- **second**: after a first-hop round (its question and the place in the history), notes of
  another code and the bridge: ask the place's code.

No document is read: the states are written from each sample's evidence and text, so the
decision is measured apart from the passes that lead to it.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections import Counter
from pathlib import Path

from longread.agents.memagent import NO_MEMORY
from longread.agents.memreread import decide_messages, parse_decision
from longread.data.evidence import evidence_sentences, split_sentences
from longread.data.loaders import load_samples
from longread.data.records import Sample
from longread.llm.base import SamplingParams
from longread.llm.factory import BackendSettings, make_backend
from longread.train.oracle_reread import FIRST_HOP_QUESTIONS

STATES = ("bridge", "code", "empty", "answered", "second")
_CODE = re.compile(r"\b\d{7}\b")


def states(sample: Sample) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Each state's notes and history for ``sample`` (a reversed chain)."""
    fact, bridge = evidence_sentences(sample)[:2]
    place, item = sample.meta["bridge_entity"], sample.meta["item"]
    others = [
        s for s in split_sentences(sample.context) if _CODE.search(s) and sample.answers[0] not in s
    ]
    other = others[0] if others else NO_MEMORY
    return {
        "bridge": (bridge, []),
        "code": (other, []),
        "empty": (NO_MEMORY, []),
        "answered": (f"{bridge} {fact}", []),
        "second": (f"{other} {bridge}", [(FIRST_HOP_QUESTIONS[0].format(item=item), place)]),
    }


def right(state: str, sample: Sample, reply: str) -> bool:
    """Whether ``reply`` does what the oracle does in ``state`` (module docstring)."""
    decision = parse_decision(reply, [])
    if state == "answered":
        return decision.sub_question is None and not decision.flags
    asked = (decision.sub_question or "").lower()
    if not asked or decision.flags:
        return False
    if state in ("bridge", "second"):
        return sample.meta["bridge_entity"].lower() in asked and "code" in asked
    return sample.meta["item"].lower() in asked and "code" not in asked


async def probe(samples: list[Sample], adapter: str) -> Counter[str]:
    """Ask ``adapter`` every state of every sample; print the replies, count the right ones."""
    backend = make_backend(BackendSettings(adapter=adapter))
    params = SamplingParams(temperature=0.0, max_tokens=64)
    counts: Counter[str] = Counter()
    for sample in samples:
        for state, (notes, history) in states(sample).items():
            messages = decide_messages(sample.question, notes, history, None)
            reply = (await backend.chat(messages, params)).text
            ok = right(state, sample, reply)
            counts[state] += ok
            print(f"{sample.id} {state:8} {'ok ' if ok else 'no '} {reply[:100]!r}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="reversed chains (a `longread data chains` file)")
    parser.add_argument("adapters", nargs="+", help="adapter GGUFs to ask")
    args = parser.parse_args()
    samples = [s for s in load_samples(args.data) if s.meta.get("order") == "reversed"]
    table = [(a, asyncio.run(probe(samples, a))) for a in args.adapters]
    print(f"\n| adapter | {' | '.join(STATES)} |\n|---|{'---:|' * len(STATES)}")
    for adapter, counts in table:
        cells = " | ".join(f"{counts[s]}/{len(samples)}" for s in STATES)
        print(f"| {adapter} | {cells} |")


if __name__ == "__main__":
    main()
