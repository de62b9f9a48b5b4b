"""Fitting every call into the backend's context window (ALGORITHMS.md section 0).

template + question + memory + chunk + max_new_tokens <= n_ctx, checked before sending. When the
window is too small for the requested chunk, the chunk shrinks and the run says so once.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import BudgetError

# Role markers and default system prompts that chat templates add around the user text.
CHAT_TEMPLATE_RESERVE = 64
# A chunk re-tokenised inside a prompt can merge differently at its edges; keep some slack.
RETOKENISE_SLACK = 0.01
MIN_CHUNK_TOKENS = 128


@dataclass(frozen=True)
class ChunkPlan:
    """The chunk size a run will use and, when it had to shrink, why."""

    chunk_tokens: int
    requested_chunk_tokens: int
    window: int | None

    @property
    def shrunk(self) -> bool:
        return self.chunk_tokens < self.requested_chunk_tokens

    def note(self) -> str | None:
        if not self.shrunk:
            return None
        return (
            f"chunk shrunk from {self.requested_chunk_tokens} to {self.chunk_tokens} tokens "
            f"to fit the {self.window}-token window"
        )


def fixed_cost(window: int) -> int:
    """Tokens reserved in every call for the chat template and re-tokenisation drift."""
    return CHAT_TEMPLATE_RESERVE + int(window * RETOKENISE_SLACK)


def plan_chunk(
    *,
    window: int | None,
    requested: int,
    prompt_tokens_without_chunk: int,
    max_new_tokens: int,
) -> ChunkPlan:
    """Largest chunk <= ``requested`` that fits ``window`` next to the rest of the prompt.

    ``prompt_tokens_without_chunk`` counts the template text, question and the largest memory
    the call may carry. Raises ``BudgetError`` when not even a small chunk fits.
    """
    if window is None:
        return ChunkPlan(requested, requested, None)
    room = window - fixed_cost(window) - prompt_tokens_without_chunk - max_new_tokens
    if room < MIN_CHUNK_TOKENS:
        raise BudgetError(
            f"a {window}-token window leaves {max(room, 0)} tokens for the document chunk "
            f"(question, memory and {max_new_tokens} output tokens take the rest); use a "
            "shorter question, smaller --memory-tokens, or a model with a larger window"
        )
    return ChunkPlan(min(requested, room), requested, window)


def check_fits(*, window: int | None, prompt_tokens: int, max_new_tokens: int, what: str) -> None:
    """Raise ``BudgetError`` when a call without a chunk (e.g. the final answer) cannot fit."""
    if window is None:
        return
    needed = prompt_tokens + max_new_tokens + fixed_cost(window)
    if needed > window:
        raise BudgetError(
            f"the {what} call needs about {needed} tokens but the window is {window}; "
            "use a shorter question or fewer output tokens"
        )
