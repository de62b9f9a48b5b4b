"""Throughput of the embedded model against the number of calls in flight (issue 11, item 11):
the serial path (one call at a time, ``LlamaCppBackend()``) versus batched decoding
(``LlamaCppBackend(parallel=N)``, several sequences stepped by one ``llama_decode``).

    .venv/bin/python bench/embedded_concurrency.py [--concurrency 1,2,4,8] [--calls 8]
        [--prompt-tokens 1000] [--max-tokens 256] [--variants memory,decode] [--threads N]

Two workloads. ``memory``: calls shaped like a memory agent's, a prompt of about
``--prompt-tokens`` tokens (document chunk + notes) and up to ``--max-tokens`` generated.
``decode``: a prompt of about 40 tokens asking to count to 400, which runs to
``--max-tokens``, so decoding is nearly all of the time. At each concurrency C the same ``--calls``
calls run with at most C in flight (an asyncio semaphore, as ``eval run --concurrency`` does),
greedy, each prompt made different from the others by a leading number so the serial path's
prefix cache never skips more than the shared opening. Every level and both paths run the very
same calls, so their rates compare directly. The batched backend has ``parallel`` = the
largest C and keeps its context across levels.

Printed per path and level: generated tokens/s and all tokens/s (prompt + generated) over the
wall time of the level, and the factor over the same path at concurrency 1 and over the serial
path at concurrency 1, and the tokens generated. The model may end a call early on
<|im_end|>; the serial path generates the same tokens at every level, the batched one nearly
so (stepping several sequences together changes the arithmetic slightly, which can flip a
greedy choice: 189 against 207 tokens in one run of an earlier decode prompt), so compare
rates, which count what ran.

All llama.cpp work runs on one thread (``longread.llm.compute_thread``). Before that, both
paths ran 2-3x slower here, and the batched one slower than the serial one at every level.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from longread.llm.base import Completion, Message, SamplingParams
from longread.llm.llamacpp import LlamaCppBackend

FILLER = (
    "The committee met again on the third floor and read the ledger aloud; nobody disputed "
    "the figures, though several members asked for the older volumes from the archive. "
)
NOTES = "Notes so far: the ledger was read on the third floor; the figures were not disputed."


def messages(llama: Any, variant: str, prompt_tokens: int, salt: int) -> list[Message]:
    """One call's messages, about ``prompt_tokens`` long for ``memory``, different per salt."""
    if variant == "decode":
        # Counting keeps the model going to the cap, so every call generates the same amount.
        content = f"Task {salt}: write the numbers from 1 to 400, separated by commas."
        return [{"role": "user", "content": content}]
    per = len(llama.tokenize(FILLER.encode(), add_bos=False))
    chunk = f"Section {salt}. " + FILLER * max(1, (prompt_tokens - 80) // per)
    return [
        {"role": "system", "content": "You read a long document chunk by chunk."},
        {
            "role": "user",
            "content": f"Question: what did the committee decide?\n{NOTES}\n\nChunk:\n{chunk}\n"
            "Rewrite the notes so they keep every fact that helps answer the question.",
        },
    ]


async def level(
    backend: LlamaCppBackend, calls: list[list[Message]], concurrency: int, max_tokens: int
) -> dict[str, float]:
    """Run ``calls`` with at most ``concurrency`` in flight; tokens and wall seconds."""
    gate = asyncio.Semaphore(concurrency)
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)

    async def one(call: list[Message]) -> Completion:
        async with gate:
            return await backend.chat(call, params)

    start = time.perf_counter()
    done = await asyncio.gather(*(one(call) for call in calls))
    seconds = time.perf_counter() - start
    generated = sum(c.completion_tokens for c in done)
    prompt = sum(c.prompt_tokens for c in done)
    return {"seconds": seconds, "generated": generated, "prompt": prompt}


async def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    levels = [int(c) for c in args.concurrency.split(",")]
    window = args.prompt_tokens + args.max_tokens + 256  # room for the template and filler
    rows: list[dict[str, Any]] = []
    for path in ("serial", "batched"):
        parallel = max(levels) if path == "batched" else None
        backend = LlamaCppBackend(
            quant=args.quant, n_ctx=window, n_threads=args.threads, parallel=parallel
        )
        # Load the model (and make the batch context) before any clock starts.
        await backend.chat([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=2))
        for variant in args.variants.split(","):
            calls = [
                messages(backend.llama, variant, args.prompt_tokens, salt)
                for salt in range(1, args.calls + 1)
            ]
            for concurrency in levels:
                result = await level(backend, calls, concurrency, args.max_tokens)
                rows.append({"path": path, "variant": variant, "concurrency": concurrency} | result)
                print(json.dumps(rows[-1]), flush=True)
        await backend.aclose()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| variant | path | concurrency | generated tok/s | all tok/s | x own C=1 | x serial C=1 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    base = {(r["path"], r["variant"]): r for r in rows if r["concurrency"] == min_c(rows)}
    for r in sorted(rows, key=lambda r: (r["variant"], r["path"], r["concurrency"])):
        rate = r["generated"] / r["seconds"]
        own = base[(r["path"], r["variant"])]
        serial = base[("serial", r["variant"])]
        lines.append(
            f"| {r['variant']} | {r['path']} | {r['concurrency']} | {rate:.1f} "
            f"| {(r['generated'] + r['prompt']) / r['seconds']:.1f} "
            f"| {rate / (own['generated'] / own['seconds']):.2f} "
            f"| {rate / (serial['generated'] / serial['seconds']):.2f} |"
        )
    return "\n".join(lines)


def min_c(rows: list[dict[str, Any]]) -> int:
    return min(r["concurrency"] for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,2,4,8", help="comma-separated levels")
    parser.add_argument("--calls", type=int, default=8, help="calls per level (same at each)")
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--variants", default="memory,decode", help="memory, decode or both")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads; default all")
    parser.add_argument("--quant", default=None, help="q8_0 (default), q4_0, f16 or original")
    parser.add_argument("--out", type=Path, default=None, help="also append rows as JSON lines")
    args = parser.parse_args()
    rows = asyncio.run(measure(args))
    print(table(rows))
    if args.out is not None:
        with args.out.open("a", encoding="utf-8") as out:
            out.writelines(json.dumps(row) + "\n" for row in rows)


if __name__ == "__main__":
    main()
