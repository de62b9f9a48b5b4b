"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for backend tests.

Each path answers from its own queue of ``Reply`` objects, then from a fallback reply if one
is set, then with 404. Every request is recorded, and the server tracks how many requests it
held at once so tests can check client-side concurrency limits.
"""

from __future__ import annotations

import copy
import json
import math
import socket
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: a dict/list body is sent as JSON, a str body as plain text."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # Send only the first ``cut_at`` bytes of the body (announcing its full length), then close
    # the connection: a reply cut off on the wire.
    cut_at: int | None = None
    # Called on the server's thread before the reply is sent: a test's way to change the world
    # in the middle of a run (remove a folder, ...).
    action: Callable[[], None] | None = None


@dataclass
class Request:
    """What the server received."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any


# ``completion_body(prompt_tokens=COUNTED)``: the server reports the request's own prompt size
# (4 characters per token, as longread estimates it without a tokenizer), as a real server
# would, so that longread's check for silently truncated prompts has nothing to object to.
COUNTED = "counted"


def counted_prompt_tokens(request: Request) -> int:
    """The prompt tokens a ``COUNTED`` reply reports for ``request``."""
    messages = request.body["messages"] if isinstance(request.body, dict) else []
    return sum(math.ceil(len(m["content"]) / 4) for m in messages)


def completion_body(
    text: str | None = "hello",
    *,
    finish_reason: str = "stop",
    prompt_tokens: int | str = 12,
    completion_tokens: int = 3,
    model: str = "test-model",
    usage: bool = True,
    logprobs: list[dict[str, Any]] | None = None,
    token_ids: list[int] | None = None,
    prompt_token_ids: list[int] | None = None,
) -> dict[str, Any]:
    """A chat-completions response body the way vLLM shapes it.

    ``token_ids`` and ``prompt_token_ids`` are what vLLM >= 0.10.2 adds for
    ``return_token_ids``: the sampled ids on the choice, the prompt ids at the top level.
    """
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": finish_reason,
    }
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    if token_ids is not None:
        choice["token_ids"] = token_ids
    body: dict[str, Any] = {"id": "cmpl-1", "object": "chat.completion", "model": model}
    if prompt_token_ids is not None:
        body["prompt_token_ids"] = prompt_token_ids
    body["choices"] = [choice]
    if usage:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        if isinstance(prompt_tokens, int):
            body["usage"]["total_tokens"] = prompt_tokens + completion_tokens
    return body


def models_body(*ids: str, **card_fields: Any) -> dict[str, Any]:
    """A ``/v1/models`` response listing ``ids``; extra fields go on every card."""
    return {"object": "list", "data": [{"id": i, "object": "model", **card_fields} for i in ids]}


def error_body(message: str, code: int = 400) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def unused_port() -> int:
    """A port on 127.0.0.1 that nothing was listening on a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeOpenAIServer:
    """A real HTTP server in a background thread, answering from per-path scripts."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._queues: dict[str, deque[Reply]] = defaultdict(deque)
        self._fallbacks: dict[str, Reply] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        """The server root, without ``/v1``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def script(self, path: str, *replies: Reply) -> None:
        """Answer the next requests to ``path`` with ``replies``, in order."""
        with self._lock:
            self._queues[path].extend(replies)

    def always(self, path: str, reply: Reply) -> None:
        """Answer ``path`` with ``reply`` once its script has run out."""
        with self._lock:
            self._fallbacks[path] = reply

    def requests_to(self, path: str) -> list[Request]:
        """The requests received on ``path``, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()  # wake handlers sleeping through a scripted delay
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _serve(self) -> None:
        # A short poll interval makes shutdown() quick: it waits for the loop to notice.
        self._httpd.serve_forever(poll_interval=0.02)

    def _take(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            queue = self._queues[request.path]
            if queue:
                return queue.popleft()
            fallback = self._fallbacks.get(request.path)
        return fallback or Reply(404, error_body(f"no route {request.path}", 404))

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _counted(reply: Reply, request: Request) -> Reply:
    """``reply`` with a ``COUNTED`` prompt size filled in from ``request``."""
    usage = reply.body.get("usage") if isinstance(reply.body, dict) else None
    if not isinstance(usage, dict) or usage.get("prompt_tokens") != COUNTED:
        return reply
    body = copy.deepcopy(reply.body)  # the same Reply may answer many requests
    body["usage"]["prompt_tokens"] = counted_prompt_tokens(request)
    body["usage"]["total_tokens"] = body["usage"]["prompt_tokens"] + usage["completion_tokens"]
    return replace(reply, body=body)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean

    def _handle(self) -> None:
        fake: FakeOpenAIServer = self.server.fake  # type: ignore[attr-defined]
        request = self._read_request()
        reply = _counted(fake._take(request), request)
        try:
            if reply.delay and fake._stopping.wait(reply.delay):
                return
            if reply.action is not None:
                reply.action()
            self._write(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing left to answer
        finally:
            fake._done()

    def _read_request(self) -> Request:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        headers = {name.lower(): value for name, value in self.headers.items()}
        return Request(self.command, self.path, headers, body)

    def _write(self, reply: Reply) -> None:
        if isinstance(reply.body, str):
            payload, content_type = reply.body.encode(), "text/plain"
        else:
            payload, content_type = json.dumps(reply.body).encode(), "application/json"
        self.send_response(reply.status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if reply.cut_at is not None:
            self.wfile.write(payload[: reply.cut_at])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(payload)
