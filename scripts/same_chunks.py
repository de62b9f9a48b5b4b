"""Whether the embedded model's fast exact tokenizer (on by default, issue 11) reads every
sample of some data sets exactly as llama.cpp's own tokenizer does: the same ids for every
context and question, and the same chunks for memagent (its planned chunk size) and rag (its
retrieval units). Agents see text only through chunks and counts, so where all of them agree
a run is the same with the speed option on or off: the results page's rows lose nothing by it.

    .venv/bin/python scripts/same_chunks.py DATA.jsonl [...] [--chunk-tokens 1000]
        [--memory-tokens 256] [--window 8192]

Prints one line per sample that differs, then a summary; exits 1 when any differs, 2 when
no fast tokenizer can be built for the bundled model (nothing to compare).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from longread.agents.baselines import RAGConfig
from longread.agents.memagent import MemAgentConfig, plan_memagent_chunk
from longread.data.loaders import iter_samples
from longread.data.records import Sample
from longread.llm.gguf import resolve_model_file
from longread.text import LlamaCppTokenizer, Tokenizer, chunk_text
from longread.text.gguf_vocab import fast_tokenizer


def reading(sample: Sample, tokenizer: Tokenizer, config: MemAgentConfig, window: int) -> dict:
    """Everything about ``sample`` that depends on the tokenizer."""
    plan = plan_memagent_chunk(tokenizer, window, config, sample.question)
    rag_tokens = RAGConfig().rag_chunk_tokens

    def texts(size: int) -> list[str]:
        return [chunk.text for chunk in chunk_text(sample.context, tokenizer, size)]

    return {
        "context ids": tokenizer.encode(sample.context),
        "question ids": tokenizer.encode(sample.question),
        "memagent chunk size": plan.chunk_tokens,
        "memagent chunks": texts(plan.chunk_tokens),
        "rag chunks": texts(rag_tokens),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="+", type=Path, help="JSONL data sets")
    parser.add_argument("--chunk-tokens", type=int, default=1000)
    parser.add_argument("--memory-tokens", type=int, default=256)
    parser.add_argument("--window", type=int, default=8192, help="the embedded model's window")
    args = parser.parse_args()
    gguf = resolve_model_file(None, None)  # the file the embedded backend loads
    llama = LlamaCppTokenizer.from_gguf(gguf)
    fast = fast_tokenizer(gguf, llama)
    if fast is None:
        print("no fast tokenizer for the bundled model: nothing to compare", file=sys.stderr)
        return 2
    config = MemAgentConfig(chunk_tokens=args.chunk_tokens, memory_tokens=args.memory_tokens)
    samples = differing = tokens = 0
    for path in args.data:
        for sample in iter_samples(path):
            samples += 1
            before = reading(sample, llama, config, args.window)
            after = reading(sample, fast, config, args.window)
            tokens += len(before["context ids"])
            differs = [what for what in before if before[what] != after[what]]
            if differs:
                differing += 1
                print(f"{path.name} {sample.id}: different {', '.join(differs)}")
    print(
        f"{samples - differing} of {samples} samples ({tokens:,} context tokens) read the same "
        f"with {fast.name} as with llama.cpp's own tokenizer"
    )
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
