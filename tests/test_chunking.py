import asyncio
import itertools
import random
import string
import time
import tracemalloc

import pytest

from longread.errors import UsageError
from longread.text import (
    ApproxTokenizer,
    Chunk,
    HFTokenizer,
    achunk_file,
    chunk_text,
    iter_chunks,
    iter_paragraphs,
    read_document,
)

from .text_helpers import PenaltyTokenizer, RegexTokenizer, document, train_bpe

SENTENCE_ENDS = (".", "!", "?", '"')


@pytest.fixture(scope="module")
def bpe(tmp_path_factory) -> HFTokenizer:
    return HFTokenizer.from_path(train_bpe(tmp_path_factory.mktemp("bpe")))


def sentence(tokens: int, word: str = "word") -> str:
    """A sentence of exactly ``tokens`` RegexTokenizer tokens (words plus the full stop)."""
    return " ".join([word] * (tokens - 1)) + "."


def paragraph(sentences: int, tokens_each: int) -> str:
    return " ".join(sentence(tokens_each) for _ in range(sentences))


def check(chunks: list[Chunk], text: str, tokenizer, max_tokens: int) -> None:
    """The invariants every chunking must hold."""
    assert "".join(c.text for c in chunks) == text
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text
        assert chunk.tokens == tokenizer.count(chunk.text) <= max_tokens


# --- where the cuts fall ---------------------------------------------------------------------


def test_cuts_at_paragraph_ends_and_counts_chunks():
    tok = RegexTokenizer()
    text = "\n\n".join(paragraph(2, 15) for _ in range(30)) + "\n"
    chunks = chunk_text(text, tok, max_tokens=100)
    check(chunks, text, tok, 100)
    assert len(chunks) == 10  # three 30-token paragraphs fill 90 >= 80 tokens; a fourth won't fit
    assert [c.tokens for c in chunks] == [90] * 10
    # The separator travels with the next paragraph, so each chunk ends on a paragraph's text.
    assert all(c.text.endswith(".") for c in chunks[:-1])
    assert all(c.text.startswith("\n\nword") for c in chunks[1:])
    assert chunks[-1].text.endswith(".\n")


def test_sentence_cut_when_no_paragraph_end_is_near():
    tok = RegexTokenizer()
    text = "\n\n".join(paragraph(4, 15) for _ in range(6))  # 60-token paragraphs
    chunks = chunk_text(text, tok, max_tokens=100)
    check(chunks, text, tok, 100)
    # 60 < 80 at the first paragraph end, so the chunk goes on to a sentence end at 90.
    assert chunks[0].tokens == 90
    assert chunks[0].text.endswith(".")
    assert chunks[1].text.startswith(" word")


def test_min_fill_decides_between_paragraph_and_word_cut():
    tok = RegexTokenizer()
    text = "\n\n".join(paragraph(3, 15) for _ in range(4))  # 45-token paragraphs
    at_paragraph = chunk_text(text, tok, max_tokens=100, min_fill=0.8)
    assert at_paragraph[0].tokens == 90
    assert at_paragraph[1].text.startswith("\n\n")
    # Demanding 95% rules out the paragraph end (90) and every sentence end (90 again), so the
    # chunk is filled word by word.
    filled = chunk_text(text, tok, max_tokens=100, min_fill=0.95)
    check(filled, text, tok, 100)
    assert filled[0].tokens == 100
    assert filled[1].text.startswith(" word")


def test_huge_paragraph_is_cut_at_sentence_ends():
    tok = RegexTokenizer()
    text = paragraph(100, 15)
    chunks = chunk_text(text, tok, max_tokens=100)
    check(chunks, text, tok, 100)
    assert len(chunks) == 17  # six sentences (90 tokens) per chunk
    assert all(c.tokens == 90 for c in chunks[:-1])
    assert all(c.text.endswith(".") for c in chunks)


def test_giant_sentence_is_cut_between_words():
    tok = RegexTokenizer()
    text = " ".join(f"w{i}" for i in range(1000))
    chunks = chunk_text(text, tok, max_tokens=100)
    check(chunks, text, tok, 100)
    assert [c.tokens for c in chunks] == [100] * 10
    assert all(c.text.startswith(" w") for c in chunks[1:])


def test_text_without_whitespace_is_cut_between_characters(bpe):
    rng = random.Random(0)
    text = "".join(rng.choice(string.ascii_lowercase) for _ in range(20_000))
    chunks = chunk_text(text, bpe, max_tokens=50)
    check(chunks, text, bpe, 50)
    # Halving goes on to single characters, so chunks are full, not just min_fill full.
    assert all(c.tokens >= 48 for c in chunks[:-1])


