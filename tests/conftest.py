"""Fixtures shared by several test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    """``longread serve`` test servers: ``start(backend, **config)`` starts one on 127.0.0.1,
    and every one started is stopped after the test (tests/serve_helpers.py)."""
    from .serve_helpers import start_servers

    start, stop = start_servers(tmp_path)
    yield start
    stop()


@pytest.fixture
def serve() -> Iterator[Any]:
    """Fake tokenize servers: ``serve(style, delay=0.0)`` starts one of tests/text_helpers.py's
    ``FakeServer`` on 127.0.0.1 speaking that server family's tokenize API, and every one
    started is stopped after the test."""
    from .text_helpers import FakeServer

    servers: list[FakeServer] = []

    def start(style: str, delay: float = 0.0) -> FakeServer:
        server = FakeServer(style, delay).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
