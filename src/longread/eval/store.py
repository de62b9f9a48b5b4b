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
import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ..errors import UsageError
from ..files import write_json
from .provenance import DATA_IDENTITY, backend_record, data_identity, now, run_config
from .resume import AGENT_SETTINGS_ADDED, RESUME_KEYS, check_resume
from .sanitize import PATH_KEYS, portable_paths, redact_secrets, redact_text, without_secrets

# How a run was built lives in provenance (run_config), whether it may resume in resume, and
# what may be written to disk in sanitize; their public names stay importable from here.
__all__ = [
    "AGENT_SETTINGS_ADDED",
    "DATABASE",
    "DONE",
    "FAILED",
    "PATH_KEYS",
    "RESUME_KEYS",
    "RunStore",
    "SampleResult",
    "backend_record",
    "data_identity",
    "read_results",
    "run_config",
]

log = logging.getLogger(__name__)

DONE = "done"
FAILED = "failed"
# Ids named in the warning about unreadable rows; the rest are counted.
_SHOWN_IDS = 10
DATABASE = "results.sqlite"

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
    # Whether a failure was server trouble (a rerun may pass) rather than a configuration error;
    # known for the samples failed in this session only (not stored).
    transient: bool | None = None

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
        # What this session's record says beside its totals (``machine``: the CPU features
        # the embedded model's kernels used, where the backend says).
        self.session_fields: dict[str, Any] = {}
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise UsageError(f"{self.run_dir} is a file, not a run folder")
        (self.run_dir / "traces").mkdir(parents=True, exist_ok=True)
        self._lock = _take_lock(self.run_dir) if writer else None
        self._warned_unreadable = False
        # Autocommit: every record() is its own transaction, durable once it returns.
        self._db = sqlite3.connect(self.database, isolation_level=None)
        try:
            with self._readable():
                self._db.execute("PRAGMA journal_mode=WAL")
                # WAL + NORMAL could lose the last commits
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.execute("PRAGMA busy_timeout=10000")
                self._db.execute(_SCHEMA)
        except UsageError:
            self.close()
            raise

    @property
    def database(self) -> Path:
        return self.run_dir / DATABASE

    @contextlib.contextmanager
    def _readable(self) -> Iterator[None]:
        """Turn a damaged database (garbage bytes, a torn copy, a lock held too long) into a
        one-line UsageError; SQL mistakes (ours) still raise as they are."""
        try:
            yield
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.DatabaseError as exc:
            raise UsageError(
                f"{self.database} is not a readable results database ({exc}); move it aside "
                "to start the run afresh"
            ) from None

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
            # A server error names the URL it failed on, credentials and all.
            "error": redact_text(result.error) if result.error else result.error,
            "updated": now(),
        }
        del row["attempts"], row["transient"]
        with self._readable():
            self._db.execute(_UPSERT, row)

    def done_ids(self) -> set[str]:
        """Ids of the samples that finished (skipped on resume); an unreadable row is not
        done, so a resumed run runs its sample again and the new row replaces it."""
        return {r.sample_id for r in self.results() if r.status == DONE}

    def failed_ids(self) -> set[str]:
        """Ids of the samples whose run raised (retried on resume)."""
        with self._readable():
            rows = self._db.execute("SELECT sample_id FROM results WHERE status = ?", (FAILED,))
            return {r[0] for r in rows}

    def results(self) -> list[SampleResult]:
        """Every readable row, in the order samples were first recorded. A row whose score or
        cost is not a JSON object (a hand edit, a damaged copy) is skipped, with one warning
        per store naming it."""
        with self._readable():
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM results ORDER BY rowid").fetchall()
        results, unreadable = [], []
        for row in rows:
            result = _readable_row(row)
            if result is None:
                unreadable.append(str(row[0]))
            else:
                results.append(result)
        if unreadable and not self._warned_unreadable:
            self._warned_unreadable = True
            log.warning("%s", _unreadable_note(self.database, unreadable))
        return results

    def save_config(self, config: dict[str, Any]) -> None:
        """Write ``config.json``, or check a resumed run matches it.

        Nothing secret is written and paths are written so they travel with the folder
        (``sanitize``). A folder that already holds a run with another agent, agent config,
        data content or adapter is refused (a one-line UsageError naming what differs, see
        ``resume.check_resume``); a matching resume is noted in ``resumed``. The data is
        compared by ``data_hash``, so the folder may have moved and the data may sit elsewhere,
        under another name or in another file format. A folder from before data hashes that
        is accepted by its data file name adopts the hash of the data given now (noted with
        ``adopted_data_hash``), so later resumes compare content."""
        config = self._for_disk(json.loads(json.dumps(config)))  # JSON terms
        if not self.config_path.exists():
            write_json(self.config_path, config)
            return
        saved = self.load_config()
        adopted = check_resume(saved, config, self.run_dir)
        resumed = {key: config.get(key) for key in ("started", "data", "backend")}
        if adopted:
            saved.update({key: config.get(key) for key in DATA_IDENTITY})
            resumed["adopted_data_hash"] = True
        saved["resumed"] = [*saved.get("resumed", []), resumed]
        write_json(self.config_path, self._for_disk(saved))

    def _for_disk(self, config: dict[str, Any]) -> dict[str, Any]:
        return portable_paths(without_secrets(config), self.run_dir)

    def fill_backend(self, model: str | None, context_window: int | None) -> None:
        """Record what a server said once asked (its model when none was given, its window)
        in this session's backend entry of ``config.json``; set values are kept."""
        config = self.load_config()
        entry = config["resumed"][-1] if config.get("resumed") else config
        backend = entry.get("backend")
        if not isinstance(backend, dict) or backend.get("backend") != "openai":
            return
        for key, value in (("model", model), ("context_window", context_window)):
            if backend.get(key) is None and value is not None:
                backend[key] = value
        write_json(self.config_path, config)

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
        (every session's, so the timings of a run resumed three times are all kept). Error
        messages lose any credentials in the URLs they name."""
        summary = redact_secrets({**summary, **self.session_fields})
        write_json(self.run_dir / "summary.json", summary)
        with open(self.run_dir / "sessions.jsonl", "a") as handle:
            handle.write(json.dumps({**summary, "finished": now()}) + "\n")


def read_results(run_dir: str | Path) -> list[SampleResult]:
    """Every readable row of a run folder's store, read without writing to it (``RunStore``
    opens its database for writing: tables, a WAL): for looking at a run that ``eval run`` is
    still writing, or at committed results, changing neither. None before the run has created
    its database; rows whose score or cost is not JSON are skipped."""
    path = Path(run_dir) / DATABASE
    if not path.is_file():
        return []
    try:
        rows = _read_only_rows(path, immutable=not path.with_name(path.name + "-wal").exists())
    except sqlite3.DatabaseError:
        # A writer started between the look for its WAL and the read: read as its peer.
        rows = _read_only_rows(path, immutable=False)
    return [r for r in map(_readable_row, rows) if r is not None]


def _read_only_rows(path: Path, *, immutable: bool) -> list[tuple[Any, ...]]:
    """The rows through a read-only connection. Without a WAL file no one is writing, and
    ``immutable`` reads without creating one (a read-only connection to a WAL database
    otherwise leaves ``-wal`` and ``-shm`` files behind); with one, ``mode=ro`` takes part in
    the WAL protocol like any reader and never blocks the writer."""
    uri = path.resolve().as_uri() + ("?immutable=1" if immutable else "?mode=ro")
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
        db.execute("PRAGMA busy_timeout=10000")
        try:
            return db.execute(f"SELECT {_COLUMNS} FROM results ORDER BY rowid").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # created, not yet given its table
                return []
            raise


def _from_row(row: tuple[Any, ...]) -> SampleResult:
    """The row's result; ValueError when its score or cost is not JSON."""
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


def _readable_row(row: tuple[Any, ...]) -> SampleResult | None:
    """The row's result; None when its score or cost is not a JSON object."""
    try:
        result = _from_row(row)
    except (TypeError, ValueError):
        return None
    if not isinstance(result.score, dict) or not isinstance(result.cost, dict):
        return None
    return result


def _unreadable_note(database: Path, ids: list[str]) -> str:
    shown = ", ".join(ids[:_SHOWN_IDS]) + (
        f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else ""
    )
    rows = "row" if len(ids) == 1 else "rows"
    return (
        f"{database}: skipped {len(ids)} unreadable {rows} (score or cost not valid JSON): {shown}"
    )


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
