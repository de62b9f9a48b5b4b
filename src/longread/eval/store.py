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
import hashlib
import json
import logging
import os
import platform
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from .. import __version__
from ..data.records import Sample
from ..errors import UsageError
from ..files import write_json
from ..llm.factory import BackendSettings
from ..llm.gguf import DEFAULT_QUANT, SMOLLM2_CONTEXT, plan_model_file

log = logging.getLogger(__name__)

DONE = "done"
FAILED = "failed"
# Ids named in the warning about unreadable rows; the rest are counted.
_SHOWN_IDS = 10
# A resumed run must read the same data with the same agent, else its rows would mix two runs.
DATABASE = "results.sqlite"
# The data is compared by content, not by path, so a moved or cloned run folder still resumes.
RESUME_KEYS = ("agent", "agent_config", "record_tokens", "data_hash")
# Agent settings added since folders were first made, each with the value that does what the
# longread before it did: a folder saved without one resumes as if it had that value.
AGENT_SETTINGS_ADDED = {"section_first": False}
# Paths in config.json (top-level key, or (section, key)), written relative to the run folder
# when they are inside it, so the folder can be moved or copied with its data and model.
PATH_KEYS: tuple[tuple[str, ...], ...] = (
    ("data",),
    ("backend", "model_path"),
    ("backend", "source"),
    ("backend", "tokenizer"),
    ("backend", "adapter"),
)

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
            "updated": _now(),
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

        Paths inside the run folder are written relative to it (see ``PATH_KEYS``). A folder
        that already holds a run with another agent, agent config or data content is refused
        (a one-line UsageError naming what differs); a matching resume is noted in
        ``resumed``. The data is compared by ``data_hash``, so the folder may have moved and
        the data may sit elsewhere, under another name or in another file format.

        Folders written before data hashes existed (no ``data_hash``; ``data`` an absolute
        path) resume when the saved data path's file name matches the one given now: a
        checkout moved or cloned elsewhere keeps its file names, and a name is all such a
        folder records. The hash of the data given now is then adopted into ``config.json``
        (and the resume noted with ``adopted_data_hash``), so later resumes compare content.
        """
        config = _relative_paths(json.loads(json.dumps(config)), self.run_dir)  # JSON terms
        if not self.config_path.exists():
            write_json(self.config_path, config)
            return
        saved = self.load_config()
        saved.setdefault("record_tokens", False)  # folders from before the switch had none
        _fill_added_settings(saved.get("agent_config"), config.get("agent_config"))
        for key in RESUME_KEYS:
            if key != "data_hash":  # compared by _check_data, which knows older folders
                _check_same(key, saved.get(key), config.get(key), self.run_dir)
        adopted = _check_data(saved, config, self.run_dir)
        _check_adapter(saved, config, self.run_dir)
        resumed = {key: config.get(key) for key in ("started", "data", "backend")}
        if adopted:
            saved.update({key: config.get(key) for key in _DATA_IDENTITY})
            resumed["adopted_data_hash"] = True
        saved["resumed"] = [*saved.get("resumed", []), resumed]
        write_json(self.config_path, saved)

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
        (every session's, so the timings of a run resumed three times are all kept)."""
        write_json(self.run_dir / "summary.json", summary)
        with open(self.run_dir / "sessions.jsonl", "a") as handle:
            handle.write(json.dumps({**summary, "finished": _now()}) + "\n")


def run_config(
    agent: str,
    agent_config: dict[str, Any],
    settings: BackendSettings,
    data: str | Path,
    samples: Sequence[Sample] | None = None,
    record_tokens: bool = False,
) -> dict[str, Any]:
    """The resolved configuration saved with a run: enough to rebuild or resume it.
    ``record_tokens`` says whether traces keep token ids (a resume must not mix the two).

    ``samples`` are every sample read from ``data`` (before any ``--limit``, so a resume with
    another limit still matches); their content is hashed into ``data_hash``, which is what a
    resume compares. ``backend`` is what will actually run: the resolved backend name, for
    llama.cpp the model file and quantisation it loads, for a server its URL and model; the
    API key is never written. Paths are absolute here; ``RunStore.save_config`` makes those
    inside the run folder relative to it."""
    config: dict[str, Any] = {
        "agent": agent,
        "agent_config": agent_config,
        "record_tokens": record_tokens,
        "data": str(Path(data).expanduser().resolve()),
    }
    if samples is not None:
        config.update(data_identity(samples))
    config.update({"backend": backend_record(settings), "versions": _versions(), "started": _now()})
    return config


