"""A real ``longread serve`` app on 127.0.0.1 (uvicorn in a thread) over test-double backends.

The backends answer memagent's bundled prompts like a tidy model, so a test can tell that the
document was read: an update copies the section's "magic number is N" sentences into the
memory, the final call boxes the last number the memory holds.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from openai import OpenAI

from longread.asgi import bind, url
from longread.errors import BackendError
from longread.llm.base import Completion, Message, SamplingParams
from longread.serve import ServeConfig, create_app

from .scripted import ScriptedBackend, WordTokenizer

QUESTION = "What is the special magic number?"
_FACT = re.compile(r"magic number is (\d+)")
FILLER = "The grass is green and the sky is blue."


def document(number: int = 4720519, paragraphs: int = 6, needle_at: int = 3) -> str:
    """Paragraphs of filler (about 40 words each) with the needle in one of them."""
    texts = []
    for i in range(paragraphs):
        text = " ".join([FILLER] * 4)
        if i == needle_at:
            text += f" The special magic number is {number}."
        texts.append(text)
    return "\n\n".join(texts)


def read_like_a_model(messages: Sequence[Message]) -> str:
    """memagent's update and final prompts answered the way a careful model would."""
    prompt = messages[-1]["content"]
    if "\n\nSection:\n" in prompt:
        memory = prompt.split("\nMemory:\n", 1)[1].split("\n\nSection:\n", 1)[0]
        section = prompt.split("\n\nSection:\n", 1)[1]
        facts = _FACT.findall(section)
        kept = [] if memory.startswith("No previous memory") else [memory]
        return "\n".join(kept + [f"The magic number is {n}." for n in facts]) or "Nothing yet."
    numbers = _FACT.findall(prompt)
    return f"\\boxed{{{numbers[-1] if numbers else 'unknown'}}}"


VAULT_QUESTION = "What is the vault code of the Lisbon office?"
_VAULT = re.compile(r"[^.\n]*vault code[^.\n]*\.")


def copy_vault_sentences(messages: Sequence[Message]) -> str:
    """memagent's prompts answered by a model that notes, word for word, every sentence of a
    section naming a vault code (the documents of tests/data/documents hold one), and boxes
    the last number of its notes; "unknown" when they hold none."""
    prompt = messages[-1]["content"]
    if "\n\nSection:\n" in prompt:
        memory = prompt.split("\nMemory:\n", 1)[1].split("\n\nSection:\n", 1)[0]
        section = prompt.split("\n\nSection:\n", 1)[1]
        kept = [] if memory.startswith("No previous memory") else [memory]
        found = [sentence.strip() for sentence in _VAULT.findall(section)]
        return "\n".join(kept + found) or "Nothing yet."
    memory = prompt.split("\nMemory:\n", 1)[-1]
    numbers = re.findall(r"\b\d{3,}\b", "\n".join(_VAULT.findall(memory)))
    return f"\\boxed{{{numbers[-1] if numbers else 'unknown'}}}"


def vault_reader(calls: int = 500) -> ScriptedBackend:
    """A ScriptedBackend answering with :func:`copy_vault_sentences` for ``calls`` calls."""
    return ScriptedBackend([copy_vault_sentences] * calls)


def scripted_reader(calls: int = 500) -> ScriptedBackend:
    """tests/scripted.py's ScriptedBackend, scripted to read like a model for ``calls`` calls."""
    return ScriptedBackend([read_like_a_model] * calls)


