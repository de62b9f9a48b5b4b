"""The one record every dataset is turned into, whatever file it came from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Sample:
    """One evaluation question: canonical JSONL is ``{id, question, context, answers, meta}``.

    ``answers`` lists every accepted gold alias (scorers take the best match). ``meta`` carries
    what reports group by (``dataset``, ``task``, ``context_tokens``, ...) and anything else the
    source had (supporting facts, needle positions).
    """

    id: str
    question: str
    context: str
    answers: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
