"""The viewer as a Starlette app: ``create_app(path)``, servable alone (``longread view``) or
mounted under a prefix (``longread serve`` mounts it at ``/view``).

Routes, every link between them relative to the page:
  ``/``                 the run folder's page, the folder's list of traces, or the one trace
  ``/traces/<file>``    one trace (a file of the run's ``traces/`` or of the folder)
  ``/raw/<file>``       that trace's JSON as saved
  ``/static/...``       the CSS and JavaScript (package data)

Handlers are plain functions: Starlette runs them in its thread pool, so reading files and
SQLite never blocks the event loop of an app this one is mounted in.
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import pages
from .render import AppLinks, render
from .sources import NotATrace, RunFolder, Source, TraceFile, open_source

_TRACE_LINKS = AppLinks(root="../")  # from /traces/<file> back to the root


def create_app(path: Path) -> Starlette:
    """The viewer of ``path``: a trace JSON file, an eval run folder, or a folder of trace
    JSON files (which may be empty, and is listed again on every request). A UsageError when
    ``path`` is none of these."""
    source = open_source(Path(path))

    def index(request: Request) -> Response:
        if isinstance(source, TraceFile):
            return _trace(source, source.path.name, AppLinks())
        if isinstance(source, RunFolder):
            return _html("run.html", page=pages.run_page(source), links=AppLinks())
        return _html("folder.html", page=pages.folder_page(source), links=AppLinks())

    def trace(request: Request) -> Response:
        return _trace(source, request.path_params["name"], _TRACE_LINKS)

    def raw(request: Request) -> Response:
        file = source.trace_path(request.path_params["name"])
        if file is None:
            return _error(404, "No such trace.", _TRACE_LINKS)
        return FileResponse(file, media_type="application/json")

    routes = [
        Route("/", index),
        Route("/traces/{name}", trace),
        Route("/raw/{name}", raw),
        Mount("/static", StaticFiles(packages=[("longread.view", "static")]), name="static"),
    ]
    return Starlette(routes=routes)


def _trace(source: Source, name: str, links: AppLinks) -> Response:
    try:
        run = source.load(name)
    except NotATrace as exc:
        return _error(422, str(exc), links)
    except OSError as exc:  # removed since it was listed
        return _error(404, f"{name}: {exc.strerror}", links)
    if run is None:
        return _error(404, f"No trace named {name!r} here.", links)
    if isinstance(source, RunFolder):
        page = pages.run_trace_page(source, name, run)
    else:
        page = pages.trace_page(run, name)
    back = None if isinstance(source, TraceFile) else source.title
    return _html("trace.html", page=page, links=links, back=back)


def _html(template: str, **context: object) -> HTMLResponse:
    return HTMLResponse(render(template, inline=False, **context))


def _error(status: int, message: str, links: AppLinks) -> HTMLResponse:
    html = render("error.html", inline=False, status=status, message=message, links=links)
    return HTMLResponse(html, status_code=status)
