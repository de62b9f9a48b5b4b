"""Whether a run that stopped reading early (memagent's exit gate) had read the evidence.

A run's update prompts show the sections it read; an evidence sentence counts as read once
its tail appears in one of them. Used by the eval runner (the report's "exits before
evidence" column) and by the trainer's exit-gate reward (train/rewards.py), so both judge an
early exit the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..trace import DISCARD, Step, StepSink

# How much of an evidence sentence's end must appear in a read section to count it as read:
# a sentence cut by a chunk boundary ends in the later chunk, so reading its tail means the
# whole of it was read (whitespace and case dropped, as the prompt may reflow them). Short
# enough that a boundary rarely falls inside it; a generic tail may count an unread sentence
# as read, which only withholds a penalty.
EVIDENCE_TAIL_CHARS = 24


def _folded(text: str) -> str:
    return "".join(text.lower().split())


class EvidenceWatch:
    """A step sink that notes which evidence sentences the update prompts showed, and hands
    every step on to ``sink`` (a trace writer) unchanged."""

    def __init__(self, evidence: Sequence[str], sink: StepSink = DISCARD) -> None:
        self._unseen = {_folded(e)[-EVIDENCE_TAIL_CHARS:] for e in evidence} - {""}
        self._listed = len(self._unseen)
        self._sink = sink

    def write(self, step: Step) -> None:
        if self._unseen and step.kind == "update":
            shown = _folded("\n".join(m["content"] for m in step.messages))
            self._unseen = {tail for tail in self._unseen if tail not in shown}
        self._sink.write(step)

    @property
    def all_read(self) -> bool:
        """Whether every evidence sentence has been shown so far."""
        return not self._unseen

    @property
    def any_read(self) -> bool:
        """Whether at least one evidence sentence has been shown so far."""
        return len(self._unseen) < self._listed


def stopped_before_evidence(config: dict, watch: EvidenceWatch) -> bool:
    """Whether a run whose ``config`` records an early stop (``chunks_read`` < ``chunks``:
    the exit gate) stopped before ``watch`` saw every evidence sentence. A run that read
    every chunk never stopped early, whatever it missed."""
    read, total = config.get("chunks_read"), config.get("chunks")
    return read is not None and total is not None and read < total and not watch.all_read
