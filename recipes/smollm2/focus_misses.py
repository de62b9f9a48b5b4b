"""Shown only the needle section's sentences about the question, does the adapter copy the needle?

For each missed sample of a run folder, the update prompt of its trace at the section holding
the gold answer is sent again (greedy, the shipped memory adapter) with the section cut to its
sentences sharing question terms: ``--pick best`` the ones sharing the most (what
``--focused-reread`` shows), ``--pick any`` every one sharing a term; ``--neighbours N`` adds N
sentences either side. Prints, per miss, whether the reply holds the gold answer (stop 53:
best 12 of 17, any 11, best with 1 / 3 neighbours 12 / 4, on grpo26b's held-out ledger misses).

    .venv/bin/python recipes/smollm2/focus_misses.py \\
      results/v2/runs/memagent-grpo26b-run-step6-unseen-ledger-8192-notes+focused \\
      results/v2/data/unseen-ledger_8192.jsonl [--pick best] [--neighbours 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sqlite3
from pathlib import Path

from longread.agents.memagent import MemAgentConfig, update_messages
from longread.citations.align import words
from longread.citations.evidence import question_terms
from longread.llm.factory import BackendSettings, make_backend

SPLIT = re.compile(r"(?<=[.!?])\s+")


def focus(section: str, question: str, pick: str, neighbours: int) -> list[str]:
    """The sentences of ``section`` shown, as ``--pick`` and ``--neighbours`` say."""
    terms = question_terms(question)
    scored = [len(terms & words(s)) for s in SPLIT.split(section)]
    sentences = SPLIT.split(section)
    top = max(scored, default=0)
    chosen = [i for i, n in enumerate(scored) if n > 0 and (pick == "any" or n == top)]
    keep = {j for i in chosen for j in range(i - neighbours, i + neighbours + 1)}
    return [sentences[j] for j in sorted(keep) if 0 <= j < len(sentences)]


async def main(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    data = {row["id"]: row for row in rows}
    db = sqlite3.connect(f"file:{args.run / 'results.sqlite'}?mode=ro", uri=True)
    backend = make_backend(BackendSettings(adapter="memory"))
    config = MemAgentConfig(memory_tokens=256)
    found = misses = 0
    try:
        for sample, score, trace in db.execute("select sample_id, score, trace from results"):
            if json.loads(score).get("sub_em", 0) >= 1:
                continue
            gold, question = data[sample]["answers"][0], data[sample]["question"]
            for step in json.loads((args.run / trace).read_text())["steps"]:
                prompt = step["messages"][-1]["content"] if step["kind"] == "update" else ""
                section = prompt.split("Section:\n", 1)[-1].rsplit("\n\nUpdate the memory", 1)[0]
                if gold not in section:
                    continue
                memory = prompt.split("Memory:\n", 1)[1].split("\n\nSection:", 1)[0]
                shown = " ".join(focus(section, question, args.pick, args.neighbours))
                messages = update_messages(question, memory, shown, config.prompts, config)
                reply = (await backend.chat(messages, config.params(256))).text
                misses += 1
                found += gold in reply
                verdict = "took the needle" if gold in reply else "missed"
                print(f"{sample}: {verdict}: {reply[:100]!r}")
                break
    finally:
        await backend.aclose()
    print(f"{found} of {misses} misses took the needle")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("--pick", choices=["best", "any"], default="best")
    parser.add_argument("--neighbours", type=int, default=0)
    asyncio.run(main(parser.parse_args()))
