"""``longread view --export FILE.html``: everything the viewer shows of a path in one file,
with its CSS and JavaScript inline, that can be mailed and opened without longread.

A run folder or a folder of traces becomes its index page plus one section per trace, shown
when the address names it (``#t3``), so links work inside the file. Each trace's JSON rides
along in a ``<script type="application/json">`` (``<`` escaped as ``\\u003c``), to be saved
back as a trace file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from . import pages
from .render import ExportLinks, render
from .sources import NotATrace, RunFolder, Source, TraceFile, open_source


def export_html(path: Path, out: Path) -> int:
    """Write the page(s) of ``path`` to ``out`` as one self-contained HTML file; the number
    of traces in it. A UsageError when ``path`` is not a trace, run folder or trace folder."""
    source = open_source(Path(path))
    html, count = export_page(source)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)  # a failed export leaves no half-written page
    return count


def export_page(source: Source) -> tuple[str, int]:
    """The whole file as text, and how many traces it holds."""
    if isinstance(source, TraceFile):
        page = pages.trace_page(source.cache.load(source.path), source.path.name)
        return _render(page.name, None, None, [("t0", page)], back=None), 1
    index: pages.RunPage | pages.FolderPage
    if isinstance(source, RunFolder):
        index, kind = pages.run_page(source), "run"
    else:
        index, kind = pages.folder_page(source), "folder"
    traces = [(f"t{i}", page) for i, page in enumerate(_trace_pages(source))]
    return _render(source.title, kind, index, traces, back=source.title), len(traces)


def _trace_pages(source: Source) -> Iterator[pages.TracePage]:
    for name in source.names():
        try:
            run = source.load(name)
        except NotATrace:
            continue  # the folder page lists it as skipped
        if run is None:
            continue  # removed since it was listed
        if isinstance(source, RunFolder):
            yield pages.run_trace_page(source, name, run)
        else:
            yield pages.trace_page(run, name)


def _render(
    title: str,
    kind: str | None,
    index: object,
    traces: list[tuple[str, pages.TracePage]],
    back: str | None,
) -> str:
    """``kind``: "run" or "folder" for an index page shown first, None for one trace alone."""
    links = ExportLinks({page.name: anchor for anchor, page in traces})
    return render(
        "export.html", inline=True, title=title, links=links, index_kind=kind, index=index,
        traces=traces, back=back,
    )  # fmt: skip
