"""How fast a long document is chunked exactly with the embedded model's vocabulary (issue 11,
item 9): llama.cpp's tokenizer, one paragraph at a time (the old path), against the same
vocabulary through HF tokenizers, paragraphs counted in parallel batches (the path the
embedded backend now takes).

    .venv/bin/python bench/tokenize_speed.py [--tokens 3500000] [--chunk-tokens 5000]

The document is generated essay text (RULER's essay haystack generator: blank-line paragraphs
of 3-8 sentences). Both paths must give identical chunks; the script checks that and prints
tokens/s and seconds per path (the best of ``--repeat`` runs, after one warm-up).
"""

from __future__ import annotations

import argparse
import random
import time

from longread.data._haystack import WordStream
from longread.llm.gguf import bundled_gguf
from longread.text import LlamaCppTokenizer, Tokenizer, chunk_text
from longread.text.gguf_vocab import fast_tokenizer


def essay(tokens: int, tokenizer: Tokenizer) -> str:
    """Paragraphs of generated essay sentences, about ``tokens`` tokens in all."""
    stream, rng = WordStream.generated(7), random.Random(7)
    per_word = tokenizer.count(" ".join(stream.sentences(2000))) / 2000
    sentences = stream.sentences(int(tokens / per_word))  # sentences of that many words
    paragraphs, at = [], 0
    while at < len(sentences):
        size = rng.randint(3, 8)
        paragraphs.append(" ".join(sentences[at : at + size]))
        at += size
    return "\n\n".join(paragraphs) + "\n"


def timed(tokenizer: Tokenizer, text: str, chunk_tokens: int, repeat: int) -> tuple[float, list]:
    chunk_text(text[:200_000], tokenizer, chunk_tokens)  # warm-up
    best, chunks = float("inf"), []
    for _ in range(repeat):
        start = time.perf_counter()
        chunks = chunk_text(text, tokenizer, chunk_tokens)
        best = min(best, time.perf_counter() - start)
    return best, chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=3_500_000)
    parser.add_argument("--chunk-tokens", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    llama = LlamaCppTokenizer.from_gguf(bundled_gguf())
    fast = fast_tokenizer(bundled_gguf(), llama)
    if fast is None:
        raise SystemExit("the fast tokenizer disagrees with llama.cpp's on this vocabulary")
    text = essay(args.tokens, fast)
    print(f"document: {len(text):,} characters, chunks of at most {args.chunk_tokens} tokens")
    results = {}
    for name, tokenizer in (("llama.cpp, per paragraph", llama), ("hf tokenizers, batched", fast)):
        seconds, chunks = timed(tokenizer, text, args.chunk_tokens, args.repeat)
        total = sum(c.tokens for c in chunks)
        results[name] = chunks
        print(
            f"{name:26s} {total:>10,} tokens  {seconds:7.2f} s  {total / seconds:>12,.0f} tokens/s"
        )
    first, second = results.values()
    print("identical chunks:", first == second)


if __name__ == "__main__":
    main()