def test_text_without_whitespace_with_approximate_counts():
    tok = ApproxTokenizer()
    text = "x" * 100_000
    chunks = chunk_text(text, tok, max_tokens=1000)
    check(chunks, text, tok, 1000)
    assert [c.tokens for c in chunks[:-1]] == [1000] * (len(chunks) - 1)
    assert len(chunks) <= 26  # ceil() over-counts pieces a little; the recount wins it back


# --- exactness -------------------------------------------------------------------------------


@pytest.mark.parametrize("max_tokens", [16, 64, 300, 2000])
def test_real_bpe_counts_are_exact(bpe, max_tokens):
    text = "\n\n\n" + document(300, seed=max_tokens) + "\n\n"
    chunks = chunk_text(text, bpe, max_tokens=max_tokens)
    check(chunks, text, bpe, max_tokens)
    if max_tokens >= 300:
        assert min(c.tokens for c in chunks[:-1]) >= 0.8 * max_tokens


@pytest.mark.parametrize("max_tokens", [300, 2000])
def test_paragraph_end_wins_whenever_it_is_in_the_min_fill_window(bpe, max_tokens):
    text = document(300, seed=7)
    chunks = chunk_text(text, bpe, max_tokens=max_tokens)
    check(chunks, text, bpe, max_tokens)
    window = 0.8 * max_tokens
    mid_paragraph = 0
    for chunk, after in itertools.pairwise(chunks):
        if after.text.startswith("\n\n"):
            continue  # cut at a paragraph end
        mid_paragraph += 1
        last_end = chunk.text.rfind("\n\n")
        if last_end > 0:  # then the chunk was less than min_fill full at that paragraph end
            assert bpe.count(chunk.text[:last_end]) < window + 2
        # and the cut still fell at a sentence end
        assert chunk.text.endswith(SENTENCE_ENDS)
    if max_tokens == 2000:
        assert mid_paragraph <= 0.2 * len(chunks)


def test_pieces_that_count_more_together_are_moved_to_the_next_chunk():
    # Every ". " costs one extra token, which only the joined text shows.
    tok = PenaltyTokenizer()
    text = " ".join(f"Sentence number {i}." for i in range(300))
    chunks = chunk_text(text, tok, max_tokens=200)
    check(chunks, text, tok, 200)
    assert sum(tok.count(c.text) for c in chunks) > len(text)  # the penalty did apply


def test_each_paragraph_is_tokenised_about_once(bpe):
    text = document(400, seed=5)
    calls = []

    class Counting:
        name = "counting"

        def encode(self, piece: str) -> list[int]:
            return bpe.encode(piece)

        def count(self, piece: str) -> int:
            calls.append(len(piece))
            return bpe.count(piece)

    chunks = chunk_text(text, Counting(), max_tokens=1000)
    check(chunks, text, bpe, 1000)
    # Paragraphs once, each chunk once more, plus the sentences of the paragraphs at the cuts.
    assert sum(calls) < 2.5 * len(text)


class OneAtATime:
    """``tokenizer``'s counts one text at a time, nothing else: how a chunk is counted when no
    guess is made."""

    def __init__(self, tokenizer) -> None:
        self.name = "one-at-a-time"
        self.tokenizer = tokenizer
        self.round_trips: list[int] = []  # one entry a call (append is thread-safe)
        self.counted: list[int] = []  # the characters counted, one entry a text

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def count(self, text: str) -> int:
        self.round_trips.append(1)
        self.counted.append(len(text))
        return self.tokenizer.count(text)


class Batched(OneAtATime):
    """Counts as a server does: many texts in one round trip (``count_many``), and no word on
    which joins are clean (no ``cuts_between``), so every chunk is counted as a whole."""

    name = "batched"

    def count_many(self, texts: list[str]) -> list[int]:
        self.round_trips.append(len(texts))
        self.counted.extend(len(text) for text in texts)
        return [self.tokenizer.count(text) for text in texts]


class JoinPenalty:
    """One token a word, plus one wherever a paragraph's end meets the next paragraph: the
    paragraphs' counts add up to less than their chunk's, so every guessed chunk is wrong."""

    name = "join-penalty"

    def encode(self, text: str) -> list[int]:
        return [0] * self.count(text)

    def count(self, text: str) -> int:
        return len(text.split()) + text.count(".\n\n")


