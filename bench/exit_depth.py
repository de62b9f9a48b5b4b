"""Share read and seconds per sample against needle depth, from evaluation runs (issue 29).

    .venv/bin/python bench/exit_depth.py RUN [--off RUN_OFF] [--bins 3]

RUN is an ``eval run`` folder of a needle set read with an exit on (``--exit-probe on`` or
``--exit-gate on``): RULER's niah samples record their needle's depth (``meta.depth``), and
each result records the chunks read. ``--off`` names the same set read with the exit off
(every chunk): the table then pairs the two by sample. Per depth bin it prints the share of
the document read against the ideal (read up to the needle's chunk, then stop: the chunk at
``depth`` of the document, so within one chunk of the truth), seconds per sample, the speed-up
and accuracy both ways. ``bench/exit_gate.py`` makes its own documents (``make demo``'s
keyless layout) and runs them; this reads the runs the results script and
``recipes/smollm2/check_stage.sh`` already made, in the wordings the adapter was checked on.
Seconds compare only between runs made on the same machine while it was otherwise quiet.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path
from statistics import fmean
from typing import Any

from longread.data.loaders import data_files, load_files
from longread.eval.store import SampleResult, read_results
from longread.view.runfolder import data_path


def depths_of(run: Path) -> dict[str, float]:
    """Each sample's needle depth (0..1), from the data the run's config.json names."""
    data = data_path(run, load_config(run))
    if data is None or not data.exists():
        sys.exit(f"exit_depth.py: the data {run} read is not at {data} (moved?)")
    samples = load_files(data_files(data) if data.is_dir() else [data])
    depths = {s.id: s.meta.get("depth") for s in samples}
    return {sample: float(depth) for sample, depth in depths.items() if depth is not None}


def load_config(run: Path) -> dict[str, Any]:
    path = run / "config.json"
    if not path.is_file():
        sys.exit(f"exit_depth.py: {run} is not an eval run folder (no config.json)")
    config: dict[str, Any] = json.loads(path.read_text())
    return config


def done(run: Path) -> dict[str, SampleResult]:
    """The run's finished samples by id; exits with a message when it has none."""
    results = {r.sample_id: r for r in read_results(run) if r.status == "done"}
    if not results:
        sys.exit(f"exit_depth.py: {run} holds no finished samples (is it an eval run folder?)")
    return results


def ideal_share(depth: float, chunks: int) -> float:
    """Read up to the chunk holding the needle at ``depth``, then stop."""
    return min(chunks, math.floor(depth * chunks) + 1) / chunks


def table(run: Path, off: Path | None, bins: int) -> list[str]:
    on_results, depths = done(run), depths_of(run)
    off_results = done(off) if off else {}
    if off and load_config(off).get("data_hash") != load_config(run).get("data_hash"):
        sys.exit(f"exit_depth.py: {run} and {off} read different data: nothing to pair")
    ids = [i for i in on_results if i in depths]
    if not ids:
        sys.exit(f"exit_depth.py: no sample of {run} records a needle depth (meta.depth)")
    ids = [i for i in ids if not off or i in off_results]
    if not ids:
        sys.exit(f"exit_depth.py: {run} and {off} have no finished sample in common")
    lines = [
        "| depth | n | read | ideal | s/sample on | s/sample off | speed-up | acc on | acc off |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    edges = [k / bins for k in range(bins + 1)]
    groups = [
        (
            f"{lo:.0%}-{hi:.0%}",
            [i for i in ids if lo <= depths[i] < hi or (hi == 1 and depths[i] == 1)],
        )
        for lo, hi in itertools.pairwise(edges)
    ]
    for label, group in [*groups, ("all", ids)]:
        if group:
            lines.append(row(label, group, on_results, off_results, depths))
    return lines


def row(label: str, ids: list[str], on: dict[str, SampleResult],
        off: dict[str, SampleResult], depths: dict[str, float]) -> str:  # fmt: skip
    def share(r: SampleResult) -> float:
        return r.cost.get("chunks_read", r.cost["chunks"]) / r.cost["chunks"]

    read = fmean(share(on[i]) for i in ids)
    ideal = fmean(ideal_share(depths[i], on[i].cost["chunks"]) for i in ids)
    seconds_on = fmean(on[i].cost["seconds"] for i in ids)
    cells = [label, str(len(ids)), f"{read:.0%}", f"{ideal:.0%}", f"{seconds_on:.1f}"]
    if off:
        seconds_off = fmean(off[i].cost["seconds"] for i in ids)
        cells += [f"{seconds_off:.1f}", f"{seconds_off / seconds_on:.2f}x"]
    else:
        cells += ["-", "-"]
    cells.append(f"{fmean(on[i].headline for i in ids):.0%}")
    cells.append(f"{fmean(off[i].headline for i in ids):.0%}" if off else "-")
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="eval run folder, read with the exit on")
    parser.add_argument("--off", type=Path, help="the same set read with the exit off")
    parser.add_argument("--bins", type=int, default=3, help="depth bins (default 3)")
    args = parser.parse_args()
    if args.bins < 1:
        sys.exit("exit_depth.py: --bins must be at least 1")
    for run in filter(None, (args.run, args.off)):
        load_config(run)  # exits with a message when it is no run folder
    print("\n".join(table(args.run, args.off, args.bins)))


if __name__ == "__main__":
    main()
