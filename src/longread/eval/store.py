"""The durable record of one evaluation run folder, so an interrupted run resumes where it stopped.

A run folder holds ``config.json`` (how the run was built), ``results.sqlite`` (one row per
sample, written the moment the sample finishes), ``traces/<sample id>.json`` (every
conversation), ``summary.json`` (the last session's totals and timings), ``sessions.jsonl``
(every session's) and ``lock`` (held by the run writing to the folder).

SQLite rather than JSONL: an upsert turns a retried failure into a done row in place, a commit
is atomic (a kill mid-write leaves the previous state, never half a line), and WAL mode lets a
report or a test read the store while a run is still writing to it.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sqlite3
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from .. import __version__
from ..errors import UsageError
from ..llm.factory import BackendSettings

DONE = "done"
FAILED = "failed"
# A resumed run must read the same data with the same agent, else its rows would mix two runs.
RESUME_KEYS = ("agent", "agent_config", "data")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    sample_id TEXT PRIMARY KEY,
    status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    dataset TEXT,
    kind TEXT NOT NULL,
    context_length,            -- int tokens/docs, or whatever the data called its length
    score TEXT NOT NULL,       -- JSON of eval.scoring.Score.to_dict(); null=true when failed
    cost TEXT NOT NULL,        -- JSON: calls, prompt_tokens, completion_tokens, seconds
    error TEXT,
    trace TEXT,                -- path relative to the run folder
    attempts INTEGER NOT NULL DEFAULT 1,
    updated TEXT NOT NULL
)
"""
_UPSERT = """
INSERT INTO results (sample_id, status, dataset, kind, context_length, score, cost, error,
                     trace, updated)
VALUES (:sample_id, :status, :dataset, :kind, :context_length, :score, :cost, :error, :trace,
        :updated)
ON CONFLICT (sample_id) DO UPDATE SET
    status = excluded.status, dataset = excluded.dataset, kind = excluded.kind,
    context_length = excluded.context_length, score = excluded.score, cost = excluded.cost,
    error = excluded.error, trace = excluded.trace, updated = excluded.updated,
    attempts = results.attempts + 1
"""
_COLUMNS = "sample_id, status, dataset, kind, context_length, score, cost, error, trace, attempts"


