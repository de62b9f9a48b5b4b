"""Many questions, one document: the paper's prompt order against section-first (issue 11,
item 10).

    .venv/bin/python bench/multi_question.py [--tokens 32768] [--questions 8]
        [--chunk-tokens N] [--memory-tokens N] [--final-tokens N] [--out FILE.jsonl]
        [--orders paper,section_first] [--adapter GGUF | --base-model]
        [--grounded-notes on|off] [--focused-notes on|off] [--exact-copies on|off]
        [--focused-reread on|off] [--lookup-decoding] [--traces DIR]

One document of about ``--tokens`` tokens (RULER's noise haystack, ``longread.data.needle``)
hides ``--questions`` needles, "The special magic number for KEY is VALUE.", spread evenly;
question i asks for key i's number. MemAgent reads the document once for all the questions
(``run_many``: chunk-major, chunk 1 for every question, then chunk 2...) on the embedded
model, once per prompt order:

- ``paper``: problem, memory, section (the paper's order, the default);
- ``section_first``: section, problem, memory: consecutive calls share the chunk as a prefix.

llama-cpp-python keeps the previous call's tokens and decodes only what follows their
longest common prefix with the next prompt (``Llama.generate``). The prefill tokens it
actually decoded are counted by wrapping the loaded ``Llama``'s ``generate`` and ``eval``:
the first ``eval`` of each ``generate`` is its prompt's uncached part. Printed per order:
prompt tokens sent, prefill tokens computed, wall time, and accuracy (RULER's match).
``--orders section_first`` reads one order only (the paper's takes several times longer).

It reads as ``longread ask`` does: a setting not given is the applied adapter's (the shipped
memory adapter's, or ``--adapter``'s: the chunk, memory and answer sizes it trained with and
the memory options it shipped to read with, e.g. grounded notes and focused rereads); with
``--base-model``, 5,000-token chunks, a 256-token memory and 64-token answers. The memory
options act on each question's notes alone, so the shared prefix is kept; a focused reread is
one more call for that question only. The exit probe, which the shipped memagent reads with
by default, stays off here: every question reads the whole document, as in the paper's order.
Run it on a quiet machine: wall times compare only within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from longread.agents.memagent import MemAgent, MemAgentConfig
from longread.cli.options import with_trained_settings
from longread.data.needle import NOISE
from longread.eval.scoring import score_answer
from longread.llm import lookup_decoding
from longread.llm.factory import BackendSettings, make_backend, make_tokenizer
from longread.llm.llamacpp import LlamaCppBackend
from longread.text.tokenizer import Tokenizer

KEYS = ("amber", "birch", "cobalt", "dune", "ember", "fjord", "granite", "harbor", "iris", "jade")
PER_PARAGRAPH = 4  # noise sentences per paragraph, as needle_document writes them
ORDERS = ("paper", "section_first")
# Without an adapter's settings: the paper's chunk, a memory and an answer sized for needles.
UNTRAINED = {"chunk_tokens": 5000, "memory_tokens": 256, "final_tokens": 64}
READING = ("grounded_notes", "focused_notes", "exact_copies", "focused_reread")


def on_off(text: str) -> bool:
    """An ``on``/``off`` flag value, as ``ask`` takes it."""
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError("expected on or off")
    return text == "on"


def orders(text: str) -> tuple[str, ...]:
    """``--orders``: prompt orders, comma-separated, each one of ``ORDERS``."""
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [order for order in chosen if order not in ORDERS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"orders must be among {','.join(ORDERS)}")
    return chosen


class PrefillCounter:
    """Counts the prompt tokens a ``llama_cpp.Llama`` actually decodes (not served from the
    tokens it kept from the previous call)."""

    def __init__(self, llama: Any) -> None:
        self.computed = 0
        self._prompt_next = False
        generate, evaluate = llama.generate, llama.eval

        def counted_generate(*args: Any, **kwargs: Any) -> Iterator[int]:
            self._prompt_next = True  # the first eval after this is the prompt's uncached part
            return generate(*args, **kwargs)

        def counted_eval(tokens: Any) -> None:
            if self._prompt_next:
                self.computed += len(tokens)
                self._prompt_next = False
            evaluate(tokens)

        def counted_prefill(llama: Any, ids: list[int]) -> None:
            self._prompt_next = True  # lookup decoding reads its prompt with one eval too
            prefill(llama, ids)

        prefill = lookup_decoding._prefill
        llama.generate, llama.eval = counted_generate, counted_eval
        lookup_decoding._prefill = counted_prefill


def build_document(
    tokenizer: Tokenizer, tokens: int, questions: int, seed: int
) -> tuple[str, list[tuple[str, str]]]:
    """The haystack text and its (question, answer) pairs."""
    if not 1 <= questions <= len(KEYS):
        raise SystemExit(f"--questions must be between 1 and {len(KEYS)}")
    rng = random.Random(seed)
    needles = [(key, str(rng.randrange(1_000_000, 10_000_000))) for key in KEYS[:questions]]
    paragraph = " ".join([NOISE] * PER_PARAGRAPH)
    per_paragraph = tokenizer.count(paragraph + "\n\n")
    paragraphs = [paragraph] * max(questions + 1, tokens // per_paragraph)
    for i, (key, value) in enumerate(needles):  # evenly spread, none at the very start
        at = (i + 1) * len(paragraphs) // (questions + 1)
        paragraphs[at] += f" The special magic number for {key} is {value}."
    pairs = [
        (f"What is the special magic number for {key} mentioned in the document?", value)
        for key, value in needles
    ]
    return "\n\n".join(paragraphs) + "\n", pairs


def reading_settings(args: argparse.Namespace, settings: BackendSettings) -> dict[str, Any]:
    """The memagent settings the bench reads with: the flags given, then the applied
    adapter's trained and shipped settings (as ``ask``), then ``UNTRAINED``."""
    given = {name: getattr(args, name) for name in (*UNTRAINED, *READING)}
    # The exit probe stays off: its calls take an adapter of their own, which this bench's one
    # backend does not load (bench/exit_gate.py measures it).
    given["exit_probe"] = False
    filled = with_trained_settings("memagent", settings, given)
    return {
        **{name: filled.get(name) or default for name, default in UNTRAINED.items()},
        **{name: bool(filled.get(name)) for name in READING},
        **{k: v for k, v in filled.items() if k not in given and v is not None},
    }


