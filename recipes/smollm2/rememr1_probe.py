"""What does an adapter write in ReMemR1's step, in the states an oracle reading leaves? (issue 28)

    .venv/bin/python recipes/smollm2/rememr1_probe.py DATA ADAPTER [ADAPTER ...] [--limit N]
        [--made-up]

sft28m learnt ReMemR1's tags but not their content: replies repeated made-up filler inside
`<update>` blocks to the cap (8 of 90 well formed; CAMPAIGN.md, stop 63). This asks each
ADAPTER (a GGUF, or `base` for the model as released) ReMemR1's own step prompts, greedy, at
the oracle's states (`train/oracle_rememr1.py` over each sample of DATA, with the agent's
chunking), and counts per state the replies that do what the oracle does:

- **nothing**: a section without evidence; the reply keeps the notes (the oracle's update
  body, as words) and adds no recall;
- **kept**: a section with evidence; the update holds every evidence sentence the oracle's does;
- **noted**: a reversed chain's code sentence not yet tied to the question; the update holds it;
- **lost**: the bridge, with the code lost; the reply recalls a query naming the place.

Every reply is also checked for ReMemR1's format (`parse_step_reply`: one closed `<update>`, at
most one `<recall>`). Each sample gives its evidence, noted and recall steps and its first two
steps without evidence, so a probe of 10 samples asks about 40 prompts.

``--made-up`` shows every step after the first its memory with a made-up note added (the
question's frame with no value, or a wrong value: ``run.false_claims``'s notes), the state
that sft28q's niah_single_2 16K misses were in (CAMPAIGN.md, stop 66); a reply is right only
if it drops the note (the oracle's reply to the clean memory).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
from collections import Counter
from pathlib import Path

from longread.agents.rememr1 import ReMemR1, ReMemR1Config, parse_step_reply
from longread.data.loaders import load_samples
from longread.llm.base import SamplingParams
from longread.llm.factory import BackendSettings, make_backend, make_tokenizer
from longread.train.oracle_rememr1 import KEPT, LOST, NOTHING, rememr1_episode

STATES = ("nothing", "kept", "noted", "lost")
_WORD = re.compile(r"\w+")
_BODY = re.compile(r"<update>(.*?)</update>", re.DOTALL)


def state_of(reply: str) -> str:
    """The oracle's state, from its reason sentence."""
    reason = reply.split("\n", 1)[0]
    if reason == NOTHING:
        return "nothing"
    if reason == KEPT:
        return "kept"
    if reason.startswith(LOST.split("{", 1)[0]):
        return "lost"
    return "noted"


def right(state: str, oracle: str, reply: str, place: str) -> bool:
    """Whether ``reply`` does what ``oracle`` does in ``state`` (module docstring)."""
    parsed = parse_step_reply(reply)
    if not parsed.well_formed or parsed.update is None:
        return False
    body = _BODY.search(oracle)
    wanted = body.group(1) if body else ""
    if state == "lost":
        return parsed.recall is not None and place.lower() in parsed.recall.lower()
    if state == "nothing":
        words = set(_WORD.findall(wanted.lower()))
        got = set(_WORD.findall(parsed.update.lower()))
        return parsed.recall is None and words <= got and len(got - words) <= 3
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", wanted) if s]
    return all(s in parsed.update for s in sentences)


async def probe(
    data: Path, adapter: str, limit: int, made_up: bool = False
) -> tuple[Counter[str], Counter[str], int]:
    """Ask ``adapter`` the probe's prompts (with ``made_up``, shown made-up notes: module
    docstring); print each reply; count right and asked per state, and the well-formed
    replies."""
    named = adapter not in ("base", "shared")
    settings = BackendSettings(adapter=adapter if named else None, base_model=adapter == "base")
    backend = make_backend(settings)
    config = ReMemR1Config(chunk_tokens=1000, memory_tokens=256, final_tokens=32)
    agent = ReMemR1(backend, await make_tokenizer(backend, settings), config)
    params = SamplingParams(temperature=0.0, max_tokens=config.memory_tokens)
    right_by, asked_by, formed = Counter[str](), Counter[str](), 0
    files = sorted(data.glob("*.jsonl")) if data.is_dir() else [data]
    for sample in [s for f in files for s in load_samples(f)][:limit]:
        slips = {"claim_rate": 1.0, "rng": random.Random(sample.id)} if made_up else {}
        turns = await rememr1_episode(agent, sample, **slips) or []
        nothing_seen = 0
        for index, turn in enumerate(turns):
            if turn.kind != "update":
                continue
            state = state_of(turn.reply)
            if state == "nothing":
                nothing_seen += 1
                if nothing_seen > 2:
                    continue
            reply = (await backend.chat(turn.messages, params)).text
            ok = right(state, turn.reply, reply, str(sample.meta.get("bridge_entity", "")))
            formed += parse_step_reply(reply).well_formed
            right_by[state] += ok
            asked_by[state] += 1
            shown = reply[:140].replace("\n", " | ")
            print(f"{sample.id} step {index:2} {state:7} {'ok' if ok else 'no'} {shown!r}")
    return right_by, asked_by, formed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="held-out samples (a JSONL file or folder)")
    parser.add_argument(
        "adapters",
        nargs="+",
        help="adapter GGUFs to ask; base (the model as released) or shared (grpo26b)",
    )
    parser.add_argument("--limit", type=int, default=10, help="samples to probe (default 10)")
    parser.add_argument(
        "--made-up", action="store_true", help="show each step after the first a made-up note"
    )
    args = parser.parse_args()
    table = [(a, asyncio.run(probe(args.data, a, args.limit, args.made_up))) for a in args.adapters]
    print(f"\n| adapter | well formed | {' | '.join(STATES)} |\n|---|---:|{'---:|' * len(STATES)}")
    for adapter, (right_by, asked_by, formed) in table:
        cells = " | ".join(f"{right_by[s]}/{asked_by[s]}" for s in STATES)
        print(f"| {adapter} | {formed}/{sum(asked_by.values())} | {cells} |")


if __name__ == "__main__":
    main()
