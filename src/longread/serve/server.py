"""Running the app: uvicorn on a socket bound before it starts (so port 0 works and a taken
port is one clear line), saying where it listens once it accepts connections."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable

import uvicorn
from starlette.types import ASGIApp

from ..errors import LongreadError, UsageError

# Seconds that open streams get to finish when the server is stopped; then they are cut.
GRACEFUL_SHUTDOWN = 5


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
    """The server's root URL, e.g. ``http://127.0.0.1:8040``."""
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class _Server(uvicorn.Server):
    """uvicorn's server, running ``prepare`` (building the backend: loading the model, asking
    the upstream server) in its own event loop before the app starts, and calling ``on_ready``
    once it accepts connections. A ``LongreadError`` from ``prepare`` stops it before it
    listens, kept for the caller to report in one line (a failed app startup would print a
    traceback)."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_ready: Callable[[], None],
        prepare: Callable[[], Awaitable[None]] | None,
    ) -> None:
        super().__init__(config)
        self._on_ready = on_ready
        self._prepare = prepare
        self.startup_error: LongreadError | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if self._prepare is not None:
            try:
                await self._prepare()
            except LongreadError as exc:
                self.startup_error = exc
                self.should_exit = True
                return
        await super().startup(sockets)
        if self.started:
            self._on_ready()


def serve(
    app: ASGIApp,
    sock: socket.socket,
    on_ready: Callable[[], None],
    *,
    prepare: Callable[[], Awaitable[None]] | None = None,
    verbose: bool = False,
) -> None:
    """Serve ``app`` on ``sock`` until Ctrl-C or SIGTERM; ``prepare`` runs first, in the
    server's event loop (its LongreadError is raised here, nothing having been served)."""
    config = uvicorn.Config(
        app,
        log_level="info" if verbose else "warning",
        access_log=verbose,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
    )
    server = _Server(config, on_ready, prepare)
    server.run(sockets=[sock])
    if server.startup_error is not None:
        raise server.startup_error
