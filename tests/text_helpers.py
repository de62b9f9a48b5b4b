"""Test tokenizers and documents for the text tests (never used outside tests)."""

from __future__ import annotations

import random
import re
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

_TOKEN = re.compile(r"\w+|[^\w\s]")


class RegexTokenizer:
    """One token per word or punctuation mark; whitespace is free. Ids come from a growing
    vocabulary, so they are deterministic within one instance."""

    name = "regex-words"
    exact = True

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return [self.vocab.setdefault(t, len(self.vocab)) for t in _TOKEN.findall(text)]

    def count(self, text: str) -> int:
        return len(_TOKEN.findall(text))


class PenaltyTokenizer:
    """Adversarial: one token per character plus one more wherever a sentence end meets the
    next sentence (". "), so pieces cut at sentence ends under-count the joined text."""

    name = "penalty"
    exact = True

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text] + [0] * text.count(". ")

    def count(self, text: str) -> int:
        return len(text) + text.count(". ")


WORDS = [
    *("the", "of", "and", "to", "in", "is", "was", "that", "for", "on", "with", "as", "by"),
    *("at", "from", "this", "it", "be", "are", "an", "or", "which", "his", "her", "their"),
    *("memory", "agent", "reads", "chunk", "document", "question", "answer", "model", "token"),
    *("window", "river", "castle", "number", "seven", "garden", "letter"),
]


def sentence(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return " ".join(words).capitalize() + rng.choice([".", "!", "?", '."'])


def paragraph(rng: random.Random, n_sentences: int) -> str:
    return " ".join(sentence(rng, rng.randint(4, 20)) for _ in range(n_sentences))


def document(n_paragraphs: int, seed: int = 0, max_sentences: int = 8) -> str:
    """A deterministic pseudo-English document with blank-line separated paragraphs."""
    rng = random.Random(seed)
    body = "\n\n".join(paragraph(rng, rng.randint(1, max_sentences)) for _ in range(n_paragraphs))
    return body + "\n"


def train_bpe(folder: Path, vocab_size: int = 400, bos: bool = False) -> Path:
    """Train a tiny byte-level BPE (GPT-2 style pre-tokenizer) and save its tokenizer.json.

    With ``bos`` its post-processor adds a ``<s>`` token, which ``encode`` must leave out.
    """
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<unk>", "<s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Paragraph ends in the training data teach it a "\n\n" merge, so that a chunk ending in
    # "\n\n" and one where "\n\n" precedes a word tokenise differently, as in real models.
    text = document(400, seed=1)
    tokenizer.train_from_iterator([p + "\n\n" for p in text.split("\n\n")], trainer)
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))]
        )
    path = folder / "tokenizer.json"
    tokenizer.save(str(path))
    return path
