"""Does an adapter take a chain's bridge in when its notes are empty? (issue 28)

    .venv/bin/python recipes/smollm2/bridge_from_empty.py DATA RUN ADAPTER

The warm starts of stop 61 (sft28s, sft28t) never kept a reversed chain's bridge ("The olive
satchel ended up at Warehouse Oscar.") in their root notes: at the bridge's section the notes
already held filler or another place's code, and the update copied them. The oracle episodes
they trained on show that section with empty notes (a reversed chain's root pass keeps nothing
before the bridge). This asks ADAPTER the root-pass update at the bridge's section of each
traced sample of RUN (an `eval run` folder over DATA, its `--data` file) once more, greedy,
with the notes replaced by the empty memory, and prints the reply and whether it holds the
bridge (most of its words, as `evidence_taken.py` counts): whether the adapter learnt the
oracle's row and fails only from the state its own notes put it in, or did not learn it.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path

from evidence_taken import holds_evidence  # this folder's

from longread.agents.memagent import NO_MEMORY
from longread.data.evidence import evidence_sentences
from longread.data.loaders import load_samples
from longread.llm.base import SamplingParams
from longread.llm.factory import BackendSettings, make_backend
from longread.trace import Run

# The paper prompt's notes: between "Memory:" and "Section:" (agents/prompts.py).
NOTES = re.compile(r"(Memory:\n)(.*?)(\n\nSection:)", re.S)


async def ask_from_empty(data: Path, run_dir: Path, adapter: str) -> tuple[int, int]:
    """Print each bridge-section reply from empty notes; return (asked, held the bridge)."""
    # a chain's evidence is its fact, then its bridge; other samples have no bridge to ask
    evidence = {s.id: evidence_sentences(s) for s in load_samples(data)}
    bridges = {sample_id: e[1] for sample_id, e in evidence.items() if len(e) > 1}
    backend = make_backend(BackendSettings(adapter=adapter))
    asked = held = 0
    for trace in sorted((run_dir / "traces").glob("*.json")):
        run = Run.load(trace)
        bridge = bridges.get(run.sample_id or "")
        root = [s for s in run.steps if s.kind == "update" and s.reread is None]
        step = next((s for s in root if bridge and bridge in s.messages[-1]["content"]), None)
        if step is None:
            continue
        prompt = step.messages[-1]["content"]
        empty = NOTES.sub(lambda m: f"{m[1]}{NO_MEMORY}{m[3]}", prompt, count=1)
        messages = [*step.messages[:-1], {"role": "user", "content": empty}]
        reply = await backend.chat(messages, SamplingParams(temperature=0.0, max_tokens=256))
        took = holds_evidence(reply.text, [bridge])
        asked += 1
        held += took
        print(f"{run.sample_id}: {'bridge' if took else 'no bridge'}: {reply.text[:120]!r}")
    return asked, held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="the run's --data file")
    parser.add_argument("run", type=Path, help="an eval run folder (memreread or memagent)")
    parser.add_argument("adapter", help="the adapter GGUF to ask")
    args = parser.parse_args()
    asked, held = asyncio.run(ask_from_empty(args.data, args.run, args.adapter))
    print(f"from empty notes, the bridge's section: {held} of {asked} replies hold the bridge")


if __name__ == "__main__":
    main()
