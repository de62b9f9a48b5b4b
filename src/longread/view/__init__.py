"""The trace viewer: pages over traces and eval run folders, served or exported.

``create_app(path)`` is a Starlette app (``longread view`` serves it; ``longread serve`` mounts
it); ``export_html(path, out)`` writes one self-contained page. Nothing outside this package
and the CLI imports it: the agents and the eval store know nothing of viewing.
"""

from __future__ import annotations

from .app import create_app
from .export import export_html
from .sources import Source, open_source

__all__ = ["Source", "create_app", "export_html", "open_source"]