@dataclass
class SampleResult:
    """One sample's outcome: what it is grouped by, how it scored, what it cost.

    A failed sample (backend or budget error) has ``status="failed"``, the error message and a
    null score (zeros everywhere), so it stays in every denominator."""

    sample_id: str
    status: str
    kind: str
    score: dict[str, Any]
    cost: dict[str, Any] = field(default_factory=dict)
    dataset: str | None = None
    context_length: int | str | None = None
    error: str | None = None
    trace: str | None = None
    attempts: int = 1

    @property
    def headline(self) -> float:
        """The lenient accuracy shown while running, 0..1: RULER's match_all, else sub-EM."""
        if self.kind == "ruler" and self.score.get("match_all") is not None:
            return float(self.score["match_all"]) / 100.0
        return float(self.score.get("sub_em") or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class RunStore:
    """Append-only results of one run folder: ``RunStore(run_dir).record(result)``."""

    def __init__(self, run_dir: str | Path, *, writer: bool = False) -> None:
        """Open (or create) the store. ``writer=True`` takes the folder's lock for the
        store's lifetime: two runs resuming one folder would run its samples twice."""
        self.run_dir = Path(run_dir)
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise UsageError(f"{self.run_dir} is a file, not a run folder")
        (self.run_dir / "traces").mkdir(parents=True, exist_ok=True)
        self._lock = _take_lock(self.run_dir) if writer else None
        # Autocommit: every record() is its own transaction, durable once it returns.
        self._db = sqlite3.connect(self.run_dir / "results.sqlite", isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # WAL + NORMAL could lose the last commits
        self._db.execute("PRAGMA busy_timeout=10000")
        self._db.execute(_SCHEMA)

    @property
    def config_path(self) -> Path:
        return self.run_dir / "config.json"

    def close(self) -> None:
        self._db.close()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, result: SampleResult) -> None:
        """Insert or replace ``result``'s row (a retried failure becomes done); durable on
        return."""
        row = {
            **result.to_dict(),
            "score": json.dumps(result.score),
            "cost": json.dumps(result.cost),
            "updated": _now(),
        }
        del row["attempts"]
        self._db.execute(_UPSERT, row)

    def done_ids(self) -> set[str]:
        """Ids of the samples that finished (skipped on resume)."""
        return self._ids(DONE)

    def failed_ids(self) -> set[str]:
        """Ids of the samples whose run raised (retried on resume)."""
        return self._ids(FAILED)

    def _ids(self, status: str) -> set[str]:
        rows = self._db.execute("SELECT sample_id FROM results WHERE status = ?", (status,))
        return {r[0] for r in rows}

    def results(self) -> list[SampleResult]:
        """Every row, in the order samples were first recorded."""
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM results ORDER BY rowid")
        return [_from_row(r) for r in rows]

    def save_config(self, config: dict[str, Any]) -> None:
        """Write ``config.json``, or check a resumed run matches it.

        A run folder that already holds a run with another agent, agent config or data is
        refused (UsageError naming the key). A matching resume is noted in ``resumed``."""
        config = json.loads(json.dumps(config))  # compare in JSON terms (tuples -> lists)
        if not self.config_path.exists():
            _write_json(self.config_path, config)
            return
        saved = self.load_config()
        for key in RESUME_KEYS:
            _check_same(key, saved.get(key), config.get(key), self.run_dir)
        resumed = {"started": config.get("started"), "backend": config.get("backend")}
        saved["resumed"] = [*saved.get("resumed", []), resumed]
        _write_json(self.config_path, saved)

    def load_config(self) -> dict[str, Any]:
        """The saved ``config.json``; UsageError when the folder holds no run."""
        try:
            loaded: dict[str, Any] = json.loads(self.config_path.read_text())
        except FileNotFoundError:
            raise UsageError(f"{self.run_dir} is not a run folder (no config.json)") from None
        except ValueError as exc:
            raise UsageError(f"{self.config_path} is not valid JSON: {exc}") from None
        return loaded

    def save_summary(self, summary: dict[str, Any]) -> None:
        """Write ``summary.json`` (the latest session's) and append it to ``sessions.jsonl``
        (every session's, so the timings of a run resumed three times are all kept)."""
        _write_json(self.run_dir / "summary.json", summary)
        with open(self.run_dir / "sessions.jsonl", "a") as handle:
            handle.write(json.dumps({**summary, "finished": _now()}) + "\n")


def run_config(
    agent: str, agent_config: dict[str, Any], settings: BackendSettings, data: str | Path
) -> dict[str, Any]:
    """The resolved configuration saved with a run: enough to rebuild or resume it. The API
    key is left out."""
    backend = asdict(settings)
    backend.pop("api_key", None)
    return {
        "agent": agent,
        "agent_config": agent_config,
        "data": str(Path(data).resolve()),
        "backend": backend,
        "versions": _versions(),
        "started": _now(),
    }


def _versions() -> dict[str, str]:
    found = {"longread": __version__, "python": platform.python_version()}
    # The metadata, not an import: importing llama_cpp loads the native library.
    with contextlib.suppress(PackageNotFoundError):
        found["llama_cpp"] = version("llama_cpp_python")
    return found


def _check_same(key: str, saved: Any, new: Any, run_dir: Path) -> None:
    if saved == new:
        return
    where = key
    if isinstance(saved, dict) and isinstance(new, dict):
        sub = next(k for k in sorted(set(saved) | set(new)) if saved.get(k) != new.get(k))
        where, saved, new = f"{key}.{sub}", saved.get(sub), new.get(sub)
    raise UsageError(
        f"{run_dir} holds a run with a different {where} (saved {saved!r}, now {new!r}); "
        "resume with the same settings or pass a new --out folder"
    )


def _from_row(row: tuple[Any, ...]) -> SampleResult:
    sample_id, status, dataset, kind, length, score, cost, error, trace, attempts = row
    return SampleResult(
        sample_id=sample_id,
        status=status,
        kind=kind,
        score=json.loads(score),
        cost=json.loads(cost),
        dataset=dataset,
        context_length=length,
        error=error,
        trace=trace,
        attempts=attempts,
    )


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` atomically: a kill leaves the old file or the new one, never half."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as handle:
        handle.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _take_lock(run_dir: Path) -> FileLock:
    lock = FileLock(run_dir / "lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise UsageError(
            f"{run_dir} is in use by another 'longread eval run'; wait for it to finish or "
            "choose another --out"
        ) from None
    return lock
