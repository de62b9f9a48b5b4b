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


# How far below our count a server's reported prompt tokens may fall before the prompt is
# called truncated. An exact tokenizer differs from the server's only in the chat template's
# tokens (which the server adds, so it reports more, not less): 15% is ample.
EXACT_TOLERANCE = 0.15
# The 4-characters-per-token estimate errs far more. Measured with the embedded model's
# vocabulary (bench/estimate_error.py, on examples/ and 100 HotpotQA dev documents), real counts
# fall as low as 0.64 of the estimate on single paragraphs, 0.79 on 500-token prompts and 0.94
# on 5,000-token prompts; tokenizers with larger vocabularies compress English up to about 15%
# more. Only a server that read under half of the estimate is called truncated: a 5,000-token
# prompt cut to 2,048 is caught, no honest count of ordinary text is. (Text made mostly of runs
# of one character, rows of dashes or spaces, compresses far more; --tokenizer is the cure.)
ESTIMATE_TOLERANCE = 0.5


def check_prompt_truncation(
    completion: Completion,
    expected_tokens: int,
    tolerance: float = EXACT_TOLERANCE,
    *,
    window: int | None = None,
    max_tokens: int = 0,
) -> None:
    """Raise ``BackendError`` if the server read far fewer prompt tokens than we sent.

    Some servers (Ollama above all) cut an over-long prompt to their context size without
    saying so, and the agent would then answer from a document it never saw. Two signs:

    - the server reports under ``(1 - tolerance)`` of ``expected_tokens``, our own count of the
      prompt (``EXACT_TOLERANCE`` for an exact tokenizer, ``ESTIMATE_TOLERANCE`` for an
      estimate);
    - with the ``window`` known, the prompt it read leaves less than the call's ``max_tokens``
      for the reply: every call is planned to leave that room, so the prompt was longer than
      counted (an estimate that ran short) and was cut to the window.

    A server that reports no usage (0 tokens) is not accused of anything.
    """
    reported = completion.prompt_tokens
    if reported <= 0:
        return
    if reported < expected_tokens * (1 - tolerance):
        raise BackendError(
            f"server reported {reported} prompt tokens but the prompt has about "
            f"{expected_tokens}: it was probably truncated silently (Ollama does this); "
            "raise the server's context size (num_ctx)"
        )
    if window is not None and reported + max_tokens > window:
        raise BackendError(
            f"server reported {reported} prompt tokens, which leaves less than the "
            f"{max_tokens} reply tokens in its {window}-token window: the prompt was longer "
            "than counted and was probably truncated; pass --tokenizer for exact token counts "
            "or use a smaller --chunk-tokens"
        )
