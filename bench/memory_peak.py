"""Peak memory of ``longread ask`` against the size of the document (issue 11, item 8).

    .venv/bin/python bench/memory_peak.py [--sizes 5,20,50] [--chunk-tokens 5000] [--no-trace]
    .venv/bin/python bench/memory_peak.py --pdf-pages 100,1000   # PDFs (needs chromium)

Each size runs in a fresh subprocess: it writes a document of SIZE MB of plain English
paragraphs to a temporary folder, then answers a question about it through the real command
line (``longread ask FILE -q ... --trace T``), with a scripted backend standing in for the
model (instant replies, a memory of about 1,000 characters, the prompt tokens a server would
report) and the 4-characters-per-token estimate (an exact tokenizer costs time, not memory).
It prints the process's peak resident memory (``ru_maxrss``), the resident memory before the
run, and their difference per MB of document. A memory that grows with the document shows as
a constant MB-per-MB; a bounded one as a difference that stays put while the size grows.

With ``--pdf-pages``, each count of pages gets a PDF printed by Debian's chromium (a heading
and eight paragraphs a page, each page its own text), then two fresh subprocesses: one only
reads it with ``open_document`` (PDFium, page by page), one runs the same ``ask`` as above on
it. A reader that holds the document shows as a peak that grows tenfold with the pages.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from longread.llm.base import Completion, Message, SamplingParams
from longread.text.formats import open_document
from longread.text.tokenizers import ApproxTokenizer

# The module, not the ``main`` function that ``longread.cli`` exports under the same name.
cli_main = importlib.import_module("longread.cli.main")

PARAGRAPH = (
    "Entry {n}. The committee met again on the third floor and read the ledger aloud; "
    "nobody disputed the figures, though several members asked for the older volumes to be "
    "brought up from the archive before the next meeting. The weather stayed dry all week.\n\n"
)
MEMORY = "Notes so far: the ledger was read aloud; the figures were not disputed. " * 14


class ScriptedBackend:
    """Answers at once: a memory of fixed size for updates, a boxed answer for the final call."""

    name = "scripted"
    context_window = None

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        prompt = sum(math.ceil(len(m["content"]) / 4) for m in messages)
        final = "boxed" in messages[-1]["content"] and "Section" not in messages[-1]["content"]
        text = "\\boxed{7}" if final else MEMORY
        return Completion(text, "stop", prompt, math.ceil(len(text) / 4), 0.0)

    async def aclose(self) -> None:
        pass


def write_document(path: Path, megabytes: float) -> None:
    target, n = int(megabytes * 1e6), 0
    with open(path, "w", encoding="utf-8") as out:
        while out.tell() < target:
            out.write("".join(PARAGRAPH.format(n=n + i) for i in range(1000)))
            n += 1000


def resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


async def _approx(backend: object, settings: object) -> ApproxTokenizer:
    return ApproxTokenizer()


def write_pdf(path: Path, pages: int) -> None:
    """A ``pages``-page PDF printed by chromium (in its own process: not this one's memory)."""
    sections = "".join(
        f'<section style="break-before: page"><h2>Section {page}</h2>'
        + "".join(f"<p>{PARAGRAPH.format(n=page * 10 + i)}</p>" for i in range(8))
        + "</section>"
        for page in range(pages)
    )
    source = path.with_suffix(".html")
    source.write_text(f"<!doctype html><html><body>{sections}</body></html>", encoding="utf-8")
    command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer"]
    command += [f"--user-data-dir={path.parent / 'profile'}", f"--print-to-pdf={path}"]
    subprocess.run([*command, source.as_uri()], check=True, capture_output=True, timeout=600)


def one(megabytes: float, chunk_tokens: int, trace: bool) -> dict[str, float]:
    """Run one ask in this process and measure it."""
    with tempfile.TemporaryDirectory() as folder:
        document = Path(folder) / "doc.txt"
        write_document(document, megabytes)
        return measure_ask(document, chunk_tokens, trace)


def measure_ask(document: Path, chunk_tokens: int, trace: bool) -> dict[str, float]:
    """Peak memory of ``longread ask DOCUMENT`` with the scripted backend, in this process."""
    cli_main.make_backend = lambda settings: ScriptedBackend()
    cli_main.make_tokenizer = _approx
    args = ["ask", str(document), "-q", "What is the value?", "--chunk-tokens"]
    args += [str(chunk_tokens), "--json"]
    if trace:
        args += ["--trace", str(document.with_name("trace.json"))]
    before = resident_mb()
    started = time.perf_counter()
    try:
        cli_main.cli.main(args, standalone_mode=False)
    finally:
        sys.stdout.flush()
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # KB on Linux
    size = document.stat().st_size / 1e6
    return {"mb": size, "before_mb": before, "peak_mb": peak, "seconds": seconds}


def one_pdf(pages: int, step: str, chunk_tokens: int, trace: bool) -> dict[str, float]:
    """Make a ``pages``-page PDF, then read it (``step`` "read") or ask about it ("ask")."""
    with tempfile.TemporaryDirectory() as folder:
        document = Path(folder) / "doc.pdf"
        write_pdf(document, pages)
        if step == "ask":
            result = measure_ask(document, chunk_tokens, trace)
        else:
            before = resident_mb()
            started = time.perf_counter()
            text = open_document(document)
            for _ in text.pieces:
                pass
            seconds = time.perf_counter() - started
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
            result = {"mb": document.stat().st_size / 1e6, "before_mb": before, "peak_mb": peak}
            result["seconds"] = seconds
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5,20,50", help="document sizes in MB")
    parser.add_argument("--chunk-tokens", type=int, default=5000)
    parser.add_argument("--no-trace", action="store_true", help="run without --trace")
    parser.add_argument("--pdf-pages", help="PDF page counts instead of text sizes, e.g. 100,1000")
    parser.add_argument("--one", type=float, help=argparse.SUPPRESS)  # a child's own size
    parser.add_argument("--one-pdf", type=int, help=argparse.SUPPRESS)  # a child's own pages
    parser.add_argument("--step", default="read", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.one is not None:
        result = one(options.one, options.chunk_tokens, not options.no_trace)
        print("RESULT " + json.dumps(result))
        return
    if options.one_pdf is not None:
        result = one_pdf(options.one_pdf, options.step, options.chunk_tokens, not options.no_trace)
        print("RESULT " + json.dumps(result))
        return
    if options.pdf_pages:
        pdf_table(options)
        return
    print(f"chunk {options.chunk_tokens} tokens, trace {'off' if options.no_trace else 'on'}")
    print("| document MB | RSS before MB | peak RSS MB | peak - before MB | per document MB | s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in (float(s) for s in options.sizes.split(",")):
        command = [sys.executable, __file__, "--one", str(size)]
        command += ["--chunk-tokens", str(options.chunk_tokens)]
        command += ["--no-trace"] if options.no_trace else []
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        result = json.loads(output.split("RESULT ", 1)[1])
        grown = result["peak_mb"] - result["before_mb"]
        print(
            f"| {result['mb']:.0f} | {result['before_mb']:.0f} | {result['peak_mb']:.0f} | "
            f"{grown:.0f} | {grown / result['mb']:.2f} | {result['seconds']:.1f} |"
        )


def pdf_table(options: argparse.Namespace) -> None:
    """One row per page count and step, each measured in a fresh subprocess."""
    print(f"chunk {options.chunk_tokens} tokens, trace {'off' if options.no_trace else 'on'}")
    print("| pages | PDF MB | step | RSS before MB | peak RSS MB | peak - before MB | s |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for pages in (int(p) for p in options.pdf_pages.split(",")):
        for step in ("read", "ask"):
            command = [sys.executable, __file__, "--one-pdf", str(pages), "--step", step]
            command += ["--chunk-tokens", str(options.chunk_tokens)]
            command += ["--no-trace"] if options.no_trace else []
            output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            result = json.loads(output.split("RESULT ", 1)[1])
            grown = result["peak_mb"] - result["before_mb"]
            print(
                f"| {pages} | {result['mb']:.1f} | {step} | {result['before_mb']:.0f} | "
                f"{result['peak_mb']:.0f} | {grown:.0f} | {result['seconds']:.1f} |"
            )


if __name__ == "__main__":
    main()
