"""The shapes RULER's task generators share: a sample before fitting, and per-build state."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ._haystack import ADJECTIVES, NOUNS, VERBS, WordStream
from .hotpotqa import HotpotQuestion, Paragraph, distractor_pool, parse_hotpot_records


@dataclass
class Draft:
    """One sample before its haystack size is chosen: ``render(size)`` gives the context."""

    question: str
    answers: list[str]
    render: Callable[[int], str]
    meta: dict[str, Any] = field(default_factory=dict)
    kind: str = "ruler"
    limit: int | None = None  # the largest size the material allows
    size_meta: Callable[[int], dict[str, Any]] | None = None  # meta that depends on the size


@dataclass
class Shared:
    """What all samples of one build share: target, haystack choice, source text."""

    seed: int
    target: int
    haystack: str | None  # one of ruler.HAYSTACKS, or None for the task's own
    essay_file: Path | None
    hotpot_records: Sequence[Mapping[str, Any]] | None
    wording: str = "ruler"  # the needle tasks' wording (_niah.WORDINGS, or "mixed")

    @cached_property
    def essay(self) -> WordStream:
        if self.essay_file is not None:
            return WordStream.from_file(self.essay_file)
        return WordStream.generated(self.seed)

    @cached_property
    def hotpot(self) -> tuple[list[HotpotQuestion], list[Paragraph]]:
        if not self.hotpot_records:
            raise UsageError("task qa needs hotpotqa_records (official HotpotQA dev records)")
        questions = parse_hotpot_records(self.hotpot_records)
        return questions, distractor_pool(questions)

    @cached_property
    def cwe_words(self) -> tuple[list[str], list[str]]:
        """Single words, then ``a-b`` compounds for lists longer than the words allow."""
        singles = sorted(set(NOUNS + ADJECTIVES + VERBS))
        compounds = [f"{a}-{b}" for a in sorted(set(ADJECTIVES + NOUNS)) for b in NOUNS if a != b]
        return singles, compounds
