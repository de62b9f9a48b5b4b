"""Every agent on the same needle documents at several lengths, on the embedded model.

    .venv/bin/python bench/agents_table.py [--lengths 2000,4000,12000] [--docs 5]
        [--chunk-tokens 1000] [--memory-tokens 256] [--prompt-set paper|notes]
        [--base-model] [--adapter FILE] [--decision-adapter FILE]
        [--out bench/results/agents_table.jsonl]

One JSON line per (agent, length, document) is appended to --out as soon as it finishes, so an
interrupted run resumes where it stopped. The table (accuracy, mean calls, prompt tokens and
seconds per document) is printed from everything in --out. SmolLM2-135M keeps a needle only with
a small memory cap, so memory agents run with --memory-tokens (default 256) and 1,000-token
chunks; full and rag use their defaults. The embedded model runs with its shipped memory adapter
(the default; an agent's own where it ships one, as memreread does since stop 64) unless
--base-model, or with --adapter FILE (a LoRA GGUF for the memory agents, e.g. a recipe stage
not shipped yet: use another --out); bench/results/agents_table.md was measured on the model as
released, before the adapter shipped, so --base-model reproduces it (use another --out for the
other).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from pathlib import Path

from longread.agents import AGENTS, make_agent, make_config
from longread.cli.options import given_call_adapters, without_idle_calls
from longread.data.needle import NEEDLE_QUESTION, needle_document_of_length
from longread.llm.factory import BackendSettings, close_all, make_backend, make_call_backends
from longread.llm.llamacpp import LlamaCppBackend
from longread.text import LlamaCppTokenizer

MEMORY_AGENTS = ("memagent", "rememr1", "memreread")
ROW_MEANS = ("correct", "calls", "prompt_tokens", "seconds")


def documents(tokenizer, lengths: list[int], count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for length in lengths:
        for i in range(count):
            number = str(rng.randrange(1_000_000, 10_000_000))
            depth = (i + 0.5) / count  # spread the needle from near the start to near the end
            text = needle_document_of_length(number, length, tokenizer, depth)
            docs.append({"length": length, "doc": i, "number": number, "text": text})
    return docs


def agent_config(name: str, args):
    if name in MEMORY_AGENTS:
        return make_config(
            name,
            chunk_tokens=args.chunk_tokens,
            memory_tokens=args.memory_tokens,
            prompt_set=args.prompt_set,
        )
    return make_config(name, prompt_set=args.prompt_set)


async def run_all(args) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            row = json.loads(line)
            done.add((row["agent"], row["length"], row["doc"]))
    backend = LlamaCppBackend(base_model=args.base_model)
    shared = str(backend.adapter_path) if backend.adapter_path else None
    tokenizer = LlamaCppTokenizer(backend.llama)
    docs = documents(tokenizer, args.lengths, args.docs, args.seed)
    for name in args.agents:
        # the agent's own shipped adapter (memreread's), for all its calls or some, or
        # --adapter's, or --decision-adapter's for memreread's decisions
        decisions = args.decision_adapter if name == "memreread" else None
        config = agent_config(name, args)
        settings = without_idle_calls(BackendSettings(
            backend="llamacpp", base_model=args.base_model, agent=name,
            adapter=args.adapter if name in MEMORY_AGENTS else None,
            call_adapters=given_call_adapters(decisions, None),
        ), config)  # fmt: skip
        own = settings.applied_adapter() != shared
        reader = make_backend(settings) if own else backend
        calls = make_call_backends(settings)
        agent = make_agent(name, reader, tokenizer, config, call_backends=calls)
        for doc in docs:
            if (name, doc["length"], doc["doc"]) in done:
                continue
            row = await run_one(agent, name, doc, tokenizer)
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps({k: v for k, v in row.items() if k != "answer"}), flush=True)
        await close_all([*calls.values(), *([reader] if own else [])])
    await backend.aclose()


async def run_one(agent, name: str, doc: dict, tokenizer) -> dict:
    start = time.perf_counter()
    run = await agent.run(NEEDLE_QUESTION, doc["text"])
    return {
        "agent": name,
        "length": doc["length"],
        "doc": doc["doc"],
        "doc_tokens": tokenizer.count(doc["text"]),
        "correct": doc["number"] in run.answer,
        "answer": run.answer[:200],
        "calls": run.calls,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "seconds": round(time.perf_counter() - start, 2),
        "memory_tokens": [s.completion_tokens for s in run.steps if s.kind == "update"],
        "memory_cut": sum("memory_truncated" in s.flags for s in run.steps if s.kind == "update"),
        "notes": run.notes,
    }


def table(path: Path, agents: list[str], lengths: list[int]) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    lines = [
        "| agent | length | n | accuracy | mean calls | mean prompt tokens | mean seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in agents:
        for length in lengths:
            cell = [r for r in rows if r["agent"] == name and r["length"] == length]
            if not cell:
                continue
            n = len(cell)
            mean = {key: sum(r[key] for r in cell) / n for key in ROW_MEANS}
            lines.append(
                f"| {name} | {length} | {n} | {mean['correct']:.0%} | {mean['calls']:.1f} | "
                f"{mean['prompt_tokens']:.0f} | {mean['seconds']:.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="2000,4000,12000")
    parser.add_argument("--docs", type=int, default=5)
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--chunk-tokens", type=int, default=1000)
    parser.add_argument("--memory-tokens", type=int, default=256)
    parser.add_argument("--prompt-set", default="paper", help="bundled prompts: paper or notes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results/agents_table.jsonl")
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument(
        "--base-model", action="store_true", help="the model as released, without its adapter"
    )
    parser.add_argument(
        "--adapter", help="the memory agents read with this LoRA GGUF, not their shipped one"
    )
    parser.add_argument(
        "--decision-adapter", help="memreread's decide and integrate calls with this LoRA GGUF"
    )
    args = parser.parse_args()
    args.lengths = [int(x) for x in args.lengths.split(",")]
    args.agents = args.agents.split(",")
    if not args.table_only:
        asyncio.run(run_all(args))
    print(table(Path(args.out), args.agents, args.lengths))


if __name__ == "__main__":
    main()
