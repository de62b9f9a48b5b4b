"""The embedded backend's one-call-at-a-time rule when a caller is cancelled (a client that
went away from ``longread serve``, a Ctrl-C): llama.cpp computes in a worker thread that cannot
be stopped, so the model must stay locked until the thread is done. The blocking call is
replaced by a stand-in that records overlap; no model is loaded."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from longread.llm.base import Completion, SamplingParams
from longread.llm.llamacpp import LlamaCppBackend

MESSAGES = [{"role": "user", "content": "hi"}]


class StandIn:
    """A blocking call that waits for its gate, noting how many run at once."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.running = self.most = self.done = 0
        self.lock = threading.Lock()

    def __call__(self, messages, params) -> Completion:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        self.gate.wait(timeout=30)
        time.sleep(0.05)  # a second call let in early would overlap this one
        with self.lock:
            self.running -= 1
            self.done += 1
        return Completion("notes", "stop", 1, 1, 0.0)


@pytest.fixture
def backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LlamaCppBackend, StandIn]:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF not loaded")
    llm = LlamaCppBackend(model)
    stand_in = StandIn()
    monkeypatch.setattr(llm, "_chat_blocking", stand_in)
    return llm, stand_in


async def test_a_cancelled_call_stops_waiting_but_keeps_the_model_until_its_thread_ends(
    backend: tuple[LlamaCppBackend, StandIn],
) -> None:
    llm, stand_in = backend
    first = asyncio.ensure_future(llm.chat(MESSAGES, SamplingParams()))
    while stand_in.running == 0:
        await asyncio.sleep(0.01)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first  # the caller is free at once, while the thread still computes
    assert stand_in.done == 0
    second = asyncio.ensure_future(llm.chat(MESSAGES, SamplingParams()))
    stand_in.gate.set()
    reply = await second
    assert reply.text == "notes"
    assert stand_in.done == 2
    assert stand_in.most == 1  # the second call waited for the abandoned one's thread


async def test_closing_waits_for_an_abandoned_calls_thread(
    backend: tuple[LlamaCppBackend, StandIn],
) -> None:
    """SIGTERM mid-call cancels the run, then closes the backend: freeing the model while the
    thread still computes on it crashed `eval run` with a segmentation fault."""
    llm, stand_in = backend

    class Model:
        closed_while_running: bool | None = None

        def close(self) -> None:
            Model.closed_while_running = stand_in.running > 0

    llm._llama = Model()
    call = asyncio.ensure_future(llm.chat(MESSAGES, SamplingParams()))
    while stand_in.running == 0:
        await asyncio.sleep(0.01)
    call.cancel()
    closing = asyncio.ensure_future(llm.aclose())
    await asyncio.sleep(0.1)
    assert not closing.done()  # still waiting for the thread
    stand_in.gate.set()
    await closing
    assert Model.closed_while_running is False
