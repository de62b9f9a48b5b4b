"""The server as a FastAPI app: ``create_app(backend_factory, settings)``.

Routes: ``GET /health``, ``GET /v1/models`` (one model per agent), ``POST /v1/chat/completions``
(streamed or not), and the trace viewer at ``/view`` over the runs folder when
``longread.view`` is installed: with keys, each key sees only the runs it made. The backend
is built once, when the server starts, by ``backend_factory``: the CLI passes the ``ask``
flags' backend, tests a test double.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp

from .. import __version__
from ..agents.registry import AGENTS
from ..llm.base import LLMBackend
from ..llm.factory import close_all
from ..text.tokenizer import Tokenizer
from . import stream
from .auth import PerClient, client_of
from .config import ServeConfig
from .errors import APIError, install_error_handlers
from .render import completion
from .requests import RunRequest, model_id, parse_body, resolve
from .runs import RunHandle, RunManager

# Builds the backend and the tokenizer that counts its tokens; called once, at startup.
BackendFactory = Callable[[], Awaitable[tuple[LLMBackend, Tokenizer]]]
# The agents with a backend of their own (built by then); called after it.
AgentBackends = Callable[[], Mapping[str, LLMBackend]]
# Per agent, the kinds of call with a backend of their own (MemReread's decisions).
CallBackends = Callable[[], Mapping[str, Mapping[str, LLMBackend]]]
VIEW_PREFIX = "/view"


def create_app(
    backend_factory: BackendFactory,
    settings: ServeConfig | None = None,
    agent_backends: AgentBackends | None = None,
    call_backends: CallBackends | None = None,
) -> FastAPI:
    """The OpenAI-compatible app. Creates the runs folder (an OSError if it cannot).
    ``agent_backends``: the agents that read with a backend of their own (the bundled model
    with an agent's own shipped adapter); the rest share ``backend_factory``'s.
    ``call_backends``: per agent, the kinds of call sent to a backend of their own
    (MemReread's decide and integrate calls with its decision adapter)."""
    settings = settings or ServeConfig()
    settings.runs_dir.mkdir(parents=True, exist_ok=True)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        backend, tokenizer = await backend_factory()
        own = dict(agent_backends()) if agent_backends else {}
        calls = dict(call_backends()) if call_backends else {}
        manager = RunManager(backend, tokenizer, settings, own, calls)
        app.state.manager = manager
        try:
            yield
        finally:
            await manager.close()
            await backend.aclose()
            await close_all([*own.values(), *(b for k in calls.values() for b in k.values())])

    app = FastAPI(
        title="longread",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    install_error_handlers(app)
    viewer = _viewer(settings)
    if viewer is not None:
        app.mount(VIEW_PREFIX, PerClient(viewer, settings.keys))
    _add_routes(app, settings, with_viewer=viewer is not None)
    return app


async def stop_runs(app: FastAPI) -> None:
    """Cancel every run and wait for their traces: the server is stopping. Called as soon as it
    stops listening (``longread.asgi.serve``'s ``on_stop``), so that waiting clients hear why
    (a 503, or an error frame) while their connections are open, instead of being cut when the
    graceful shutdown's time is up."""
    manager: RunManager | None = getattr(app.state, "manager", None)
    if manager is not None:
        await manager.close()


def _add_routes(app: FastAPI, settings: ServeConfig, *, with_viewer: bool) -> None:
    created = int(time.time())

    def authorized(request: Request) -> str:
        return client_of(settings.keys, request.headers.get("authorization"))

    @app.get("/health")
    async def health(request: Request) -> dict[str, Any]:
        active = _manager(request).active()
        return {"status": "ok", "runs": len(active), "clients": sum(h.clients for h in active)}

    @app.get("/v1/models", dependencies=[Depends(authorized)])
    async def models() -> dict[str, Any]:
        data = [
            {"id": model_id(name), "object": "model", "created": created,
             "owned_by": "longread", "description": spec.summary}
            for name, spec in AGENTS.items()
        ]  # fmt: skip
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions")
    async def chat(request: Request, client: str = Depends(authorized)) -> Response:
        raw = await read_body(request, settings.max_body_bytes)
        # Parsing, base64 decoding and hashing a large document take a while: not on the loop
        # that feeds every other client's stream.
        wanted = await asyncio.to_thread(_read_request, raw, settings, client)
        manager = _manager(request)
        handle, shared = manager.open(wanted)
        trace_url = _trace_url(request, handle) if with_viewer else None
        headers = {"x-longread-run": handle.run_id, "x-longread-split": wanted.split.header()}
        if trace_url:
            headers["x-longread-trace-url"] = trace_url
        if wanted.stream:
            content = stream.events(manager, handle, wanted, shared, trace_url)
            return StreamingResponse(
                content, media_type="text/event-stream", headers={**stream.HEADERS, **headers}
            )
        return await _answer(request, manager, handle, wanted, shared, trace_url, headers)


def _read_request(raw: bytes, settings: ServeConfig, client: str) -> RunRequest:
    return resolve(parse_body(raw), settings, client)


async def _answer(
    request: Request,
    manager: RunManager,
    handle: RunHandle,
    wanted: RunRequest,
    shared: bool,
    trace_url: str | None,
    headers: dict[str, str],
) -> Response:
    """Wait for the run and answer it whole. A client that disconnects stops waiting (the run
    goes on a while for a retry to join: ``ServeConfig.cancel_after``)."""
    manager.attach(handle)
    try:
        gone = asyncio.ensure_future(_disconnected(request))
        done = asyncio.ensure_future(handle.done.wait())
        try:
            await asyncio.wait({gone, done}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            done.cancel()
    finally:
        manager.detach(handle)
    if not handle.done.is_set():
        return Response(status_code=499)  # nobody is there to read it
    if handle.error is not None:
        return handle.error.response(headers)
    return JSONResponse(completion(handle, wanted, shared, trace_url), headers=headers)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body; APIError 413 as soon as it passes ``limit`` bytes."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise _too_large(int(length), limit)
    pieces: list[bytes] = []
    size = 0
    async for piece in request.stream():
        size += len(piece)
        if size > limit:
            raise _too_large(size, limit)
        pieces.append(piece)
    return b"".join(pieces)


def _too_large(size: int, limit: int) -> APIError:
    return APIError(
        413,
        f"the request body has at least {size} bytes; this server takes at most {limit} "
        "(longread serve --max-body-mb)",
        code="request_too_large",
    )


async def _disconnected(request: Request) -> None:
    """Return when the client closes its connection (the body has been read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _manager(request: Request) -> RunManager:
    manager: RunManager = request.app.state.manager
    return manager


def _trace_url(request: Request, handle: RunHandle) -> str:
    return f"{str(request.base_url).rstrip('/')}{VIEW_PREFIX}/traces/{handle.run_id}.json"


def _viewer(settings: ServeConfig) -> Callable[[str], ASGIApp] | None:
    """What makes a caller's trace viewer, over its own runs only (``ServeConfig.traces_dir``),
    when ``longread.view`` is installed."""
    try:
        from ..view.app import create_app as create_viewer
    except ImportError:
        return None

    def viewer(client: str) -> ASGIApp:
        folder = settings.traces_dir(client)
        folder.mkdir(parents=True, exist_ok=True)  # a key with no run yet sees an empty list
        return create_viewer(folder)

    return viewer
