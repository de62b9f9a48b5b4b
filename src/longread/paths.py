"""One resolver for every on-disk location longread uses, with an environment override."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where converted model files live: ``$LONGREAD_CACHE_DIR``, else the XDG cache folder."""
    override = os.environ.get("LONGREAD_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "longread"
