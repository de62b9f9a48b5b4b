"""The backend protocol every agent talks to, and the records it returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypedDict, runtime_checkable

from ..errors import BackendError


class Message(TypedDict):
    """One chat message, OpenAI style."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion. ``seed=None`` lets the backend choose."""

    max_tokens: int = 1024
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    # Return the prompt ids (after the chat template), the sampled ids and their logprobs: what
    # training needs. Off by default: it costs a little time and a lot of trace space.
    record_tokens: bool = False


@dataclass
class Completion:
    """What one chat call produced, with the usage needed for cost accounting and RL."""

    text: str
    finish_reason: str  # "stop", "length", or whatever the server said
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    # Only when asked (``SamplingParams.record_tokens``) and where the backend reports them;
    # training needs the sampled ids, never re-tokenised text. ``token_ids`` are the sampled
    # (completion) ids, end-of-sequence included when the model stopped on it; ``logprobs``
    # one per sampled id; ``prompt_ids`` the prompt after the chat template.
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_ids: list[int] | None = None
    model: str = ""

    @property
    def truncated(self) -> bool:
        """True when generation stopped because it hit ``max_tokens``."""
        return self.finish_reason == "length"


@runtime_checkable
class LLMBackend(Protocol):
    """An async chat model. Agents only ever see this protocol."""

    name: str

    @property
    def context_window(self) -> int | None:
        """Total tokens (prompt + completion) one call may use; None when unknown."""
        ...

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        """Run one chat completion. Raises ``BackendError`` when it cannot."""
        ...

    async def aclose(self) -> None:
        """Release connections, threads or model memory."""
        ...


def check_prompt_truncation(
    completion: Completion, expected_tokens: int, tolerance: float = 0.15
) -> None:
    """Raise ``BackendError`` if the server read far fewer prompt tokens than we sent.

    Some servers (Ollama above all) cut an over-long prompt to their context size without
    saying so, and the agent would then answer from a document it never saw. ``expected_tokens``
    is our own estimate of the prompt, so ``tolerance`` absorbs tokenizer differences. A
    server that reports no usage (0 tokens) is not accused of anything.
    """
    reported = completion.prompt_tokens
    if 0 < reported < expected_tokens * (1 - tolerance):
        raise BackendError(
            f"server reported {reported} prompt tokens but the prompt has about "
            f"{expected_tokens}: it was probably truncated silently (Ollama does this); "
            "raise the server's context size (num_ctx)"
        )
