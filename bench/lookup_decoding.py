"""Prompt-lookup decoding on the embedded model: the same calls with it and without it.

    .venv/bin/python bench/lookup_decoding.py RUN_DIR [RUN_DIR ...] [--calls 200] \
        [--adapter FILE] [--out bench/results/lookup_decoding.jsonl] [--differences FILE]
    .venv/bin/python bench/lookup_decoding.py --step-costs

``--step-costs`` prints what one ``llama_decode`` of k ids costs behind a 1,200-token context
(median of 8), the price of checking a draft of k - 1 ids.

Replays the model calls an eval run recorded in its traces (``RUN_DIR/traces/*.json``: every
step's messages, in order, samples in name order) greedily on two backends, one with
``lookup_decoding`` and one without, alternating which goes first. Each backend keeps its own
KV cache across calls, as a run does. Reports, per run folder: calls, how many replies are the
same text (and, by kind of call, how many differ), decoded tokens, and the seconds of each
path (whole calls, prefill included). Each call's budget is the run's (``memory_tokens``;
``final_tokens`` for the final answer, ``probe_tokens`` for the exit probe's), and each reads
with the adapter the run recorded for its kind of call (the exit probe's own adapter, say),
unless ``--adapter`` names one for all. ``--differences`` writes each call whose replies
differ (both replies, and how many characters they share before they part).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from longread.eval.sanitize import resolve_path
from longread.llm.base import SamplingParams
from longread.llm.llamacpp import LlamaCppBackend


def recorded_calls(run: Path, limit: int) -> list[tuple[list[dict], int, str]]:
    """Up to ``limit`` (messages, max_tokens, kind) triples from the run's traces, in order."""
    config = json.loads((run / "config.json").read_text())["agent_config"]
    budgets = {"final": config["final_tokens"], "probe": config.get("probe_tokens", 4)}
    calls = []
    for trace in sorted((run / "traces").glob("*.json")):
        for step in json.loads(trace.read_text())["steps"]:
            if not step.get("messages"):
                continue
            budget = budgets.get(step["kind"], config["memory_tokens"])
            calls.append((step["messages"], int(budget), step["kind"]))
            if len(calls) == limit:
                return calls
    return calls


def recorded_adapters(run: Path) -> tuple[str | None, dict[str, str]]:
    """The run's adapter and its per-kind call adapters (``--probe-adapter`` and the like), as
    paths; the config writes them relative to the run folder."""
    backend = json.loads((run / "config.json").read_text())["backend"]

    def path(recorded: str | None) -> str | None:
        return None if recorded is None else str(resolve_path(recorded, run))

    calls = {kind: path(r["adapter"]) for kind, r in (backend.get("call_adapters") or {}).items()}
    return path(backend.get("adapter")), {kind: p for kind, p in calls.items() if p}


async def replay(run: Path, args: argparse.Namespace) -> dict:
    adapter, call_adapters = (args.adapter, {}) if args.adapter else recorded_adapters(run)
    pairs: dict[str | None, tuple[LlamaCppBackend, LlamaCppBackend]] = {}
    totals = {"plain": 0.0, "lookup": 0.0}
    same = tokens = 0
    differ: dict[str, int] = {}  # kind of call -> replies whose text differs
    differences: list[dict] = []
    calls = recorded_calls(run, args.calls)
    for index, (messages, budget, kind) in enumerate(calls):
        kind_adapter = call_adapters.get(kind, adapter)
        if kind_adapter not in pairs:
            pairs[kind_adapter] = (
                LlamaCppBackend(adapter=kind_adapter, base_model=kind_adapter is None),
                LlamaCppBackend(
                    adapter=kind_adapter, base_model=kind_adapter is None, lookup_decoding=True
                ),
            )
        plain, lookup = pairs[kind_adapter]
        params = SamplingParams(max_tokens=budget, temperature=0.0)
        replies = {}
        order = (("plain", plain), ("lookup", lookup))
        for name, backend in order if index % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            replies[name] = await backend.chat(messages, params)
            totals[name] += time.perf_counter() - start
        if replies["plain"].text == replies["lookup"].text:
            same += 1
        else:
            differ[kind] = differ.get(kind, 0) + 1
            differences.append(difference(run, index, kind, replies))
        tokens += replies["plain"].completion_tokens
    for pair in pairs.values():
        for backend in pair:
            await backend.aclose()
    if args.differences:
        with args.differences.open("a") as out:
            out.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in differences)
    return {
        "run": run.name,
        "adapter": args.adapter or "as recorded",
        "calls": len(calls),
        "same_replies": same,
        "differ_by_kind": differ,
        "decoded_tokens": tokens,
        "plain_seconds": round(totals["plain"], 2),
        "lookup_seconds": round(totals["lookup"], 2),
        "speedup": round(totals["plain"] / max(totals["lookup"], 1e-9), 3),
    }


def difference(run: Path, index: int, kind: str, replies: dict) -> dict:
    """One call whose two replies differ: where they part, and both replies whole."""
    plain, lookup = replies["plain"].text, replies["lookup"].text
    pairs = zip(plain, lookup, strict=False)  # up to the shorter reply
    shared = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(plain), len(lookup)))
    return {
        "run": run.name,
        "call": index,
        "kind": kind,
        "shared_chars": shared,
        "plain": plain,
        "lookup": lookup,
        "plain_tokens": replies["plain"].completion_tokens,
        "lookup_tokens": replies["lookup"].completion_tokens,
    }


def step_costs() -> None:
    """Median milliseconds of one decode step of k ids at a 1,200-token context."""
    import statistics

    from longread.llm.lookup_decoding import _decode_all_logits, _keep

    llama = LlamaCppBackend().llama
    ids = llama.tokenize(b"The lesson of the lantern is simple. " * 150, add_bos=True)[:1200]
    llama.reset()
    llama.eval(ids)
    for k in (1, 2, 4, 8, 11, 16):
        seconds = []
        for _ in range(8):
            start = llama.n_tokens
            began = time.perf_counter()
            _decode_all_logits(llama, ids[100 : 100 + k], start)
            seconds.append(time.perf_counter() - began)
            _keep(llama, start)
        print(json.dumps({"ids": k, "ms": round(1000 * statistics.median(seconds), 1)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, help="eval run folders with traces")
    parser.add_argument("--step-costs", action="store_true", help="time decode steps of k ids")
    parser.add_argument("--calls", type=int, default=200, help="calls replayed per run")
    parser.add_argument(
        "--adapter", help="LoRA adapter for every call (default: the ones the run recorded)"
    )
    parser.add_argument("--out", type=Path, help="append one JSON row per run here")
    parser.add_argument(
        "--differences", type=Path, help="append each call whose replies differ here (JSONL)"
    )
    args = parser.parse_args()
    if args.step_costs:
        step_costs()
    for run in args.runs:
        row = asyncio.run(replay(run, args))
        print(json.dumps(row))
        if args.out:
            with args.out.open("a") as out:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
