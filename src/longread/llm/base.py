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
    """How to sample one completion: one spec that every backend honours the same way.

    The defaults are the model's full distribution (no top-k, no min-p, no penalties), on every
    backend: llama-cpp-python's own chat defaults (top-k 40, min-p 0.05) are never taken. Each
    next id is drawn as vLLM and Hugging Face draw it:

    1. penalties on the raw logits, for every id already sampled in this completion (the
       prompt's ids are not counted): ``repeat_penalty`` divides a positive logit and
       multiplies a negative one (1.0: off); ``frequency_penalty`` subtracts that much per
       earlier occurrence and ``presence_penalty`` that much once (0.0: off);
    2. ``temperature``: 0 is greedy (the argmax of step 1's logits; steps 3-4 do not apply);
       otherwise the logits are divided by it;
    3. on that tempered distribution: ``top_k`` keeps the k likeliest ids (0: off), ``top_p``
       the smallest set holding that much probability (1.0: off), ``min_p`` the ids at least
       that fraction as likely as the likeliest (0.0: off);
    4. one id drawn from what is left, renormalised. ``seed=None`` lets the backend choose.

    With a ``grammar``, the ids it does not allow are removed before step 1.

    Recorded logprobs are always those of the raw distribution (temperature 1, none of the
    above), the definition the trainer's loss uses.
    """

    max_tokens: int = 1024
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    # Keep the stop string that ended generation at the end of the text, where OpenAI's API
    # cuts it off: a caller whose stop strings carry a closing tag (rememr1's format stop)
    # then reads where the reply was cut. The embedded model, vLLM
    # (``include_stop_str_in_output``) and SGLang (``no_stop_trim``) keep it.
    include_stop: bool = False
    # End a reply whose tail has become one short block written again and again
    # (``llm/loops.py``), with finish_reason "loop", the text kept through the byte that made the
    # loop certain. The embedded model stops decoding there; a server's reply is cut the same
    # way when it comes back (the same text, none of the time saved).
    loop_stop: bool = False
    # A GBNF grammar the reply must follow (llama.cpp's grammar format): at each step only ids
    # whose text keeps the reply inside the grammar may be sampled, and the end of generation
    # only where the grammar is complete. The embedded model masks the ids itself (so greedy
    # decoding picks the likeliest id the grammar allows, and a reply that already follows
    # the grammar is unchanged); a server is sent the grammar under the names llama.cpp's
    # server (``grammar``), vLLM (``structured_outputs``) and SGLang (``ebnf``) read.
    grammar: str | None = None
    # Return the prompt ids (after the chat template), the sampled ids and their logprobs: what
    # training needs. Off by default: it costs a little time and a lot of trace space.
    record_tokens: bool = False

    def __post_init__(self) -> None:
        # Programmer errors: user input is checked where it is read (agents.config, serve).
        if self.temperature < 0 or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"temperature {self.temperature} or top_p {self.top_p} out of range")
        if self.top_k < 0 or not 0.0 <= self.min_p <= 1.0 or self.repeat_penalty <= 0:
            raise ValueError(
                f"top_k {self.top_k}, min_p {self.min_p} or repeat_penalty "
                f"{self.repeat_penalty} out of range"
            )

    @property
    def penalised(self) -> bool:
        """True when any penalty is on (step 1 changes the logits)."""
        return (self.repeat_penalty, self.presence_penalty, self.frequency_penalty) != (
            1.0,
            0.0,
            0.0,
        )


# Named sampling specs; give a call its budget with ``dataclasses.replace(SPEC, max_tokens=...)``.
# The papers' evaluation sampling (MemAgent, ReMemR1; vLLM, so no top-k and no min-p).
EVAL_SAMPLING = SamplingParams(temperature=0.7, top_p=0.95)
# Rollouts: the policy's full distribution at temperature 1.0, the one its loss describes.
TRAINING_SAMPLING = SamplingParams(temperature=1.0, top_p=1.0)


@dataclass
class Completion:
    """What one chat call produced, with the usage needed for cost accounting and RL."""

    text: str
    # "stop", "length", "loop" (``SamplingParams.loop_stop`` ended it), or what the server said
    finish_reason: str
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
