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