# The keys of run_config that identify the data (data_identity's), kept together on adoption.
_DATA_IDENTITY = ("data_hash", "sample_ids_hash", "samples")


def data_identity(samples: Sequence[Sample]) -> dict[str, Any]:
    """``data_hash``: sha256 over every sample's id, question, context and answers, in no
    particular order (a folder read in another order, or the same samples in another file or
    format, match; ``meta`` is left out since formats fill it differently). A changed sample
    changes it. ``sample_ids_hash`` (the ids alone) and ``samples`` (the count) tell a refused
    resume whether the samples changed or are other samples."""
    digests = sorted(
        hashlib.sha256(json.dumps([s.id, s.question, s.context, s.answers]).encode()).hexdigest()
        for s in samples
    )
    ids = json.dumps(sorted(s.id for s in samples))
    return {
        "data_hash": "sha256:" + hashlib.sha256("\n".join(digests).encode()).hexdigest(),
        "sample_ids_hash": "sha256:" + hashlib.sha256(ids.encode()).hexdigest(),
        "samples": len(samples),
    }


def backend_record(settings: BackendSettings) -> dict[str, Any]:
    """The backend ``make_backend(settings)`` builds, resolved ("auto" becomes the backend
    chosen); no model is loaded or converted and the API key is left out."""
    resolved = settings.resolved_backend()
    record: dict[str, Any] = {"backend": resolved, "requested": settings.backend}
    if resolved == "openai":
        record.update(
            base_url=_server_url(settings.base_url),
            model=settings.model,  # None: the server's first model, discovered when run
            context_window=settings.context_window,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            extra_body=settings.extra_body,
        )
    else:
        record.update(_model_record(settings.gguf, settings.quant))
        record["n_ctx"] = settings.n_ctx or SMOLLM2_CONTEXT  # as make_backend defaults it
        adapter = settings.applied_adapter()
        if adapter:
            record.update(_adapter_record(adapter, settings.adapter_scale))
        record["parallel"] = settings.parallel  # batched decoding (None: one call at a time)
    record["max_concurrency"] = settings.max_concurrency
    record["tokenizer"] = _absolute(settings.tokenizer)
    return record


def _server_url(base_url: str | None) -> str | None:
    """The server URL the OpenAI backend will use: the flag, else ``OPENAI_BASE_URL``."""
    from ..llm.openai import normalise_base_url  # httpx is only needed for a server run

    url = base_url or os.environ.get("OPENAI_BASE_URL")
    return normalise_base_url(url) if url else None


def _model_record(gguf: str | None, quant: str | None) -> dict[str, Any]:
    """The model file llama.cpp will load (``gguf.plan_model_file``: nothing is converted). A
    model that cannot be found is recorded with the reason (building the backend then fails
    with the same message) rather than failing here."""
    try:
        choice = plan_model_file(gguf, quant)
    except UsageError as exc:
        fallback = (quant or ("original" if gguf else DEFAULT_QUANT)).lower()
        return {"model_file": None, "model_path": None, "quant": fallback, "model_error": str(exc)}
    return {
        "model_file": choice.path.name,
        "model_path": str(choice.path.resolve()),
        "source": str(choice.source.resolve()),
        "quant": choice.quant,
    }


def _adapter_record(adapter: str, scale: float) -> dict[str, Any]:
    """The LoRA adapter file and its content hash (a resume must apply the same adapter)."""
    from ..llm.llamacpp import check_adapter_file

    path = check_adapter_file(adapter)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {
        "adapter": str(path.resolve()),
        "adapter_sha256": "sha256:" + digest.hexdigest(),
        "adapter_scale": scale,
    }


def _absolute(path: str | None) -> str | None:
    """An existing path made absolute; anything else (a hub name, None) as given."""
    if path is None or not Path(path).expanduser().exists():
        return path
    return str(Path(path).expanduser().resolve())


