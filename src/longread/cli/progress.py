"""Progress on stderr for long runs: calls done, chunk position and throughput."""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm

from ..trace import Step


class RunProgress:
    """A tqdm bar over one run's LLM calls, shown only when stderr is a terminal."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._bar: tqdm | None = None
        self._chunks: int | None = None
        self._tokens = 0
        self._seconds = 0.0

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()

    def start(self, chunks: int | None = None) -> None:
        """Show the bar; ``chunks`` is the document's chunk count, for "chunk i/N"."""
        self._chunks = chunks
        if self.enabled:
            self._bar = tqdm(unit="call", file=sys.stderr, dynamic_ncols=True)

    def update(self, step: Step, expected_calls: int) -> None:
        """Progress callback for agents: one finished step."""
        self._tokens += step.prompt_tokens + step.completion_tokens
        self._seconds += step.seconds
        if self._bar is None:
            return
        if expected_calls and self._bar.total != expected_calls:
            self._bar.total = expected_calls
        self._bar.set_description(self._describe(step), refresh=False)
        self._bar.set_postfix(self._postfix(), refresh=False)
        self._bar.update(1)

    def _describe(self, step: Step) -> str:
        """E.g. "chunk 3/12", "chunk 3/12 reread-1", "decide-1", "final"."""
        phase = "" if step.phase in ("", "root") else step.phase
        if step.chunk_index is None:
            return phase or step.kind
        of = f"/{self._chunks}" if self._chunks else ""
        return f"chunk {step.chunk_index + 1}{of} {phase}".strip()

    def _postfix(self) -> dict[str, Any]:
        rate = self._tokens / self._seconds if self._seconds else 0.0
        return {"tok/s": f"{rate:.0f}"}
