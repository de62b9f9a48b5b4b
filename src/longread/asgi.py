"""Serving an ASGI app from a front door (``longread serve``, ``longread view``): uvicorn on a
socket bound before it starts (so port 0 works and a taken port is one clear line), saying where
it listens once it accepts connections, and stopping cleanly on Ctrl-C or SIGTERM.

Stopping is this module's job, not uvicorn's. After its graceful shutdown uvicorn puts back the
signal handlers it found and raises the signal again, so that the process "dies of" it. What
that does depends on what the process inherited: a process started with SIGINT ignored (a
shell's background job, some CI runners) ignores it, and the server returns as if nothing had
stopped it; SIGTERM's default handler kills the process, with no last word. Here the handlers
stay ours until the server has stopped, and ``serve`` simply returns: whatever the signal and
whatever the parent, the caller knows that the server was stopped and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

from .errors import LongreadError, UsageError

# Seconds that open responses (streams) get to finish when the server is stopped; then they are
# cut.
GRACEFUL_SHUTDOWN = 5
# The signals that stop a server: Ctrl-C, and what service managers and `kill` send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one); UsageError when taken."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(f"cannot listen on {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


def url(sock: socket.socket) -> str:
    """The server's root URL without a trailing slash, e.g. ``http://127.0.0.1:8040``."""
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class _Server(uvicorn.Server):
    """uvicorn's server, running ``prepare`` (building a backend: loading the model, asking an
    upstream server) in its own event loop before the app starts, calling ``on_ready`` once it
    accepts connections and ``on_stop`` as soon as it stops accepting them, and keeping the stop
    signals to itself (the module's docstring says why). A ``LongreadError`` from ``prepare``
    stops it before it listens, kept for the caller to report in one line (a failed app startup
    would print a traceback)."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_ready: Callable[[], None],
        prepare: Callable[[], Awaitable[None]] | None = None,
        on_stop: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(config)
        self._on_ready = on_ready
        self._prepare = prepare
        self._on_stop = on_stop
        self.startup_error: LongreadError | None = None
        self.stopped_by: int | None = None  # the first stop signal received

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if self._prepare is not None:
            try:
                await self._prepare()
            except LongreadError as exc:
                self.startup_error = exc
                self.should_exit = True
                return
        if self.should_exit:  # stopped while preparing: never listen
            return
        await super().startup(sockets)
        if self.started and not self.should_exit:  # no ready line for a server stopping
            self._on_ready()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new connection while on_stop winds the app down
        if self._on_stop is not None:
            await self._until_forced(self._on_stop())
        await super().shutdown(sockets)

    async def _until_forced(self, work: Awaitable[None]) -> None:
        """Await ``work`` unless a second Ctrl-C forces the exit meanwhile (uvicorn's rule for
        its own waits): then it is cancelled."""
        task = asyncio.ensure_future(work)
        while not task.done() and not self.force_exit:
            await asyncio.wait({task}, timeout=0.1)
        if not task.done():
            task.cancel()
            return
        task.result()  # its error, if any, is the caller's

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's handlers while the server runs, the previous ones afterwards, and the
        signal never raised again (uvicorn's own version raises it again)."""
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread may set handlers: the caller stops this server
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.stopped_by is None:
            self.stopped_by = sig
        super().handle_exit(sig, frame)


def serve(
    app: ASGIApp,
    sock: socket.socket,
    on_ready: Callable[[], None],
    *,
    prepare: Callable[[], Awaitable[None]] | None = None,
    on_stop: Callable[[], Awaitable[None]] | None = None,
    verbose: bool = False,
) -> int | None:
    """Serve ``app`` on ``sock`` until Ctrl-C or SIGTERM, then shut down gracefully and return
    the signal that stopped it (None: stopped some other way). ``prepare`` runs first, in the
    server's event loop; its LongreadError is raised here, nothing having been served.
    ``on_stop`` runs once the server stops listening, before the open connections get
    ``GRACEFUL_SHUTDOWN`` seconds to finish: the app's chance to answer its waiting clients
    (a long job cancelled, say why) rather than have them cut.

    A KeyboardInterrupt can still come out of here when Ctrl-C lands in the moments before
    the server's handlers are in place or after they are gone: that too means "stopped"."""
    config = uvicorn.Config(
        app,
        log_level="info" if verbose else "warning",
        access_log=verbose,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
    )
    server = _Server(config, on_ready, prepare, on_stop)
    server.run(sockets=[sock])
    if server.startup_error is not None:
        raise server.startup_error
    return server.stopped_by
