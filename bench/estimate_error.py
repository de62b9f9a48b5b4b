"""How far the 4-characters-per-token estimate is from a real tokenizer's count (issue 11,
item 1): the numbers behind ``ESTIMATE_TOLERANCE`` in ``longread.llm.base``.

    .venv/bin/python bench/estimate_error.py [--hotpotqa PATH]

Counts real text with the embedded model's vocabulary (SmolLM2, read from the bundled GGUF
without its weights) and with ``ApproxTokenizer``, and prints the ratio real / estimate over
single paragraphs, whole documents, chunks of 500, 1,000 and 5,000 tokens, and MemAgent update
prompts holding those chunks. A ratio under 1 is a real count below the estimate: what a
server honestly reporting fewer prompt tokens than longread estimated looks like. Text comes
from ``examples/`` and HotpotQA dev questions in the official JSON: by default the excerpt
shipped with the tests (8 questions, ``tests/data/``); pass ``--hotpotqa`` a larger sample (the
numbers in ``longread.llm.base`` came from 100 questions) for tighter percentiles.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from longread.agents.memagent import update_messages
from longread.llm.gguf import bundled_gguf
from longread.text import ApproxTokenizer, LlamaCppTokenizer, chunk_text

ROOT = Path(__file__).resolve().parent.parent
HOTPOTQA_EXCERPT = ROOT / "tests" / "data" / "hotpotqa_dev_excerpt.json"


def ratios(exact: LlamaCppTokenizer, texts: list[str]) -> str:
    approx = ApproxTokenizer()
    found = sorted(exact.count(t) / approx.count(t) for t in texts if t.strip())
    return (
        f"n={len(found):4d}  min {found[0]:.3f}  1st percentile {found[len(found) // 100]:.3f}  "
        f"median {statistics.median(found):.3f}  max {found[-1]:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hotpotqa", type=Path, default=HOTPOTQA_EXCERPT)
    options = parser.parse_args()
    exact = LlamaCppTokenizer.from_gguf(bundled_gguf())
    records = json.loads(options.hotpotqa.read_text())
    paragraphs = [title + "\n" + "".join(s) for r in records for title, s in r["context"]]
    documents = [
        "\n\n".join(title + "\n" + "".join(s) for title, s in r["context"]) for r in records
    ]
    print("HotpotQA paragraphs  ", ratios(exact, paragraphs))
    print("HotpotQA documents   ", ratios(exact, documents))
    joined = "\n\n".join(documents)
    questions = [r["question"] for r in records]
    for size in (500, 1000, 5000):
        chunks = [c.text for c in chunk_text(joined, exact, size)]
        prompts = [
            update_messages(questions[i % len(questions)], "No previous memory", chunk, None)
            for i, chunk in enumerate(chunks)
        ]
        print(f"chunks of {size:>4} tokens", ratios(exact, chunks))
        print(f"prompts of {size:>4}    ", ratios(exact, [p[0]["content"] for p in prompts]))
    needle = (ROOT / "examples" / "needle.txt").read_text()
    print("examples/needle.txt  ", ratios(exact, [c.text for c in chunk_text(needle, exact, 1000)]))


if __name__ == "__main__":
    main()
