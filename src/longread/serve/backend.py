"""The backend as the server shares it between runs."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..llm.base import Completion, LLMBackend, Message, SamplingParams

# Backends that compute in a worker thread: cancelling the await does not stop the thread.
_THREADED = frozenset({"llamacpp"})


def for_serving(backend: LLMBackend) -> LLMBackend:
    """``backend``, made safe for runs that get cancelled (a client that went away)."""
    return FinishingCalls(backend) if backend.name in _THREADED else backend


class FinishingCalls:
    """A backend whose calls, once sent, run to their end even when the run that made them is
    cancelled; the run itself stops at once and makes no further call.

    The embedded llama.cpp model computes in a worker thread behind a lock. Cancelling the
    awaiting task would release the lock while the thread still holds the model, and the next
    run's call would use it concurrently. An HTTP backend needs no such care: cancelling
    closes the connection and the server stops the request, so it is not wrapped."""

    def __init__(self, backend: LLMBackend) -> None:
        self._backend = backend
        self.name = backend.name

    @property
    def context_window(self) -> int | None:
        return self._backend.context_window

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        call = asyncio.ensure_future(self._backend.chat(messages, params))
        call.add_done_callback(_consume)  # nobody may be left to read its error
        return await asyncio.shield(call)

    async def aclose(self) -> None:
        await self._backend.aclose()


def _consume(call: asyncio.Future[Completion]) -> None:
    if not call.cancelled():
        call.exception()