class SlowBackend:
    """Wraps a backend: every call first waits ``delay`` seconds and, while ``gate`` is not
    set, for the gate; ``fail_at`` makes that call (1-based) raise a BackendError. ``started``
    counts calls begun, ``finished`` calls answered."""

    name = "slow"

    def __init__(
        self,
        inner: Any | None = None,
        *,
        delay: float = 0.0,
        gated: bool = False,
        fail_at: int | None = None,
    ) -> None:
        self.inner = inner or scripted_reader()
        self.delay = delay
        self.gate = threading.Event()
        if not gated:
            self.gate.set()
        self.fail_at = fail_at
        self.started = 0
        self.finished = 0

    @property
    def context_window(self) -> int | None:
        return None

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        self.started += 1
        number = self.started
        if self.delay:
            await asyncio.sleep(self.delay)
        while not self.gate.is_set():
            await asyncio.sleep(0.01)
        if number == self.fail_at:
            raise BackendError("server answered 500: the GPU caught fire")
        completion: Completion = await self.inner.chat(messages, params)
        self.finished += 1
        return completion

    async def aclose(self) -> None:
        pass


class ServerThread:
    """``create_app`` served by uvicorn on a free port of 127.0.0.1, in a background thread."""

    def __init__(
        self,
        backend: Any,
        settings: ServeConfig,
        agent_backends: dict[str, Any] | None = None,
        call_backends: dict[str, Any] | None = None,
    ) -> None:
        self.backend = backend
        self.settings = settings

        async def factory() -> tuple[Any, WordTokenizer]:
            return backend, WordTokenizer()

        self.app = create_app(
            factory, settings, lambda: agent_backends or {}, lambda: call_backends or {}
        )
        self._sock = bind("127.0.0.1", 0)
        self.url = url(self._sock)
        config = uvicorn.Config(self.app, log_level="warning", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def __enter__(self) -> ServerThread:
        self._thread.start()
        wait_for(lambda: self._server.started, "the server to start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def traces(self) -> list[Path]:
        """Every trace written, each key's folder included."""
        return sorted(self.settings.runs_dir.rglob("*.json"))


def wait_for(condition: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    """Poll ``condition`` until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def curl(*args: str, data: str | bytes | None = None) -> tuple[int, dict[str, str], str]:
    """Run curl; the status, the response headers (names lower-cased) and the body."""
    command = ["curl", "-sS", "-D", "-", *args]
    if data is not None:
        command += ["--data-binary", "@-"]
    raw = data.encode() if isinstance(data, str) else data
    out = subprocess.run(command, input=raw, capture_output=True, check=True, timeout=60).stdout
    head, _, body = out.decode("utf-8", errors="replace").partition("\r\n\r\n")
    while head.startswith("HTTP/1.1 100"):  # "Expect: 100-continue" for large bodies
        head, _, body = body.partition("\r\n\r\n")
    status_line, *lines = head.split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


SMALL_AGENT = {"chunk_tokens": 60, "memory_tokens": 64, "final_tokens": 16}


def start_servers(tmp_path: Path) -> tuple[Callable[..., ServerThread], Callable[[], None]]:
    """A function starting servers (``ServeConfig`` fields as keywords; small chunks and a
    runs folder under ``tmp_path`` by default; ``agent_backends``: the agents that read with a
    backend of their own; ``call_backends``: kinds of call that go to one), and one stopping
    them all."""
    servers: list[ServerThread] = []

    def start(
        backend: Any | None = None,
        agent_backends: dict[str, Any] | None = None,
        call_backends: dict[str, Any] | None = None,
        **settings: Any,
    ) -> ServerThread:
        settings.setdefault("runs_dir", tmp_path / "runs")
        settings.setdefault("agent_defaults", dict(SMALL_AGENT))
        config = ServeConfig(**settings)
        server = ServerThread(backend or scripted_reader(), config, agent_backends, call_backends)
        servers.append(server.__enter__())
        return server

    def stop() -> None:
        for server in servers:
            server.__exit__()

    return start, stop


def client(server: ServerThread, **kwargs: Any) -> OpenAI:
    """The official client for ``server``, with no retries unless asked (a retry would hide
    what one request did)."""
    kwargs.setdefault("max_retries", 0)
    return OpenAI(base_url=server.base_url, api_key=kwargs.pop("api_key", "none"), **kwargs)
