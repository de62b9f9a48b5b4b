"""How good a run's citations are, judged against what the sample knows of its evidence.

A citation is *precise* when it holds the evidence: for RULER tasks, the needle, i.e. a gold
value (values are drawn so that each appears in its needle only); for HotpotQA, when its span
overlaps one of the supporting sentences. Other datasets have no evidence to judge by: their
citations are counted, not judged (``cited_precise`` None).
"""

from __future__ import annotations

from typing import Any

from ..citations import Citation
from ..citations.align import fold
from ..data.records import Sample


def citation_score(
    citations: list[Citation], supported: bool | None, sample: Sample
) -> dict[str, Any]:
    """``cited`` (how many citations), ``cited_precise`` (how many hold the evidence; None
    when the sample has no evidence to judge by) and ``supported``."""
    judge = _judge(sample)
    precise = None if judge is None else sum(judge(c) for c in citations)
    return {"cited": len(citations), "cited_precise": precise, "supported": supported}


def _judge(sample: Sample) -> Any:
    if sample.meta.get("kind") == "ruler":
        golds = [fold(answer) for answer in sample.answers if answer]
        return lambda c: any(g in fold(sample.context[c.char_start : c.char_end]) for g in golds)
    sentences = sample.meta.get("evidence")
    if sentences:
        spans = _spans(sample.context, sentences)
        return lambda c: any(c.char_start < end and start < c.char_end for start, end in spans)
    return None


def _spans(context: str, sentences: list[str]) -> list[tuple[int, int]]:
    """Every place each supporting sentence appears in the context."""
    spans = []
    for sentence in sentences:
        at = context.find(sentence)
        while at >= 0:
            spans.append((at, at + len(sentence)))
            at = context.find(sentence, at + 1)
    return spans
