"""The baselines every table needs (ALGORITHMS.md section 4): full context and BM25 RAG.

Both make exactly one call, an answer call like MemAgent's final one, and differ only in the
context they give it. ``FullContext`` sends the whole document, cut in the middle when it does
not fit the window (the head and the tail are kept: questions and needles sit at either end as
often as anywhere). ``RAG`` sends the BM25 top-k chunks for the question, in document order.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..citations import chunk_evidence
from ..errors import BudgetError, UsageError
from ..llm.base import Message, SamplingParams
from ..text.chunking import Chunk
from ..text.tokenizer import Tokenizer
from ..trace import DocumentCut, Retrieval, Step
from .answer import read_answer
from .base import AgentBase, CallContext, Document, Reading, prepare_chunks
from .budget import MIN_CHUNK_TOKENS, ChunkPlan, fixed_cost, plan_chunk
from .config import SamplingConfig
from .prompts import Prompts, render

# Cut size offered to callers that pre-cut files when the window is unknown: the full-context
# agent joins the chunks again, so only their number matters (few is cheaper).
UNBOUNDED_DOCUMENT_TOKENS = 1 << 20
# Re-tokenising the kept text inside the prompt can add a token or two at the joins; each retry
# shrinks the document budget by the overshoot measured on the whole prompt.
_FIT_ATTEMPTS = 4
# A cut that falls inside a word moves back to the whitespace before it when there is one this
# close; text without spaces (e.g. Chinese) keeps the token-boundary cut.
_SNAP_CHARS = 32
# NLTK's English list (179 words) rather than bm25s's default Lucene list (33 words): the short
# list keeps "what", "who", "which", "how", "about"..., which fill questions and match any text.
BM25_STOPWORDS = "en_plus"


@dataclass
class FullContextConfig(SamplingConfig):
    """Full-context baseline settings. Prompt file: full_answer.txt."""

    final_tokens: int = 1024  # max new tokens of the answer (kept free in the window)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_positive("final_tokens")


@dataclass
class RAGConfig(SamplingConfig):
    """BM25 retrieval baseline settings. Prompt file: rag_answer.txt."""

    rag_chunk_tokens: int = 512  # size of the retrieval units (shrunk to fit the window)
    rag_k: int = 4  # chunks retrieved; fewer when k chunks do not fit the window
    final_tokens: int = 1024  # max new tokens of the answer (kept free in the window)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_positive("rag_chunk_tokens", "final_tokens")
        if self.rag_k < 1:
            raise UsageError("rag_k must be at least 1")


# --- the answer call both baselines share ---------------------------------------------------------


async def answer_step(
    ctx: CallContext, params: SamplingParams, messages: list[Message], **extra: Any
) -> Step:
    """The one call of a baseline; the answer is the last \\boxed{} (else the whole reply,
    flagged), as in MemAgent's final step."""
    ctx.expected_calls = 1
    record = await ctx.call("final", 0, messages, params, **extra)
    return read_answer(record)


def document_text(document: Document) -> str:
    """The document as one string: pre-cut chunks are joined back (the cut is lossless)."""
    text = document if isinstance(document, str) else "".join(c.text for c in document)
    if not text.strip():
        raise UsageError("the document is empty")
    return text


def _first_offset(document: Document) -> int:
    """Where the document's text starts: pre-cut chunks may be a later part of a file."""
    return 0 if isinstance(document, str) or not document else document[0].start


# --- full context ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MiddleCut:
    """A document with its middle cut out: ``cut_tokens`` of ``total_tokens`` are gone."""

    text: str
    total_tokens: int | None  # None when not counted (no window to fit)
    cut_tokens: int


def omission_marker(tokens: int) -> str:
    return f"\n\n[... {tokens} tokens omitted ...]\n\n"


def middle_truncate(text: str, tokenizer: Tokenizer, max_tokens: int) -> MiddleCut:
    """``text`` if it has at most ``max_tokens`` tokens, else its head and tail around an
    omission marker, the whole counting at most ``max_tokens``.

    Head and tail each get half of what the marker leaves. Tokenizers with ``decode`` cut on
    token boundaries; others cut characters, sized from the document's characters per token.
    Either way the pieces are counted and shrunk until they fit.
    """
    return _middle_truncate(text, tokenizer, max_tokens, _Encoded.of(text, tokenizer))


