"""The exit gate against needle depth (issue 29): how much of a document memagent reads, and
how long a sample takes, with the needle at 10%, 50% and 90% of it, against the ideal (read
up to the needle's chunk, then stop) and against the gate off (every chunk).

    .venv/bin/python bench/exit_gate.py [--tokens 8192] [--per-depth 3] [--adapter memory]
        [--min-read 0] [--grounded-exit] [--out FILE.jsonl] [--traces DIR]

Documents are ``make demo``'s layout (``longread.data.needle``: RULER's noise in paragraphs,
"The special magic number is N." at the depth asked), read on the embedded model at the
shipped adapter's settings (1,000-token chunks, 256-token memory, 32-token answers). Each
sample runs twice, exit gate off then on (the update gate, and whether the prompt explains
the gates, as the adapter's ``adapter.json`` says it was trained); per depth it prints the
share read (gate on; the ideal; off is 100%), seconds per sample both ways, and accuracy both
ways. An adapter trained with the exit probe is compared with the probe off and on instead,
and so is ``--adapter memory`` (the default), whose probe calls read with memagent's shipped
probe adapter.
An adapter that was not trained for the gate rarely says ``<exit/>``: then the share read
stays near 100%. ``--grounded-exit`` reads the gate-on run with ``grounded_exit`` (an exit
counts only on notes traced to the sections read). Run it on a quiet machine: seconds
compare only within one run.
``--traces DIR`` keeps every run's trace (``depth50-2-on.json``: the needle at 50%, third
sample, gate on), to open with ``longread view`` or read by hand: what the notes held when
the gate said no.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
from pathlib import Path
from statistics import mean
from typing import Any

from longread.agents.memagent import MemAgent, MemAgentConfig
from longread.data.needle import NEEDLE_QUESTION, needle_document_of_length
from longread.llm.factory import BackendSettings, make_backend, make_call_backends, make_tokenizer
from longread.llm.trained_settings import read_trained_settings

DEPTHS = (0.1, 0.5, 0.9)


async def one(backend: Any, tokenizer: Any, document: str, number: str, gate: bool,
              args: argparse.Namespace, exit_option: str, gates: dict[str, bool],
              trace: Path | None, probes: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    config = MemAgentConfig(
        chunk_tokens=1000, memory_tokens=256, final_tokens=32, min_read=args.min_read,
        grounded_exit=args.grounded_exit, **{exit_option: gate}, **gates,
    )  # fmt: skip
    agent = MemAgent(backend, tokenizer, config, call_backends=probes)
    run = await agent.run(NEEDLE_QUESTION, document)
    if trace is not None:
        run.save(trace)
    chunks = run.config.get("chunks") or sum(s.kind == "update" for s in run.steps)
    read = run.config.get("chunks_read", chunks)
    return {"correct": number in run.answer, "seconds": run.seconds, "read": read, "chunks": chunks}


def trained_gates(adapter: str | None, probes: dict[str, Any]) -> tuple[str, dict[str, bool]]:
    """The exit the two runs compare (``exit_probe`` where the adapter learnt it or the probe
    has an adapter of its own, memagent's shipped one, else ``exit_gate``) and the gate settings
    both keep, as ``adapter`` was trained: an adapter that learnt <keep/> would empty its notes
    with that gate off."""
    if probes:
        return "exit_probe", {}
    trained = read_trained_settings(adapter) if adapter not in (None, "memory") else None
    if trained is None:
        return "exit_gate", {}
    exit_option = "exit_probe" if trained.exit_probe else "exit_gate"
    return exit_option, {
        "update_gate": trained.update_gate,
        "gate_instructions": trained.gate_instructions,
    }


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    settings = BackendSettings(
        adapter=args.adapter, base_model=args.adapter is None, agent="memagent"
    )
    backend = make_backend(settings)
    # with --adapter memory: the probe's calls on memagent's shipped probe adapter
    probes = make_call_backends(settings)
    tokenizer = await make_tokenizer(backend, settings)
    rng = random.Random(args.seed)
    exit_option, gates = trained_gates(args.adapter, probes)
    rows = []
    for depth in DEPTHS:
        for index in range(args.per_depth):
            number = str(rng.randrange(1_000_000, 10_000_000))
            document = needle_document_of_length(number, args.tokens, tokenizer, depth)
            off, on = [
                await one(backend, tokenizer, document, number, gate, args, exit_option, gates,
                          trace_path(args.traces, depth, index, gate), probes)
                for gate in (False, True)
            ]  # fmt: skip
            ideal = math.ceil(depth * on["chunks"]) or 1  # chunks up to the needle's
            row = {"depth": depth, "index": index, "off": off, "on": on, "ideal_read": ideal}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def trace_path(folder: Path | None, depth: float, index: int, gate: bool) -> Path | None:
    """Where one run's trace goes under ``--traces`` (None: no traces kept)."""
    if folder is None:
        return None
    return folder / f"depth{round(depth * 100)}-{index}-{'on' if gate else 'off'}.json"


def summary(rows: list[dict[str, Any]]) -> None:
    print("| depth | read (gate on) | ideal | s/sample off | s/sample on | acc off | acc on |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for depth in DEPTHS:
        at = [r for r in rows if r["depth"] == depth]
        share = mean(r["on"]["read"] / r["on"]["chunks"] for r in at)
        ideal = mean(r["ideal_read"] / r["on"]["chunks"] for r in at)
        cells = [
            f"{depth:.0%}", f"{share:.0%}", f"{ideal:.0%}",
            f"{mean(r['off']['seconds'] for r in at):.1f}",
            f"{mean(r['on']['seconds'] for r in at):.1f}",
            f"{mean(r['off']['correct'] for r in at):.0%}",
            f"{mean(r['on']['correct'] for r in at):.0%}",
        ]  # fmt: skip
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--per-depth", type=int, default=3)
    parser.add_argument("--adapter", default="memory", help="a LoRA .gguf, memory (the shipped "
                        "one) or none (the model as released)")  # fmt: skip
    parser.add_argument("--min-read", type=float, default=0.0)
    parser.add_argument("--grounded-exit", action="store_true",
                        help="honour an exit only on notes traced to what was read")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--traces", type=Path, help="a folder for every run's trace")
    args = parser.parse_args()
    if args.traces:
        args.traces.mkdir(parents=True, exist_ok=True)
    if args.adapter == "none":
        args.adapter = None
    rows = asyncio.run(bench(args))
    summary(rows)
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
