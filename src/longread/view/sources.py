"""What ``longread view PATH`` shows: a trace file, an eval run folder, or a folder of traces.

Folders are listed again on every request: a run being written gains samples, and a server
writing traces into a folder adds files while the viewer is open. Loaded traces are kept
until their file changes.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..eval.store import SampleResult, read_results
from ..trace import Run
from . import runfolder


class NotATrace(UsageError):
    """A file that is not a longread trace (not JSON, or not a run's record)."""


def load_trace(path: Path) -> Run:
    """The run saved at ``path`` (any schema ``Run.load`` reads); NotATrace otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not ("steps" in data or "conversations" in data):
            raise NotATrace(f"{path} is not a longread trace (no steps)")
        return Run.from_dict(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise NotATrace(f"{path} is not a longread trace ({exc})") from None


@dataclass(frozen=True)
class TraceSummary:
    """What a table row shows of a trace: small, so a folder of thousands of traces costs
    little memory once listed."""

    sample_id: str | None
    agent: str
    question: str
    answer: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    started: str
    chunks: int | None  # distinct chunks read; None for agents that read no chunks
    flags: Counter[str]

    @classmethod
    def of(cls, run: Run) -> TraceSummary:
        chunks = {s.chunk_index for s in run.steps if s.chunk_index is not None}
        return cls(
            run.sample_id, run.agent, run.question, run.answer, run.calls, run.prompt_tokens,
            run.completion_tokens, run.seconds, run.started, len(chunks) if chunks else None,
            Counter(flag for step in run.steps for flag in step.flags),
        )  # fmt: skip


class TraceCache:
    """Traces by path, read again only when the file's size or modification time changes:
    the last few whole (for trace pages), a summary of every one (for tables)."""

    def __init__(self, keep: int = 32) -> None:
        self._keep = keep
        self._runs: OrderedDict[Path, tuple[tuple[int, int], Run]] = OrderedDict()
        self._summaries: dict[Path, tuple[tuple[int, int], TraceSummary]] = {}
        self._lock = threading.Lock()  # the app's sync handlers run in a thread pool

    def load(self, path: Path) -> Run:
        key = _stamp(path)
        with self._lock:
            cached = self._runs.get(path)
            if cached is not None and cached[0] == key:
                self._runs.move_to_end(path)
                return cached[1]
        run = load_trace(path)
        with self._lock:
            self._runs[path] = (key, run)
            self._runs.move_to_end(path)
            while len(self._runs) > self._keep:
                self._runs.popitem(last=False)
        return run

    def summary(self, path: Path) -> TraceSummary:
        key = _stamp(path)
        with self._lock:
            cached = self._summaries.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        summary = TraceSummary.of(self.load(path))
        with self._lock:
            self._summaries[path] = (key, summary)
        return summary


@dataclass
class Source:
    """Where traces come from: a folder of trace JSON files (``folder``), named by file name.
    ``path`` is what the user gave."""

    path: Path
    folder: Path
    cache: TraceCache = field(default_factory=TraceCache, repr=False)

    @property
    def title(self) -> str:
        return self.path.name or str(self.path)

    def names(self) -> list[str]:
        """The trace files' names, sorted (listed now, not when the source was opened)."""
        if not self.folder.is_dir():
            return []
        return sorted(p.name for p in self.folder.glob("*.json") if p.is_file())

    def trace_path(self, name: str) -> Path | None:
        """The file of trace ``name``: a ``.json`` file directly in the folder, else None (a
        name from a URL must not reach other files)."""
        if "/" in name or "\\" in name or not name.endswith(".json") or name.startswith("."):
            return None
        path = self.folder / name
        return path if path.is_file() else None

    def load(self, name: str) -> Run | None:
        """Trace ``name``, None when there is no such file; NotATrace for a bad one."""
        path = self.trace_path(name)
        return None if path is None else self.cache.load(path)

    def summary(self, name: str) -> TraceSummary | None:
        """Trace ``name``'s table row, None when there is no such file; NotATrace for a bad
        one."""
        path = self.trace_path(name)
        return None if path is None else self.cache.summary(path)


@dataclass
class TraceFile(Source):
    """One trace JSON file."""

    def names(self) -> list[str]:
        return [self.path.name]

    def trace_path(self, name: str) -> Path | None:
        return self.path if name == self.path.name and self.path.is_file() else None


@dataclass
class RunFolder(Source):
    """An ``eval run`` folder: rows in ``results.sqlite``, traces in ``traces/``."""

    _gold: tuple[tuple[Any, ...], dict[str, list[str]], str | None] | None = field(
        default=None, repr=False
    )

    def config(self) -> dict[str, Any]:
        return runfolder.read_config(self.path)

    def results(self) -> list[SampleResult]:
        return read_results(self.path)

    def gold(self, config: dict[str, Any]) -> tuple[dict[str, list[str]], str | None]:
        """Gold answers by sample id from the run's data (read once per data file version),
        or nothing and why."""
        data = runfolder.data_path(self.path, config)
        data_hash = config.get("data_hash")
        key: tuple[Any, ...] = (data, _data_stamp(data), data_hash)
        if self._gold is None or self._gold[0] != key:
            self._gold = (key, *runfolder.gold_or_reason(data, data_hash))
        return self._gold[1], self._gold[2]


def trace_name(result: SampleResult) -> str | None:
    """The file name under ``traces/`` of a row's trace (None for a failed sample)."""
    if not result.trace:
        return None
    path = Path(result.trace)
    return path.name if path.parent == Path("traces") else None


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return (stat.st_mtime_ns, stat.st_size)


def _data_stamp(path: Path | None) -> tuple[int, int] | None:
    try:
        return None if path is None else _stamp(path)
    except OSError:
        return None


def open_source(path: Path, *, allow_empty: bool = True) -> Source:
    """The source at ``path``: a trace JSON file, a run folder (it has ``config.json``) or a
    folder of trace JSON files. A UsageError (one line) for anything else; with
    ``allow_empty=False`` a folder holding no trace is refused too (a server's empty trace
    folder is fine to watch, a mistyped folder on the command line is not)."""
    if not path.exists():
        raise UsageError(f"{path} does not exist")
    if path.is_file():
        load_trace(path)  # refuse a file that is not a trace now, with its reason
        return TraceFile(path, path.parent)
    if not path.is_dir():
        raise UsageError(f"{path} is neither a file nor a folder")
    if runfolder.is_run_folder(path):
        runfolder.read_config(path)
        return RunFolder(path, path / "traces")
    source = Source(path, path)
    if not allow_empty and not source.names():
        runs = sorted(p.name for p in path.iterdir() if runfolder.is_run_folder(p))
        hint = f"; it holds run folders: view one, e.g. {path / runs[0]}" if runs else ""
        raise UsageError(
            f"{path} is neither a trace JSON file, an eval run folder (no config.json) nor a "
            f"folder of trace JSON files{hint}"
        )
    return source
