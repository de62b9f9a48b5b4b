"""``longread serve``: the agents behind an OpenAI-compatible chat-completions API.

``create_app(backend_factory, ServeConfig(...))`` is the FastAPI app; the modules each do one
job: ``requests`` and ``documents`` read a request (which agent, which settings, where the
document and the question are), ``uploads`` reads a file part of any format (PDF, HTML, EPUB,
DOCX, Markdown, text), ``runs`` coordinates runs (coalescing, limits, cancellation, traces),
``stream`` and ``render`` write OpenAI's shapes, ``citing`` the answer's citations (the
``longread`` field's list and ``url_citation`` annotations), ``errors`` every error in OpenAI's
error shape, ``auth`` the bearer keys (and whose runs are whose). ``longread.asgi`` runs it
under uvicorn, as it runs the viewer. Nothing in the library imports this package: it is a
front door, like the CLI.
"""

from __future__ import annotations

from .app import BackendFactory, create_app, stop_runs
from .config import ServeConfig, default_runs_dir
from .documents import Split
from .requests import model_id

__all__ = [
    "BackendFactory",
    "ServeConfig",
    "Split",
    "create_app",
    "default_runs_dir",
    "model_id",
    "stop_runs",
]