@dataclass(frozen=True)
class _Encoded:
    total: int
    ids: list[int] | None  # only when the tokenizer can decode them

    @classmethod
    def of(cls, text: str, tokenizer: Tokenizer) -> _Encoded:
        if callable(getattr(tokenizer, "decode", None)):
            ids = tokenizer.encode(text)
            return cls(len(ids), ids)
        return cls(tokenizer.count(text), None)


def _middle_truncate(
    text: str, tokenizer: Tokenizer, max_tokens: int, encoded: _Encoded
) -> MiddleCut:
    if encoded.total <= max_tokens:
        return MiddleCut(text, encoded.total, 0)
    keep = max_tokens - tokenizer.count(omission_marker(encoded.total))
    if keep < 2:
        raise ValueError(f"max_tokens={max_tokens} leaves no room next to the omission marker")
    for _ in range(_FIT_ATTEMPTS):
        head = _end_piece(text, tokenizer, keep - keep // 2, encoded, tail=False)
        tail = _end_piece(text, tokenizer, keep // 2, encoded, tail=True)
        cut = encoded.total - tokenizer.count(head) - tokenizer.count(tail)
        kept = head + omission_marker(cut) + tail
        overshoot = tokenizer.count(kept) - max_tokens
        if overshoot <= 0:
            return MiddleCut(kept, encoded.total, cut)
        keep -= overshoot
    raise BudgetError(f"could not cut the document to {max_tokens} tokens")


def _end_piece(text: str, tokenizer: Tokenizer, n: int, encoded: _Encoded, *, tail: bool) -> str:
    """About ``n`` tokens (never more) from the start of ``text``, or from its end."""
    if n <= 0:
        return ""
    if encoded.ids is not None:
        ids = encoded.ids[-n:] if tail else encoded.ids[:n]
        decoded: str = tokenizer.decode(ids)  # type: ignore[attr-defined]
        # A cut inside a multi-byte character decodes to replacement characters.
        source = decoded.strip("\ufffd")
        size = len(source)
    else:
        source = text
        size = len(text) * n // encoded.total
    return _snap_to_space(_fit_chars(source, tokenizer, n, size, tail=tail), tail=tail)


def _fit_chars(source: str, tokenizer: Tokenizer, n: int, size: int, *, tail: bool) -> str:
    """The longest piece found from one end of ``source`` with at most ``n`` tokens, searching
    piece lengths proportionally from ``size`` characters."""
    best = ""
    size = min(max(size, 1), len(source))
    for _ in range(8):
        piece = source[-size:] if tail else source[:size]
        tokens = tokenizer.count(piece)
        if tokens <= n:
            best = max(best, piece, key=len)
            if tokens >= n - max(1, n // 100) or size == len(source):
                break
            size = min(len(source), max(size + 1, size * n // max(tokens, 1)))
        else:
            size = min(size - 1, size * n // tokens)
        if size <= len(best):
            break
    return best


def _snap_to_space(piece: str, *, tail: bool) -> str:
    """Drop the partial word at the cut edge of ``piece`` when whitespace is near."""
    if tail:
        match = re.search(r"\s", piece[:_SNAP_CHARS])
        return piece[match.end() :].lstrip() if match else piece
    edge = piece[-_SNAP_CHARS:]
    spaces = [m.start() for m in re.finditer(r"\s", edge)]
    return piece[: len(piece) - len(edge) + spaces[-1]].rstrip() if spaces else piece


def full_messages(question: str, document: str, prompts: Prompts | None) -> list[Message]:
    """The full-context conversation: problem, document, instruction to answer in \\boxed{}."""
    text = render("full_answer", prompts, question=question, document=document)
    return [{"role": "user", "content": text}]


def full_document_room(
    tokenizer: Tokenizer, window: int | None, config: FullContextConfig, question: str
) -> int | None:
    """Tokens the document may take in the prompt; None when the window is unknown."""
    if window is None:
        return None
    empty = tokenizer.count(full_messages(question, "", config.prompts)[0]["content"])
    room = window - fixed_cost(window) - empty - config.final_tokens
    if room < MIN_CHUNK_TOKENS:
        raise BudgetError(
            f"a {window}-token window leaves {max(room, 0)} tokens for the document (question "
            f"and {config.final_tokens} answer tokens take the rest); use a shorter question, "
            "smaller --final-tokens, or a model with a larger window"
        )
    return room


def fit_full_document(
    tokenizer: Tokenizer, window: int | None, config: FullContextConfig, question: str, text: str
) -> MiddleCut:
    """The document, middle-truncated so that the whole prompt plus the answer fits ``window``
    (measured on the rendered prompt, not estimated)."""
    room = full_document_room(tokenizer, window, config, question)
    if window is None or room is None:
        return MiddleCut(text, None, 0)  # nothing to fit: not worth counting a huge document
    encoded = _Encoded.of(text, tokenizer)
    for _ in range(_FIT_ATTEMPTS):
        cut = _middle_truncate(text, tokenizer, room, encoded)
        prompt = full_messages(question, cut.text, config.prompts)[0]["content"]
        overshoot = tokenizer.count(prompt) + config.final_tokens + fixed_cost(window) - window
        if overshoot <= 0:
            return cut
        room -= overshoot
    raise BudgetError(f"could not fit the document into the {window}-token window")


class FullContext(AgentBase[FullContextConfig]):
    """The whole document in one prompt, middle-truncated to the window."""

    name = "full"

    config_class = FullContextConfig

    def plan(self, question: str) -> ChunkPlan:
        """The document budget. Callers that pre-cut a file may use it as the chunk size:
        ``run`` joins the chunks again, whatever their size."""
        room = full_document_room(
            self.tokenizer, self.backend.context_window, self.config, question
        )
        size = UNBOUNDED_DOCUMENT_TOKENS if room is None else room
        return ChunkPlan(size, size, self.backend.context_window)

    async def read(self, ctx: CallContext, question: str, document: Document) -> Reading:
        text = document_text(document)
        window = self.backend.context_window
        cut = await asyncio.to_thread(
            fit_full_document, self.tokenizer, window, self.config, question, text
        )
        messages = full_messages(question, cut.text, self.config.prompts)
        params = self.config.params(self.config.final_tokens)
        record = await answer_step(
            ctx, params, messages, cut=DocumentCut(cut.cut_tokens, cut.total_tokens)
        )
        # The whole document is one "chunk" here; only what survived the cut can be cited.
        whole = [Chunk(0, text, 0, _first_offset(document))]
        evidence = chunk_evidence(record.answer or "", question, whole, seen=cut.text)
        notes = []
        if cut.cut_tokens:
            notes.append(
                f"document middle-truncated: {cut.cut_tokens} of {cut.total_tokens} tokens cut "
                f"to fit the {window}-token window"
            )
        return Reading([record], {"document_tokens": cut.total_tokens}, notes, evidence)


# --- BM25 retrieval -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranking:
    """Chunk positions, best first. ``fallback`` says why BM25 could not rank (the order is
    then the document's)."""

    order: list[int]
    fallback: str | None = None


def rank_chunks(question: str, chunks: Sequence[Chunk]) -> Ranking:
    """Rank ``chunks`` by BM25 (Lucene variant, English stopwords removed) against ``question``.

    Equal scores keep document order. When the question has no searchable term, or none of
    its terms occurs in the document, every score is 0 and the ranking is the document order.
    """
    import bm25s  # only this baseline needs it

    in_order = list(range(len(chunks)))
    query = _bm25_terms(bm25s, [question])[0]
    if not query:
        return Ranking(
            in_order, "the question has no searchable term (only stopwords and one-letter words)"
        )
    corpus = _bm25_terms(bm25s, [c.text for c in chunks])
    vocabulary = {term for terms in corpus for term in terms}
    if not vocabulary.intersection(query):
        return Ranking(in_order, "no term of the question occurs in the document")
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    scores = retriever.get_scores(query)
    # Full scores rather than retrieve(): a stable sort makes ties deterministic.
    return Ranking(sorted(in_order, key=lambda i: -float(scores[i])))


def _bm25_terms(bm25s: Any, texts: list[str]) -> list[list[str]]:
    terms: list[list[str]] = bm25s.tokenize(
        texts, stopwords=BM25_STOPWORDS, return_ids=False, show_progress=False
    )
    return terms


def passage_text(chunk: Chunk) -> str:
    return f"[Passage {chunk.index + 1}]\n{chunk.text.strip()}"


def rag_messages(question: str, chunks: Sequence[Chunk], prompts: Prompts | None) -> list[Message]:
    """The RAG conversation: problem, passages (as given), instruction to answer in \\boxed{}."""
    passages = "\n\n".join(passage_text(c) for c in chunks)
    text = render("rag_answer", prompts, question=question, passages=passages)
    return [{"role": "user", "content": text}]


def plan_rag_chunk(
    tokenizer: Tokenizer, window: int | None, config: RAGConfig, question: str
) -> ChunkPlan:
    """Retrieval unit size for this question: at least one passage must fit next to it."""
    empty = tokenizer.count(rag_messages(question, [], config.prompts)[0]["content"])
    header = tokenizer.count(passage_text(Chunk(10**6, "", 0)))
    try:
        return plan_chunk(
            window=window,
            requested=config.rag_chunk_tokens,
            prompt_tokens_without_chunk=empty + header,
            max_new_tokens=config.final_tokens,
        )
    except BudgetError:
        raise BudgetError(
            f"a {window}-token window cannot hold the question, one passage and "
            f"{config.final_tokens} answer tokens; use a shorter question, smaller "
            "--final-tokens, or a model with a larger window"
        ) from None


@dataclass(frozen=True)
class Selection:
    """What RAG sends: the retrieved chunks best first, and the prompt (document order)."""

    ranked: list[Chunk]
    messages: list[Message]
    wanted: int  # min(rag_k, number of chunks); more than len(ranked) when the window was short


def select_chunks(
    tokenizer: Tokenizer,
    window: int | None,
    config: RAGConfig,
    question: str,
    chunks: Sequence[Chunk],
    ranking: Ranking,
) -> Selection:
    """The best-ranked chunks (at most ``rag_k``) whose prompt fits the window: when all k do
    not, the lowest-ranked are dropped until the rendered prompt fits."""
    wanted = min(config.rag_k, len(chunks))
    top = [chunks[i] for i in ranking.order[:wanted]]
    for used in range(wanted, 0, -1):
        ranked = top[:used]
        in_order = sorted(ranked, key=lambda c: c.index)
        messages = rag_messages(question, in_order, config.prompts)
        if window is None:
            return Selection(ranked, messages, wanted)
        prompt = tokenizer.count(messages[0]["content"])
        if prompt + config.final_tokens + fixed_cost(window) <= window:
            return Selection(ranked, messages, wanted)
    raise BudgetError(f"not even one retrieved passage fits the {window}-token window")


class RAG(AgentBase[RAGConfig]):
    """BM25 top-k chunks for the question, in document order, then one answer call.

    The step's ``retrieval.chunks`` lists the chunk indices best first.
    """

    name = "rag"

    config_class = RAGConfig

    def plan(self, question: str) -> ChunkPlan:
        """The retrieval unit size (``rag_chunk_tokens``, shrunk if the window needs it)."""
        return plan_rag_chunk(self.tokenizer, self.backend.context_window, self.config, question)

    async def read(self, ctx: CallContext, question: str, document: Document) -> Reading:
        plan = self.plan(question)
        # Pre-cut chunks are re-cut: the retrieval unit is this agent's own setting.
        chunks = await prepare_chunks(document_text(document), self.tokenizer, plan.chunk_tokens)
        ranking, selection = await asyncio.to_thread(self._retrieve, question, chunks)
        record = await answer_step(
            ctx,
            self.config.params(self.config.final_tokens),
            selection.messages,
            retrieval=Retrieval([c.index for c in selection.ranked]),
        )
        used = {
            "chunk_tokens_used": plan.chunk_tokens,
            "chunks": len(chunks),
            "k_used": len(selection.ranked),
        }
        retrieved = [c.index for c in selection.ranked]
        evidence = chunk_evidence(record.answer or "", question, chunks, only=retrieved)
        notes = self._notes(plan, len(chunks), ranking, selection)
        return Reading([record], used, notes, evidence)

    def _retrieve(self, question: str, chunks: Sequence[Chunk]) -> tuple[Ranking, Selection]:
        ranking = rank_chunks(question, chunks)
        window = self.backend.context_window
        return ranking, select_chunks(
            self.tokenizer, window, self.config, question, chunks, ranking
        )

    def _notes(
        self, plan: ChunkPlan, n_chunks: int, ranking: Ranking, selection: Selection
    ) -> list[str]:
        notes = [note] if (note := plan.note()) else []
        used, k = len(selection.ranked), self.config.rag_k
        if ranking.fallback:
            notes.append(f"{ranking.fallback}: answered from the first {used} chunk(s)")
        if n_chunks < k:
            notes.append(f"the document has only {n_chunks} chunk(s), fewer than rag_k={k}")
        if used < selection.wanted:
            notes.append(
                f"only {used} of the top {selection.wanted} chunks fit the "
                f"{self.backend.context_window}-token window"
            )
        return notes
