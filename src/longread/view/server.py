"""Serving the viewer on this machine: 127.0.0.1 only, on a free port unless one is given."""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn
from starlette.types import ASGIApp

from ..errors import UsageError

HOST = "127.0.0.1"


def bind(port: int) -> socket.socket:
    """A listening socket on ``HOST``; port 0 asks the system for a free one. A UsageError
    (one line) when the port is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {HOST}:{port}: {exc.strerror}") from None
    return sock


def url(sock: socket.socket) -> str:
    return f"http://{HOST}:{sock.getsockname()[1]}/"


class _Server(uvicorn.Server):
    """uvicorn's server, calling ``on_ready`` once it accepts connections (a browser opened
    earlier could find nothing there)."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._on_ready()


def serve(app: ASGIApp, sock: socket.socket, on_ready: Callable[[], None]) -> None:
    """Serve ``app`` on ``sock`` until Ctrl-C."""
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    _Server(config, on_ready).run(sockets=[sock])
