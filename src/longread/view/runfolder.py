"""An eval run folder read without writing to it: the viewer may look at a run that
``longread eval run`` is still writing, or at committed results, and must change neither.

``RunStore`` opens its database for writing (it creates tables and a WAL), so the rows are read
with ``store.read_results`` (a read-only connection); the report's numbers still come from the
report's own code, fed the same rows ``report.load_runs`` builds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.loaders import data_files, iter_samples
from ..errors import LongreadError, UsageError
from ..eval import report
from ..eval.provenance import combined_hash, sample_digest
from ..eval.sanitize import resolve_path
from ..eval.store import SampleResult


def is_run_folder(path: Path) -> bool:
    """What ``eval report`` accepts as a run folder: a folder with ``config.json``."""
    return path.is_dir() and (path / "config.json").is_file()


def read_config(run_dir: Path) -> dict[str, Any]:
    """``config.json``; a UsageError when it is not a JSON object."""
    path = run_dir / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise UsageError(f"{path} is not a run configuration (not a JSON object)")
    return config


def report_rows(
    run_dir: Path, config: dict[str, Any], results: list[SampleResult]
) -> list[dict[str, Any]]:
    """The rows ``report.load_runs([run_dir])`` gives, built from rows read read-only."""
    (label,) = report.agent_labels([(run_dir, config)])
    return report.result_rows(run_dir, label, results)


@dataclass(frozen=True)
class ReportTable:
    """One dataset's table of ``longread eval report``, cell for cell."""

    dataset: str
    columns: list[str]
    rows: list[list[str]]


def report_tables(rows: list[dict[str, Any]]) -> tuple[list[ReportTable], str]:
    """The tables of ``report.markdown_report(rows)`` and its legend, read back from its
    Markdown so the page shows exactly the numbers the report prints."""
    tables: list[ReportTable] = []
    legend: list[str] = []
    for line in report.markdown_report(rows).splitlines():
        if line.startswith("## "):
            tables.append(ReportTable(line[3:], [], []))
        elif line.startswith("|") and tables:
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if all(set(cell) <= set("-:") for cell in cells):
                continue  # the alignment line
            if tables[-1].columns:
                tables[-1].rows.append(cells)
            else:
                tables[-1].columns.extend(cells)
        elif line and not line.startswith("#"):
            legend.append(line)
    return tables, " ".join(legend)


def run_time(run_dir: Path) -> dict[str, Any]:
    """The report's "Run time" numbers for this folder (``sessions.jsonl`` summed)."""
    (times,) = report.run_times([run_dir])
    wall = times["wall_seconds"]
    return {**times, "overhead_share": times["overhead_seconds"] / wall if wall else None}


def data_path(run_dir: Path, config: dict[str, Any]) -> Path | None:
    """The data the run read: ``config.json`` writes it relative to the run folder (when it
    lies inside the folder or beside it in the same repository), under ``~``, or absolute."""
    data = config.get("data")
    return resolve_path(data, run_dir) if isinstance(data, str) else None


def gold_answers(data: Path) -> tuple[dict[str, list[str]], str]:
    """Sample id -> gold answers, read from the run's data one sample at a time, and the
    data's ``data_hash`` (what the run recorded of the data it read)."""
    files = data_files(data) if data.is_dir() else [data]
    gold: dict[str, list[str]] = {}
    digests: list[str] = []
    for file in files:
        for sample in iter_samples(file):
            gold[sample.id] = sample.answers
            digests.append(sample_digest(sample))
    return gold, combined_hash(digests)


def gold_or_reason(
    data: Path | None, data_hash: str | None = None
) -> tuple[dict[str, list[str]], str | None]:
    """``gold_answers`` and None, or nothing and why the gold is unknown. With the run's
    ``data_hash``, data whose content changed since the run is refused: its answers may not be
    the ones the run was scored against."""
    if data is None:
        return {}, "the run's config.json names no data"
    if not data.exists():
        return {}, f"the run's data is not at {data}"
    try:
        gold, found = gold_answers(data)
    except (LongreadError, OSError) as exc:
        return {}, f"the run's data could not be read: {exc}"
    if data_hash and found != data_hash:
        return {}, f"the data at {data} is not the data the run read (its content has changed)"
    return gold, None
