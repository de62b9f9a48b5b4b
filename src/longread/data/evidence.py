"""The sentences of a document that back a sample's answer: what an ideal reader keeps (the
trainer's oracle), and what a reader must have read before it stops (the exit gate's
reward and the eval report's early exits)."""

from __future__ import annotations

import re

from .records import Sample

# A sentence ends at . ! or ? followed by whitespace; good enough for needles and Wikipedia.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> list[str]:
    """``text``'s sentences, stripped, empty ones dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def evidence_sentences(sample: Sample) -> list[str]:
    """The sentences an ideal reader keeps: ``meta["evidence"]`` when the sample lists them
    (HotpotQA's supporting sentences, a chain's fact and bridge), else every sentence of the
    document that contains a gold answer (a needle)."""
    listed = sample.meta.get("evidence")
    if listed:
        return [str(s).strip() for s in listed if str(s).strip()]
    golds = [g for g in sample.answers if g.strip()]
    return [s for s in split_sentences(sample.context) if any(g in s for g in golds)]
