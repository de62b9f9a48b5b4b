"""What rememr1's step grammar (``--format-grammar on``) costs a step, replayed on recorded steps.

    .venv/bin/python bench/grammar_cost.py RUN_DIR [--steps 30] [--adapter memory]

Takes ``--steps`` update calls from RUN_DIR's traces (a rememr1 run; spread over its samples)
and calls each again on the embedded model three ways, in turns so that drift hits all alike:
``free`` (format and loop stops, as rememr1 ships), ``grammar`` (plus the step grammar, greedy
decoding checking its pick: ``llamacpp_grammar.GreedyUnderGrammar``) and ``grammar-mask`` (the
step grammar as llama.cpp's grammar sampler in the chain, masking the whole vocabulary at every
token). Every call forgets the KV cache first, so each prefills its whole prompt, as the agent's
steps do. Prints the seconds and decoded tokens of each way, the decode seconds (a step's
seconds less a 1-token call's on the same prompt), and how often the grammar refused greedy
decoding's pick (each refusal masks the vocabulary once).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

from longread.agents.rememr1 import FORMAT_STOPS, step_grammar
from longread.llm import llamacpp_chat, llamacpp_grammar
from longread.llm.base import SamplingParams
from longread.llm.llamacpp import LlamaCppBackend
from longread.llm.memory_adapter import bundled_memory_adapter

WAYS = ("free", "grammar", "grammar-mask")


def recorded_steps(run: Path, count: int) -> list[list[dict]]:
    """The messages of ``count`` update calls of ``run``'s traces, every k-th one."""
    steps = [
        step["messages"]
        for trace in sorted((run / "traces").glob("*.json"))
        for step in json.loads(trace.read_text())["steps"]
        if step["kind"] == "update"
    ]
    if not steps:
        raise SystemExit(f"grammar_cost.py: no update steps in {run}/traces")
    every = max(1, len(steps) // count)
    return steps[::every][:count]


def count_refusals() -> dict[str, int]:
    """Count the picks the grammar refuses, from now on (``GreedyUnderGrammar._allows``)."""
    counts = {"refused": 0}
    allows = llamacpp_grammar.GreedyUnderGrammar._allows

    def counted(sampler: llamacpp_grammar.GreedyUnderGrammar, token: int) -> bool:
        allowed = allows(sampler, token)
        counts["refused"] += not allowed
        return allowed

    llamacpp_grammar.GreedyUnderGrammar._allows = counted
    return counts


async def call(backend, messages, params: SamplingParams, way: str) -> tuple[float, int]:
    backend.llama.reset()  # forget the KV cache: the whole prompt is prefilled
    build_sampler = llamacpp_chat.build_sampler
    if way == "grammar-mask":
        llamacpp_chat.build_sampler = functools.partial(build_sampler, full_mask=True)
    try:
        start = time.perf_counter()
        completion = await backend.chat(messages, params)
        return time.perf_counter() - start, completion.completion_tokens
    finally:
        llamacpp_chat.build_sampler = build_sampler


async def measure(args) -> None:
    backend = LlamaCppBackend(adapter=str(bundled_memory_adapter(args.adapter)))
    free = SamplingParams(
        max_tokens=256, temperature=0.0, stop=FORMAT_STOPS, include_stop=True, loop_stop=True
    )
    params = {"free": free, "grammar": replace(free, grammar=step_grammar(True))}
    params["grammar-mask"] = params["grammar"]
    counts = count_refusals()
    seconds = {way: [] for way in WAYS}
    decode = {way: [] for way in WAYS}
    tokens = {way: 0 for way in WAYS}
    steps = recorded_steps(Path(args.run), args.steps)
    for index, messages in enumerate(steps):
        prefill, _ = await call(backend, messages, replace(free, max_tokens=1), "free")
        first = index % len(WAYS)
        for way in WAYS[first:] + WAYS[:first]:
            spent, decoded = await call(backend, messages, params[way], way)
            seconds[way].append(spent)
            decode[way].append(spent - prefill)
            tokens[way] += decoded
        print(f"step {index + 1}/{len(steps)}", flush=True)
    await backend.aclose()
    print(f"{len(steps)} steps of {args.run}")
    print(f"{'way':<13} {'s/step':>7} {'decode s/step':>14} {'tokens':>7} {'decode tok/s':>13}")
    for way in WAYS:
        decode_seconds = sum(decode[way])
        print(
            f"{way:<13} {statistics.mean(seconds[way]):>7.2f} "
            f"{statistics.mean(decode[way]):>14.2f} {tokens[way]:>7} "
            f"{tokens[way] / decode_seconds:>13.1f}"
        )
    print(f"picks the grammar refused (grammar way): {counts['refused']} of {tokens['grammar']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a rememr1 run folder (results/v2/runs/rememr1-...)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--adapter", default="rememr1", help="whose shipped adapter reads")
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
