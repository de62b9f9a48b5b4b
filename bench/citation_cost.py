"""What citations cost: the alignment work a memory agent does per update, without a model.

    .venv/bin/python bench/citation_cost.py [--chunk-chars 4000] [--notes 12] [--updates 200]

Replays ``--updates`` memory updates through ``Provenance.on_update`` as a memagent run makes
them: each update reads a chunk of ``--chunk-chars`` characters (about 1,000 tokens at 4,000;
the papers' 5,000 tokens are about 20,000) and leaves a memory of ``--notes`` notes, of which
one is new (a sentence copied from the chunk, reworded) and the rest carried over. Then the
final evidence search. Prints milliseconds per update and for the evidence, to set beside a
model call (about 10 s per 1,000-token update on the bundled model on this CPU).
"""

from __future__ import annotations

import argparse
import random
import time

from longread.citations import Provenance, memory_evidence
from longread.text.chunking import Chunk

WORDS = [
    "grass",
    "river",
    "meadow",
    "stone",
    "bird",
    "quiet",
    "tall",
    "sang",
    "over",
    "under",
    "light",
    "field",
]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))).capitalize() + "."


def chunk_text(rng: random.Random, chars: int, fact: str) -> str:
    sentences: list[str] = []
    while sum(len(s) + 1 for s in sentences) < chars:
        sentences.append(sentence(rng))
    sentences.insert(rng.randrange(len(sentences)), fact)
    return " ".join(sentences)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunk-chars", type=int, default=4000)
    parser.add_argument("--notes", type=int, default=12)
    parser.add_argument("--updates", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(0)
    provenance, notes, chunks = Provenance(), [], []
    start, spent = 0, 0.0
    for index in range(args.updates):
        fact = f"The code of vault {index} is {rng.randrange(10**6, 10**7)}."
        chunk = Chunk(index, chunk_text(rng, args.chunk_chars, fact), 0, start)
        start += len(chunk.text)
        chunks.append(chunk)
        old = "\n".join(notes)
        notes = [*notes[-(args.notes - 1) :], fact.replace("The code", "Code")]
        clock = time.perf_counter()
        provenance.on_update(old, "\n".join(notes), chunk)
        spent += time.perf_counter() - clock
    answer = notes[-1].split()[-1].rstrip(".")
    clock = time.perf_counter()
    evidence = memory_evidence(answer, "What is the code of the last vault?", "\n".join(notes),
                               provenance, chunks)  # fmt: skip
    final = time.perf_counter() - clock
    print(f"chunk {args.chunk_chars} chars, {args.notes} notes, {args.updates} updates")
    print(f"alignment per update: {1000 * spent / args.updates:.2f} ms")
    print(f"final evidence: {1000 * final:.2f} ms, {len(evidence.citations)} citation(s)")


if __name__ == "__main__":
    main()
