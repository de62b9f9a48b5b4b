"""A training run's saved config: paths relative to the run folder, data known by its content.

The trainer saves the resolved config beside its checkpoints (``config.json``) and a resumed run
must match it. Saved with absolute paths, a run folder only resumed on the machine and in the
folder where it started; so the paths (data, model, starting adapter, base GGUF) are saved
relative to the run folder, and the training and held-out data are compared by a hash of their
files' content (``data_sha256``), not by where they lie. A run folder copied elsewhere with its
config and data resumes there; a resume on data whose content changed is refused.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..data.loaders import data_files
from ..errors import UsageError
from .config import ModelSection, TrainConfig

DATA_HASHES = "data_sha256"  # {"train": [...], "eval": [...]}: one hash per data path
# The settings that name a file or folder ("" when none; model.path may name the bundled model).
PATHS = (("model", "path"), ("model", "adapter"), ("rollout", "base_gguf"))
DATA = ("train", "eval")
# Optim settings a resume may change: how the update is split up and what it keeps in memory,
# not what it computes (micro-batches accumulate into one token mean).
MEMORY_ONLY = ("micro_batch", "gradient_checkpointing")
# Run settings a resume may change: how long it runs, what it keeps for reading afterwards.
RESUME_MAY_CHANGE = ("steps", "save_rollouts")
_NOT_PATHS = ("", ModelSection.path)  # the bundled model's name, "smollm2", is no path


def saved_config(config: TrainConfig, run: str | Path) -> dict[str, Any]:
    """``config`` as the run folder ``run`` keeps it: paths relative to ``run`` (relative
    paths in ``config`` are relative to the working folder), and the hash of each data path's
    content."""
    saved = relative_paths(absolute_paths(config.to_dict(), Path.cwd()), run)
    saved[DATA_HASHES] = {part: [data_hash(p) for p in getattr(config.data, part)] for part in DATA}
    return saved


def absolute_paths(saved: dict[str, Any], run: str | Path) -> dict[str, Any]:
    """A saved config with its relative paths resolved against its run folder ``run`` (absolute
    ones, as older run folders saved them, are kept)."""
    return _map_paths(saved, lambda path: _absolute(path, run))


def relative_paths(saved: dict[str, Any], run: str | Path) -> dict[str, Any]:
    """A config with absolute paths, as the run folder ``run`` keeps it: paths relative to it."""
    return _map_paths(saved, lambda path: _relative(path, run))


def _map_paths(saved: dict[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    """A copy of ``saved`` with ``change`` applied to every path it names."""
    copy = {
        name: dict(value) if isinstance(value, dict) else value for name, value in saved.items()
    }
    for section, key in PATHS:
        if key in copy.get(section, {}):
            copy[section][key] = change(copy[section][key])
    for part in DATA:
        if part in copy.get("data", {}):
            copy["data"][part] = [change(path) for path in copy["data"][part]]
    return copy


def check_same_run(saved: dict[str, Any], config: TrainConfig, run: str | Path) -> None:
    """Refuse to resume the run in ``run`` (its ``config.json``: ``saved``) with another
    ``config``. ``run.steps`` may differ (a finished run can be extended), so may
    ``run.save_rollouts`` (what it keeps for reading, not what it computes), and so may the
    :data:`MEMORY_ONLY` settings (a run that ran out of memory resumes with smaller
    micro-batches); data is compared by content where the saved config has its hashes (else
    by path, as it was saved)."""
    theirs = _with_defaults(absolute_paths(saved, run))
    mine = absolute_paths(config.to_dict(), Path.cwd())
    hashes = theirs.pop(DATA_HASHES, None)
    if isinstance(hashes, dict):  # else a run folder saved before the hashes: by path
        for part in DATA:
            theirs["data"][part] = hashes.get(part)
            mine["data"][part] = [data_hash(path) for path in getattr(config.data, part)]
    for name in RESUME_MAY_CHANGE:
        theirs["run"][name] = mine["run"][name] = None
    for name in MEMORY_ONLY:  # they change memory and speed, not what the run computes
        theirs["optim"][name] = mine["optim"][name] = None
    changed = sorted(name for name in mine if mine.get(name) != theirs.get(name))
    if changed:
        what = ", ".join(changed)
        content = " (the data's content)" if mine["data"] != theirs.get("data") else ""
        raise UsageError(
            f"{run} holds a training run with another config (sections {what} differ"
            f"{content}); use another output folder"
        )


def data_hash(path: str | Path) -> str:
    """``sha256:`` over a data file's bytes, or over a folder's data files (their paths within
    it and their bytes: the files ``longread train`` reads), wherever the folder lies."""
    target = Path(path)
    if not target.is_dir():
        return "sha256:" + _file_sha256(target) if target.is_file() else "missing"
    digest = hashlib.sha256()
    for file in data_files(target):
        digest.update(f"{file.relative_to(target).as_posix()}\0{_file_sha256(file)}\n".encode())
    return "sha256:" + digest.hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _relative(path: str, run: str | Path) -> str:
    if path in _NOT_PATHS or not Path(path).is_absolute():
        return path
    try:
        return Path(os.path.relpath(path, Path(run).resolve())).as_posix()
    except ValueError:  # another drive (Windows): no relative path exists
        return path


def _absolute(path: str, base: str | Path) -> str:
    if path in _NOT_PATHS:
        return path
    candidate = Path(path).expanduser()
    return str(candidate if candidate.is_absolute() else (Path(base) / candidate).resolve())


# Settings added with a default that trains differently from before: a config saved without
# one ran with this value, so that is what resuming it must ask for.
_BEFORE = {"optim": {"minibatches": 1}}


def _with_defaults(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved config with the settings added to longread since it was written at their
    defaults (or, for :data:`_BEFORE`, at the value the run had): a new option left alone
    must not block resuming an older run, nor silently change how it trains."""
    defaults = TrainConfig().to_dict()
    for section, values in _BEFORE.items():
        defaults[section] = {**defaults[section], **values}
    return {
        name: {**defaults[name], **section}
        if isinstance(section, dict) and name in defaults
        else section
        for name, section in {**defaults, **saved}.items()
    }
