"""An evaluation run read back sample by sample, for analyses of how the agent read.

Each finished sample comes with its trace (the steps), the data record it answered and whether
it was right. The campaign's counters (``recipes/smollm2``: lost needles, made-up numbers,
claims before the needle, cleared notes) need all three, and the run folder names its data
only through ``config.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from longread.data.loaders import data_files, load_files
from longread.data.records import Sample
from longread.errors import UsageError
from longread.eval.compare import is_right
from longread.eval.store import DONE, read_results
from longread.trace import Run


@dataclass(frozen=True)
class TracedSample:
    """One finished sample of a run: what the agent did, what it was asked, and its mark."""

    run: Run
    sample: Sample
    right: bool


def run_samples(run_dir: str | Path) -> dict[str, Sample]:
    """The data records a run folder read, by id: the data file, or folder of files, that its
    ``config.json`` names (relative to the folder; absolute in older runs)."""
    run_dir = Path(run_dir)
    try:
        config = json.loads((run_dir / "config.json").read_text())
    except FileNotFoundError:
        raise UsageError(f"{run_dir} is not an eval run folder (no config.json)") from None
    except ValueError as exc:
        raise UsageError(f"{run_dir}/config.json is not valid JSON: {exc}") from None
    data = run_dir / str(config.get("data") or "")
    if "data" not in config or not data.exists():
        raise UsageError(f"{run_dir}'s data {data} is missing")
    files = data_files(data) if data.is_dir() else [data]
    return {sample.id: sample for sample in load_files(files)}


def traced_samples(run_dir: str | Path, metric: str = "headline") -> list[TracedSample]:
    """Every finished sample of ``run_dir`` that has a trace, by sample id, right or wrong on
    ``metric`` (as ``eval compare`` counts it). Read-only: safe on a run still being written."""
    run_dir = Path(run_dir)
    samples = run_samples(run_dir)
    out = []
    for result in sorted(read_results(run_dir), key=lambda r: r.sample_id):
        trace = run_dir / result.trace if result.trace else None
        if result.status != DONE or trace is None or not trace.is_file():
            continue
        if result.sample_id not in samples:
            raise UsageError(f"{run_dir}: sample {result.sample_id} is not in the run's data")
        sample = samples[result.sample_id]
        out.append(TracedSample(Run.load(trace), sample, is_right(result, metric)))
    return out
