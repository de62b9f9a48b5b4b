"""longread's overhead on the embedded model: prefill and decode tokens/s through
``LlamaCppBackend`` versus llama-cpp-python called directly on the same prompts and file.

    .venv/bin/python bench/overhead.py [--prompt-tokens 1024] [--decode-tokens 128] [--repeats 3]

Five paths: llama-cpp-python directly; ``LlamaCppBackend`` (a plain call: llama-cpp-python's
chat completion); ``LlamaCppBackend`` with a kept stop string (``include_stop``, as
rememr1's format stop asks; a string the story never writes), which runs longread's own
generation loop (``llamacpp_chat.Stopping``, as recording tokens does); and a plain call
under a grammar every story follows (``SamplingParams.grammar``, as rememr1's
``--format-grammar`` asks): the same text, greedy decoding checking its pick against the
grammar (``llamacpp_grammar.GreedyUnderGrammar``); and the same call with llama.cpp's grammar
sampler in the chain, masking the whole vocabulary at every step (``grammar-mask``).

Each repeat uses a fresh prompt (a different leading number), the same for every path, so the
paths decode the same greedy text; every call forgets the KV cache first, so no path gets
llama.cpp's prefix cache; and the paths take turns going first. Prefill: prompt tokens /
seconds of a 1-token completion of a long prompt. Decode: completion tokens / seconds of a long
generation from a short prompt (about 40 tokens, so prefill is a negligible share).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import time

from longread.llm import compute_thread, llamacpp_chat
from longread.llm.base import SamplingParams
from longread.llm.llamacpp import LlamaCppBackend

FILLER = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
)


def prompt(llama, tokens: int, salt: int) -> list[dict]:
    """A user message of about ``tokens`` tokens, different for every ``salt``."""
    per = len(llama.tokenize(FILLER.encode(), add_bos=False))
    text = f"Run {salt}. " + FILLER * max(1, tokens // per) if tokens else f"Run {salt}."
    return [{"role": "user", "content": text + "\nNow write a long story about the sky."}]


def direct(llama, messages, max_tokens: int) -> tuple[int, int, float]:
    start = time.perf_counter()
    out = llama.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0.0)
    usage = out["usage"]
    return usage["prompt_tokens"], usage["completion_tokens"], time.perf_counter() - start


# A stop string no reply here writes: the call runs to its cap on longread's own loop.
UNWRITTEN = "</never-written>"
# A grammar every reply here follows (any text without a NUL), so its path decodes the same.
ANY_TEXT = "root ::= [^\\x00]*\n"
PATHS = ("direct", "longread", "kept-stop", "grammar", "grammar-mask")


async def via_longread(backend, messages, max_tokens: int, path: str) -> tuple[int, int, float]:
    start = time.perf_counter()
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)  # as `direct` samples
    if path == "kept-stop":
        params = SamplingParams(
            max_tokens=max_tokens, temperature=0.0, stop=(UNWRITTEN,), include_stop=True
        )
    if path.startswith("grammar"):
        params = SamplingParams(max_tokens=max_tokens, temperature=0.0, grammar=ANY_TEXT)
    build_sampler = llamacpp_chat.build_sampler
    if path == "grammar-mask":  # the chain with llama.cpp's grammar sampler, as before stop 76
        llamacpp_chat.build_sampler = functools.partial(build_sampler, full_mask=True)
    try:
        completion = await backend.chat(messages, params)
    finally:
        llamacpp_chat.build_sampler = build_sampler
    return completion.prompt_tokens, completion.completion_tokens, time.perf_counter() - start


async def measure(args) -> dict[str, dict[str, float]]:
    backend = LlamaCppBackend(quant=args.quant)
    llama = backend.llama  # the very same loaded model serves every path

    async def call(path: str, messages, max_tokens: int) -> tuple[int, int, float]:
        llama.reset()  # forget the KV cache: every call prefills its whole prompt
        if path == "direct":
            # On the thread longread computes on: a second thread running llama.cpp would slow
            # both paths 2-4x (see longread.llm.compute_thread), measuring that, not overhead.
            return compute_thread.call(direct, llama, messages, max_tokens)
        return await via_longread(backend, messages, max_tokens, path)

    rates: dict[str, dict[str, list[float]]] = {}
    for salt in range(args.repeats):
        # Rotate which path goes first so cache or frequency effects hit all alike.
        first = salt % len(PATHS)
        for path in PATHS[first:] + PATHS[:first]:
            prompt_tokens, _, prefill_seconds = await call(
                path, prompt(llama, args.prompt_tokens, salt), 1
            )
            # Decode from a short prompt, so prefill is a negligible part of the time.
            _, completion_tokens, seconds = await call(
                path, prompt(llama, 0, salt), args.decode_tokens
            )
            rate = rates.setdefault(path, {"prefill": [], "decode": []})
            rate["prefill"].append(prompt_tokens / prefill_seconds)
            rate["decode"].append(completion_tokens / seconds)
            rate.setdefault("generated", []).append(completion_tokens)
    await backend.aclose()
    return {p: {k: statistics.median(v) for k, v in r.items()} for p, r in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--decode-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quant", default=None, help="q8_0 (default), q4_0, f16 or original")
    args = parser.parse_args()
    result = asyncio.run(measure(args))
    print(f"{'path':<13} {'prefill tok/s':>14} {'decode tok/s':>13} {'tokens decoded':>15}")
    for path, r in result.items():
        print(f"{path:<13} {r['prefill']:>14.1f} {r['decode']:>13.1f} {r['generated']:>15.0f}")
    d = result["direct"]
    for path in PATHS[1:]:
        w = result[path]
        print(
            f"{path}/direct: prefill {w['prefill'] / d['prefill']:.3f}, "
            f"decode {w['decode'] / d['decode']:.3f}"
        )


if __name__ == "__main__":
    main()