async def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    settings = BackendSettings(
        backend="llamacpp",
        gguf=args.gguf,
        n_ctx=args.n_ctx,
        adapter=args.adapter,
        base_model=args.base_model,
        lookup_decoding=args.lookup_decoding,
    )
    reading = reading_settings(args, settings)
    adapter = settings.applied_adapter()
    backend = make_backend(settings)
    try:
        tokenizer = await make_tokenizer(backend, settings)  # loads the model
        text, pairs = build_document(tokenizer, args.tokens, args.questions, args.seed)
        assert isinstance(backend, LlamaCppBackend)
        llama = backend.llama
        counter = PrefillCounter(llama)
        rows = []
        for order in args.orders:
            config = MemAgentConfig(**reading, section_first=order == "section_first")
            agent = MemAgent(backend, tokenizer, config)
            print(f"{order}: reading ...", flush=True)  # each order takes minutes on a CPU
            llama.reset()  # no state carried over from the other order
            counter.computed = 0
            started = time.perf_counter()
            runs = await agent.run_many([q for q, _ in pairs], text)
            wall = time.perf_counter() - started
            print(f"{order}: done in {wall:.0f} s", flush=True)
            if args.traces:  # one trace a question, for `longread view`
                args.traces.mkdir(parents=True, exist_ok=True)
                for key, run in zip(KEYS, runs, strict=False):
                    run.save(args.traces / f"{order}-{key}.json")
            scores = [  # RULER's match_all, in percent
                score_answer(run.final_reply, [answer], kind="ruler").match_all or 0.0
                for run, (_, answer) in zip(runs, pairs, strict=True)
            ]
            rows.append({
                "order": order,
                "adapter": Path(adapter).name if adapter else None,
                "lookup_decoding": args.lookup_decoding,
                **{name: reading[name] for name in (*UNTRAINED, *READING)},
                "document_tokens": tokenizer.count(text),
                "questions": len(pairs),
                "chunk_tokens": runs[0].config["chunk_tokens_used"],
                "calls": sum(run.calls for run in runs),
                "prompt_tokens_sent": sum(run.prompt_tokens for run in runs),
                "prefill_tokens_computed": counter.computed,
                "completion_tokens": sum(run.completion_tokens for run in runs),
                "wall_seconds": round(wall, 2),
                "accuracy": sum(scores) / len(scores) / 100,
                "answers": [run.answer for run in runs],
            })  # fmt: skip
        return rows
    finally:
        await backend.aclose()


def print_table(rows: list[dict[str, Any]]) -> None:
    first = rows[0]
    print(
        f"{first['questions']} questions, one {first['document_tokens']}-token document, "
        f"chunks of {first['chunk_tokens']} tokens, adapter {first['adapter']}"
    )
    options = [name for name in READING if first[name]]
    print(f"memory {first['memory_tokens']} tokens; on: {', '.join(options) or 'none'}")
    print("| order | calls | prompt tokens sent | prefill computed | wall s | accuracy |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        share = row["prefill_tokens_computed"] / max(row["prompt_tokens_sent"], 1)
        print(
            f"| {row['order']} | {row['calls']} | {row['prompt_tokens_sent']} | "
            f"{row['prefill_tokens_computed']} ({100 * share:.0f}%) | {row['wall_seconds']} | "
            f"{100 * row['accuracy']:.0f}% |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=32768, help="document size in tokens")
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--chunk-tokens", type=int, help="[the adapter's, else 5000]")
    parser.add_argument("--memory-tokens", type=int, help="[the adapter's, else 256]")
    parser.add_argument("--final-tokens", type=int, help="[the adapter's (at least 64), else 64]")
    parser.add_argument("--gguf", help="GGUF model (default: the bundled SmolLM2)")
    parser.add_argument("--adapter", help="LoRA adapter GGUF (default: the shipped one)")
    parser.add_argument("--base-model", action="store_true", help="the model as released")
    parser.add_argument("--n-ctx", type=int, default=None, help="window (default: 8192)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--lookup-decoding", action="store_true", help="as ask's --lookup-decoding (greedy calls)"
    )
    parser.add_argument("--out", type=Path, help="also write the rows as JSON lines here")
    parser.add_argument("--traces", type=Path, help="write each run's trace to this folder")
    parser.add_argument(
        "--orders", type=orders, default=ORDERS, help="comma-separated, of: " + ",".join(ORDERS)
    )
    for name in READING:  # unset: as the adapter shipped to read
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=on_off, help=f"on|off, as ask's {flag}")
    args = parser.parse_args()
    rows = asyncio.run(measure(args))
    print_table(rows)
    if args.out:
        args.out.write_text("".join(json.dumps(row) + "\n" for row in rows))


if __name__ == "__main__":
    main()
