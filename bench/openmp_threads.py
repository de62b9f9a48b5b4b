"""Why every llama.cpp call runs on one thread (``longread.llm.compute_thread``): the cost of
one SmolLM2 decode step depending on which threads have computed before, and the cost of one
batched step against the number of sequences stepped together.

    .venv/bin/python bench/openmp_threads.py [--steps 100] [--torch]

Each case runs in a fresh process (an OpenMP team, once made, lives as long as its thread), so
the cases cannot disturb each other. ``one-thread``: every step on the same thread.
``second-thread``: the main thread decodes first, then another thread does (the main thread's
idle team still counts). ``after-torch`` (with ``--torch``, needs the train extra): torch
multiplies matrices on the main thread, then llama.cpp decodes on the compute thread, as the
trainer did between its updates and rollouts. ``batched``: a raw ``llama_decode`` loop in a
batch context (``llamacpp_batch``) stepping 1, 2, 4 and 8 sequences at once, on one thread.
Prints milliseconds per step.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from typing import Any

TEXT = b"Once upon a time, the sky was blue and the clouds were white over the quiet harbour."
CASES = ("one-thread", "second-thread", "after-torch", "batched")


def load() -> tuple[Any, list[int]]:
    from longread.llm.llamacpp import LlamaCppBackend

    llama = LlamaCppBackend(n_ctx=1536).llama
    return llama, llama.tokenize(TEXT)


def decode_ms(llama: Any, ids: list[int], steps: int) -> float:
    """Milliseconds per one-token step, after prefilling ``ids``, on the calling thread."""
    llama.reset()
    llama.eval(ids)
    start = time.perf_counter()
    for i in range(steps):
        llama.eval([ids[i % len(ids)]])
    return (time.perf_counter() - start) / steps * 1000


def on_new_thread(function: Any, *args: Any) -> Any:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(function(*args)))
    thread.start()
    thread.join()
    return result[0]


def batched_ms(llama: Any, ids: list[int], steps: int) -> dict[int, float]:
    """Milliseconds per batched step for 1, 2, 4 and 8 sequences, each after its own prefill."""
    import llama_cpp

    from longread.llm.llamacpp_batch import _batch_context

    context = _batch_context(llama, 8, 1536, 512)
    batch = llama_cpp.llama_batch_init(512, 0, 1)
    memory = llama_cpp.llama_get_memory(context.ctx)

    def step(rows: list[tuple[int, int, int, bool]]) -> None:
        batch.n_tokens = len(rows)
        for i, (token, position, seat, logits) in enumerate(rows):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, position, 1
            batch.seq_id[i][0], batch.logits[i] = seat, logits
        llama_cpp.llama_decode(context.ctx, batch)

    costs = {}
    for sequences in (1, 2, 4, 8):
        llama_cpp.llama_memory_clear(memory, True)
        for seat in range(sequences):
            step([(t, i, seat, i == len(ids) - 1) for i, t in enumerate(ids)])
        start = time.perf_counter()
        for i in range(steps):
            step([(ids[i % len(ids)], len(ids) + i, s, True) for s in range(sequences)])
        costs[sequences] = (time.perf_counter() - start) / steps * 1000
    llama_cpp.llama_batch_free(batch)
    context.close()
    return costs


def run_case(case: str, steps: int) -> str:
    """One case, in this process; a line to print."""
    if case == "after-torch":
        import torch

        matrix = torch.randn(512, 512)
        for _ in range(50):
            matrix @ matrix
    llama, ids = load()
    if case == "one-thread":
        return f"one-thread: {decode_ms(llama, ids, steps):.1f} ms/step"
    if case == "second-thread":
        first = decode_ms(llama, ids, steps)
        second = on_new_thread(decode_ms, llama, ids, steps)
        return f"second-thread: main {first:.1f} ms/step, then another thread {second:.1f}"
    if case == "after-torch":
        from longread.llm import compute_thread

        return f"after-torch: {compute_thread.call(decode_ms, llama, ids, steps):.1f} ms/step"
    costs = batched_ms(llama, ids, steps)
    return "batched: " + ", ".join(f"{n} seq {ms:.1f} ms/step" for n, ms in costs.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--torch", action="store_true", help="also the after-torch case")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # one child process
    args = parser.parse_args()
    if args.case:
        print(run_case(args.case, args.steps), flush=True)
        return
    for case in CASES:
        if case == "after-torch" and not args.torch:
            continue
        command = [sys.executable, __file__, "--case", case, "--steps", str(args.steps)]
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
