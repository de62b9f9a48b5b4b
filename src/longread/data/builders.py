"""Evaluation sets built from source data: RULER-HQA (HotpotQA questions padded with other
questions' paragraphs, ALGORITHMS §6) by document count or by token length, and the RULER
synthetic tasks (re-exported from :mod:`.ruler`).

Questions are taken in the order the records give them, not shuffled: every size of a sweep
then asks the same questions, so accuracy against length compares like with like (MemAgent
keeps its 128 questions fixed across 7K ... 3.5M). Pass records already filtered and ordered.
Each question's distractors and document order come from a RNG seeded by ``(dataset, seed,
question id)``, so a sample does not depend on ``n`` or on the other questions asked.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..errors import UsageError
from ..text.tokenizer import Tokenizer
from ._fit import largest_fitting
from .hotpotqa import (
    DocumentPicker,
    HotpotQuestion,
    Paragraph,
    distractor_pool,
    parse_hotpot_records,
    render_documents,
)
from .records import Sample
from .ruler import RULER_TASKS, build_ruler

__all__ = ["RULER_TASKS", "build_hotpotqa", "build_hotpotqa_to_length", "build_ruler"]


def build_hotpotqa(
    records: Sequence[Mapping[str, Any]],
    docs: int,
    n: int,
    seed: int,
    *,
    dataset: str = "hotpotqa",
    exclude: Collection[str] = (),
) -> list[Sample]:
    """RULER-HQA with ``docs`` documents per question, for the first ``n`` records whose id
    is not in ``exclude`` (RULER-HQA leaves out questions answerable without the context).

    ``records`` are official HotpotQA (or 2WikiMultihopQA) dev records. Each context holds the
    question's own paragraphs (gold and HotpotQA's distractors; when ``docs`` is smaller, the
    gold ones and a seeded choice of the rest) plus paragraphs of the other records, never one
    whose title is already there, so each gold paragraph appears exactly once. Documents are
    shuffled and rendered ``Document i:\\n<title>\\n<text>``, joined by blank lines.
    """
    if docs < 1:
        raise UsageError(f"docs must be at least 1, not {docs}")
    questions, pool = _questions(records, n, exclude)
    samples = []
    for q in questions:
        picker = DocumentPicker(q, pool, _seed_key(dataset, seed, q.id))
        if docs < len(q.paragraphs):
            own = picker.own_subset(docs, _seed_key(dataset, seed, q.id))
            paragraphs = picker.documents(0, own=own)
        else:
            paragraphs = picker.documents(docs - len(q.paragraphs))
        samples.append(_sample(q, paragraphs, dataset, seed, id_suffix=f"{docs}docs"))
    return samples


def build_hotpotqa_to_length(
    records: Sequence[Mapping[str, Any]],
    tokens: int,
    tokenizer: Tokenizer,
    n: int,
    seed: int,
    *,
    dataset: str = "hotpotqa",
    exclude: Collection[str] = (),
) -> list[Sample]:
    """Like :func:`build_hotpotqa`, but each context gets as many distractor paragraphs as fit
    in ``tokens`` context tokens (the next one would exceed). ``meta["context_tokens"]`` is the
    exact count and ``meta["length"]`` the target. With the same seed, a context of ``k``
    distractors equals the one :func:`build_hotpotqa` builds for that many documents."""
    questions, pool = _questions(records, n, exclude)
    bodies = _BodyCounts(tokenizer)
    samples = []
    for q in questions:
        picker = DocumentPicker(q, pool, _seed_key(dataset, seed, q.id))
        paragraphs = _fit_to_tokens(picker, tokens, tokenizer, bodies)
        context = render_documents(paragraphs)
        extra = {"length": tokens, "context_tokens": tokenizer.count(context)}
        suffix = f"{tokens}tokens"
        samples.append(_sample(q, paragraphs, dataset, seed, suffix, context=context, **extra))
    return samples


def _questions(
    records: Sequence[Mapping[str, Any]], n: int, exclude: Collection[str]
) -> tuple[list[HotpotQuestion], list[Paragraph]]:
    """The first ``n`` parsed questions not in ``exclude`` and the distractor pool of all
    records (excluded questions' paragraphs still pad the others)."""
    if n < 1:
        raise UsageError(f"n must be at least 1, not {n}")
    questions = parse_hotpot_records(records)
    unknown = sorted(set(exclude) - {q.id for q in questions})
    if unknown:
        raise UsageError(
            f"{len(unknown)} excluded id(s) are not in the records, e.g. {unknown[0]!r}"
        )
    asked = [q for q in questions if q.id not in exclude]
    if n > len(asked):
        left = f" after excluding {len(questions) - len(asked)}" if exclude else ""
        raise UsageError(f"asked for {n} questions but the records hold {len(asked)}{left}")
    return asked[:n], distractor_pool(questions)


def _seed_key(dataset: str, seed: int, question_id: str) -> str:
    # String seeds are hashed with SHA-512 by random.Random: stable across runs and machines.
    return f"{dataset}:{seed}:{question_id}"


def _sample(
    q: HotpotQuestion,
    paragraphs: list[Paragraph],
    dataset: str,
    seed: int,
    id_suffix: str,
    context: str | None = None,
    **extra: Any,
) -> Sample:
    """The sample of ``q`` in a set; its id ends in ``-<id_suffix>`` (the set's size) so that
    the sets of a sweep can be run as one folder, the question's id stays in the meta."""
    gold = [i + 1 for i, p in enumerate(paragraphs) if p.title in q.gold_titles]
    meta = {
        "dataset": dataset,
        "question_id": q.id,
        "kind": "qa",
        "docs": len(paragraphs),
        "seed": seed,
        "gold_titles": list(q.gold_titles),
        "gold_documents": gold,
        **q.meta,
        **extra,
    }
    if context is None:
        context = render_documents(paragraphs)
    sample_id = f"{q.id}-{id_suffix}"
    return Sample(sample_id, question=q.question, context=context, answers=[q.answer], meta=meta)


class _BodyCounts:
    """Token counts of paragraph bodies, cached by title: the pool is shared by all questions,
    so a sweep counts each paragraph once instead of re-tokenising millions of tokens."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._counts: dict[str, int] = {}

    def __call__(self, p: Paragraph) -> int:
        if p.title not in self._counts:
            self._counts[p.title] = self._tokenizer.count(f"{p.title}\n{p.text}")
        return self._counts[p.title]


def _fit_to_tokens(
    picker: DocumentPicker, tokens: int, tokenizer: Tokenizer, bodies: _BodyCounts
) -> list[Paragraph]:
    """The question's documents with as many distractors as fit in ``tokens``."""
    own = picker.question.paragraphs
    own_tokens = tokenizer.count(render_documents(own))
    # Headers and separators per document, calibrated on the own paragraphs, make the sum of
    # cached body counts a close estimate; exact counts of the whole context then settle it.
    per_doc = (own_tokens - sum(map(bodies, own))) / len(own)
    total, k = float(own_tokens), 0
    while k < picker.capacity and total + bodies(picker.distractor(k)) + per_doc <= tokens:
        total += bodies(picker.distractor(k)) + per_doc
        k += 1

    def measure(size: int) -> int:
        return tokenizer.count(render_documents(picker.documents(size)))

    what = f"question {picker.question.id}"
    k = largest_fitting(measure, tokens, hi=picker.capacity, start=k, what=what)
    if k == picker.capacity:  # every paragraph of the records is in, and still short
        raise UsageError(
            f"{what}: all {k} distractor paragraphs of the records give only {measure(k)} of "
            f"{tokens} tokens; pass more records or a smaller length"
        )
    return picker.documents(k)
