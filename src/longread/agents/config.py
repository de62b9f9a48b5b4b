"""Settings every agent shares: how to sample, and where its prompt files are."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from ..llm.base import SamplingParams
from .prompts import DEFAULT_PROMPT_SET, Prompts, check_prompt_set


@dataclass
class SamplingConfig:
    """Base of every agent config. Greedy by default, for reproducible runs; the papers
    evaluate with sampling (temperature 0.7, top-p 0.95: ``llm.base.EVAL_SAMPLING``). The
    sampling spec's other knobs (top-k, min-p, penalties) stay off on every backend."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    # The bundled prompt set: "paper" (the papers' free-rewrite memory) or "notes"
    # (append-only verbatim notes; see agents/prompts.py).
    prompt_set: str = DEFAULT_PROMPT_SET
    prompt_dir: str | None = None  # folder overriding the bundled prompt files (same names)

    def __post_init__(self) -> None:
        if not 0.0 <= self.temperature <= 2.0:
            raise UsageError("temperature must be between 0 and 2")
        if not 0.0 < self.top_p <= 1.0:
            raise UsageError("top_p must be in (0, 1]")
        check_prompt_set(self.prompt_set)

    @property
    def prompts(self) -> Prompts:
        """Where this agent's prompt templates come from."""
        return Prompts(self.prompt_set, self.prompt_dir)

    def require_positive(self, *names: str) -> None:
        """Raise a UsageError naming the first of ``names`` that is below 1."""
        for name in names:
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be a positive number of tokens")

    def params(self, max_tokens: int) -> SamplingParams:
        """Sampling parameters for one call allowed ``max_tokens`` new tokens."""
        return SamplingParams(
            max_tokens=max_tokens, temperature=self.temperature, top_p=self.top_p, seed=self.seed
        )