def test_chunks_guessed_ahead_are_counted_in_few_round_trips(bpe):
    # A server tokenizer counts each chunk as a whole: guessed from the paragraphs' counts,
    # several chunks go in one round trip with the chunk the packer needs now.
    text = document(2000, seed=4)
    paragraphs = text.count("\n\n") + 1
    batched, alone = Batched(bpe), OneAtATime(bpe)
    chunks = chunk_text(text, batched, max_tokens=1000)
    assert chunks == chunk_text(text, alone, max_tokens=1000)
    check(chunks, text, bpe, 1000)
    assert len(alone.round_trips) >= paragraphs + len(chunks) - 1  # the last is not counted
    assert len(batched.round_trips) < len(chunks) / 2


def test_wrong_guesses_cost_little_and_never_exactness():
    tok = JoinPenalty()
    text = "\n\n".join(" ".join(f"Sentence {i}." for i in range(j, j + 5)) for j in range(2000))
    batched, alone = Batched(tok), OneAtATime(tok)
    chunks = chunk_text(text, batched, max_tokens=300)
    assert chunks == chunk_text(text, alone, max_tokens=300)
    check(chunks, text, tok, 300)
    # After a round of guesses that all missed, one chunk is guessed at a time: the text sent
    # for counting stays near what counting without guesses sends (8 guesses each time: 3.3x).
    assert sum(batched.counted) < 1.5 * sum(alone.counted)


# --- edge cases ------------------------------------------------------------------------------


def test_empty_and_whitespace_only_text():
    tok = RegexTokenizer()
    assert chunk_text("", tok) == []
    assert chunk_text("\n\n \n", tok) == [Chunk(0, "\n\n \n", 0)]


def test_leading_blank_lines_join_the_first_paragraph():
    tok = RegexTokenizer()
    text = "\n\n\nTitle\n\n" + paragraph(3, 15)
    chunks = chunk_text(text, tok, max_tokens=30)
    check(chunks, text, tok, 30)
    assert chunks[0].text.startswith("\n\n\nTitle")


def test_max_tokens_smaller_than_one_character():
    with pytest.raises(UsageError, match="too small"):
        chunk_text("abc", ApproxTokenizer(chars_per_token=0.25), max_tokens=3)


@pytest.mark.parametrize(("max_tokens", "min_fill"), [(0, 0.8), (10, -0.1), (10, 1.5)])
def test_bad_arguments(max_tokens, min_fill):
    with pytest.raises(ValueError):
        chunk_text("text", RegexTokenizer(), max_tokens, min_fill)


def test_iter_chunks_refuses_a_plain_string():
    with pytest.raises(TypeError, match="chunk_text"):
        next(iter_chunks("some text", RegexTokenizer()))


@pytest.mark.parametrize("min_fill", [0.0, 1.0])
def test_extreme_min_fill_still_holds_the_invariants(bpe, min_fill):
    text = document(50, seed=9)
    check(chunk_text(text, bpe, 120, min_fill), text, bpe, 120)


# --- streaming -------------------------------------------------------------------------------


def test_chunks_come_out_before_the_input_ends():
    endless = (paragraph(2, 10) + "\n\n" for _ in itertools.count())
    first = list(itertools.islice(iter_chunks(endless, RegexTokenizer(), 100), 3))
    assert [c.index for c in first] == [0, 1, 2]


def test_large_file_is_chunked_without_being_held_in_memory(tmp_path):
    path = tmp_path / "big.txt"
    block = document(200, seed=2)
    with path.open("w") as file:
        for _ in range(20_000_000 // len(block) + 1):
            file.write(block)
    size = path.stat().st_size
    tokenizer = ApproxTokenizer()
    tracemalloc.start()
    try:
        n_chars = n_chunks = 0
        for chunk in iter_chunks(iter_paragraphs(read_document(path)), tokenizer, 5000):
            n_chars += len(chunk.text)
            n_chunks += 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size >= 20_000_000
    assert n_chars == size  # ASCII: one character per byte
    assert n_chunks >= size // (5000 * 4)
    # A 1 MiB block, its decoded text and the paragraphs cut from it; never the whole file.
    assert peak < 10_000_000, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.0f} MB file"


async def test_async_chunking_does_not_block_the_event_loop(tmp_path, bpe):
    path = tmp_path / "doc.txt"
    text = document(30000, seed=4)  # long enough to take many ticks of the loop
    path.write_text(text)
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    ticking = asyncio.create_task(ticker())
    start = time.perf_counter()
    chunks = await achunk_file(path, bpe, max_tokens=500)
    elapsed = time.perf_counter() - start
    done.set()
    await ticking
    check(chunks, text, bpe, 500)
    assert elapsed > 0.1  # enough work for the check below to mean something
    assert ticks >= 10  # a blocked loop would tick once, after the chunking


async def test_async_chunking_reports_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        await achunk_file(tmp_path / "missing.txt", RegexTokenizer())