def _relative_paths(config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """``config`` with the paths of ``PATH_KEYS`` that lie inside ``run_dir`` made relative to
    it: they then still point at the right files after the folder is moved or copied."""
    root = run_dir.resolve()
    for *sections, key in PATH_KEYS:
        holder: Any = config
        for section in sections:
            holder = holder.get(section) if isinstance(holder, dict) else None
        value = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(value, str) and Path(value).is_absolute():
            path = Path(value).resolve()
            if path.is_relative_to(root):
                holder[key] = path.relative_to(root).as_posix()
    return config


def _versions() -> dict[str, str]:
    found = {"longread": __version__, "python": platform.python_version()}
    # The metadata, not an import: importing llama_cpp loads the native library.
    with contextlib.suppress(PackageNotFoundError):
        found["llama_cpp"] = version("llama_cpp_python")
    return found


def _fill_added_settings(saved: Any, new: Any) -> None:
    """Give a saved agent config the settings added since (``AGENT_SETTINGS_ADDED``) that the
    agent now has, at the value that reproduces the older runs."""
    if not isinstance(saved, dict) or not isinstance(new, dict):
        return
    for key, old_behaviour in AGENT_SETTINGS_ADDED.items():
        if key in new:
            saved.setdefault(key, old_behaviour)


def _check_same(key: str, saved: Any, new: Any, run_dir: Path) -> None:
    if saved == new:
        return
    where, missing = key, False
    if isinstance(saved, dict) and isinstance(new, dict):
        sub = next(k for k in sorted(set(saved) | set(new)) if saved.get(k) != new.get(k))
        where, missing, saved, new = f"{key}.{sub}", sub not in saved, saved.get(sub), new.get(sub)
    if missing:
        # A setting added since the folder was made (e.g. prompt_set): the old run used what
        # the older longread did, which the new default need not reproduce.
        raise UsageError(
            f"{run_dir} was made by an older longread without {where} (now {new!r}), so its "
            "results may not match this run; pass a new --out folder"
        )
    raise UsageError(
        f"{run_dir} holds a run with a different {where} (saved {saved!r}, now {new!r}); "
        "resume with the same settings or pass a new --out folder"
    )


def _check_data(saved: dict[str, Any], new: dict[str, Any], run_dir: Path) -> bool:
    """Refuse a resume on other data; True when a folder without ``data_hash`` (written
    before data hashes) is accepted by its data file name and should adopt ``new``'s hash."""
    if saved.get("data_hash") and new.get("data_hash"):
        if saved["data_hash"] != new["data_hash"]:
            raise UsageError(
                f"{run_dir} holds a run on different data ({_data_change(saved, new)}); "
                "resume with the same data or pass a new --out folder"
            )
        return False
    # No hash on one side: only the file name can be compared (see save_config).
    saved_name, new_name = Path(str(saved.get("data"))).name, Path(str(new.get("data"))).name
    if saved_name != new_name:
        raise UsageError(
            f"{run_dir} holds a run on different data (saved {saved.get('data')!r}, now "
            f"{new.get('data')!r}; it predates data hashes, so only the file name can be "
            "compared); resume with the same data or pass a new --out folder"
        )
    return bool(new.get("data_hash")) and not saved.get("data_hash")


def _check_adapter(saved: dict[str, Any], new: dict[str, Any], run_dir: Path) -> None:
    """Refuse a resume that applies another LoRA adapter, or none where there was one (or the
    reverse): its answers would come from another model. Compared by content and scale, so the
    adapter file may have moved."""

    def adapter(config: dict[str, Any]) -> tuple[Any, Any, Any]:
        backend = config.get("backend") or {}
        if not backend.get("adapter_sha256"):
            return None, None, None
        return backend["adapter_sha256"], backend.get("adapter_scale"), backend.get("adapter")

    saved_hash, saved_scale, saved_path = adapter(saved)
    new_hash, new_scale, new_path = adapter(new)
    if (saved_hash, saved_scale) == (new_hash, new_scale):
        return
    if saved_hash == new_hash:
        what = f"adapter scale (saved {saved_scale}, now {new_scale})"
    else:
        what = f"LoRA adapter (saved {saved_path or 'none'}, now {new_path or 'none'})"
    raise UsageError(
        f"{run_dir} holds a run with a different {what}; resume with the same adapter (a run "
        "of the bundled model without its memory adapter: --base-model) or pass a new --out "
        "folder"
    )


def _data_change(saved: dict[str, Any], new: dict[str, Any]) -> str:
    """What differs between two data identities, in words."""
    counts = (
        f"saved {saved.get('samples')} samples from {saved.get('data')!r}, "
        f"now {new.get('samples')} from {new.get('data')!r}"
    )
    if saved.get("sample_ids_hash") == new.get("sample_ids_hash"):
        return f"the same sample ids with changed content: {counts}"
    return f"other sample ids: {counts}"


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
