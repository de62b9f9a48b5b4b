"""``bench/exit_depth.py``: share read and seconds against needle depth, from eval run folders.

The run folders are written with the evaluation's own store (``RunStore``), as ``eval run``
writes them; the numbers put in are chosen so that each cell of the table can be worked out
by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from longread.data.loaders import load_samples
from longread.eval.provenance import data_identity
from longread.eval.store import RunStore, SampleResult

from .script_loader import ROOT, load_script

BENCH = "bench/exit_depth.py"
exit_depth = load_script(BENCH)

DEPTHS = {"a": 0.1, "b": 0.5, "c": 0.9}


def write_data(path: Path) -> Path:
    with open(path, "w") as handle:
        for sample, depth in DEPTHS.items():
            record = {"id": sample, "question": "q?", "context": "text", "answers": ["7"],
                      "meta": {"dataset": "ruler", "depth": depth}}  # fmt: skip
            handle.write(json.dumps(record) + "\n")
    return path


def write_run(folder: Path, data: Path, read: dict[str, int], seconds: dict[str, float],
              right: set[str]) -> Path:  # fmt: skip
    store = RunStore(folder, writer=True)
    identity = data_identity(load_samples(data))  # as `eval run` records the data it read
    store.save_config({"agent": "memagent", "data": str(data), **identity})
    for sample, chunks_read in read.items():
        score = {"match_all": 100.0 if sample in right else 0.0}
        cost = {"chunks": 10, "chunks_read": chunks_read, "seconds": seconds[sample]}
        store.record(SampleResult(sample, "done", "ruler", score, cost))
    store.close()
    return folder


def test_the_ideal_reads_up_to_the_needles_chunk() -> None:
    assert exit_depth.ideal_share(0.0, 10) == 0.1  # a needle at the start: one chunk
    assert exit_depth.ideal_share(0.55, 10) == 0.6  # in chunk 6 of 10
    assert exit_depth.ideal_share(1.0, 10) == 1.0  # at the very end: every chunk


def rows_of(lines: list[str]) -> dict[str, list[str]]:
    cells = [line.strip("| ").split(" | ") for line in lines[2:]]
    return {row[0]: row[1:] for row in cells}


def test_the_table_pairs_the_runs_by_sample_and_bins_by_depth(tmp_path: Path) -> None:
    data = write_data(tmp_path / "needles.jsonl")
    # read 3 of 10 where the ideal is 2 (needle at 10%), 5 where it is 6 (50%), all at 90%
    on = write_run(tmp_path / "on", data, {"a": 3, "b": 5, "c": 10},
                   {"a": 2.0, "b": 6.0, "c": 10.0}, right={"a", "b"})  # fmt: skip
    off = write_run(tmp_path / "off", data, {"a": 10, "b": 10, "c": 10},
                    {"a": 10.0, "b": 12.0, "c": 10.0}, right={"a", "b", "c"})  # fmt: skip
    rows = rows_of(exit_depth.table(on, off, bins=3))
    # columns: n, read, ideal, s/sample on, off, speed-up, acc on, acc off
    assert rows["0%-33%"] == ["1", "30%", "20%", "2.0", "10.0", "5.00x", "100%", "100%"]
    assert rows["33%-67%"] == ["1", "50%", "60%", "6.0", "12.0", "2.00x", "100%", "100%"]
    assert rows["67%-100%"] == ["1", "100%", "100%", "10.0", "10.0", "1.00x", "0%", "100%"]
    # means of the three: 6 s on, 10.67 s off, so 1.78x; reads 60% against the ideal's 60%
    assert rows["all"] == ["3", "60%", "60%", "6.0", "10.7", "1.78x", "67%", "100%"]


def test_without_an_off_run_the_table_has_the_exit_on_only(tmp_path: Path) -> None:
    data = write_data(tmp_path / "needles.jsonl")
    on = write_run(tmp_path / "on", data, {"a": 2, "c": 10}, {"a": 2.0, "c": 10.0}, right={"a"})
    rows = rows_of(exit_depth.table(on, None, bins=2))
    assert rows["0%-50%"] == ["1", "20%", "20%", "2.0", "-", "-", "100%", "-"]
    assert rows["50%-100%"] == ["1", "100%", "100%", "10.0", "-", "-", "0%", "-"]


def test_only_samples_finished_in_both_runs_are_paired(tmp_path: Path) -> None:
    data = write_data(tmp_path / "needles.jsonl")
    on = write_run(tmp_path / "on", data, {"a": 2, "b": 6}, {"a": 2.0, "b": 6.0}, right={"a"})
    off = write_run(tmp_path / "off", data, {"b": 10}, {"b": 12.0}, right={"b"})
    rows = rows_of(exit_depth.table(on, off, bins=1))
    assert rows["all"] == ["1", "60%", "60%", "6.0", "12.0", "2.00x", "0%", "100%"]


def test_runs_of_different_data_are_not_paired(tmp_path: Path) -> None:
    on = write_run(tmp_path / "on", write_data(tmp_path / "a.jsonl"), {"a": 2}, {"a": 2.0}, {"a"})
    other = tmp_path / "b.jsonl"
    write_data(other)
    other.write_text(other.read_text().replace('"q?"', '"another question?"'))
    off = write_run(tmp_path / "off", other, {"a": 10}, {"a": 10.0}, {"a"})
    result = run_bench(str(on), "--off", str(off))
    assert result.returncode != 0
    assert (
        result.stderr.strip()
        == f"exit_depth.py: {on} and {off} read different data: nothing to pair"
    )


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / BENCH), *args], capture_output=True, text=True
    )


def test_a_folder_that_is_no_run_is_refused_in_one_line(tmp_path: Path) -> None:
    result = run_bench(str(tmp_path))
    assert result.returncode != 0
    assert (
        result.stderr.strip()
        == f"exit_depth.py: {tmp_path} is not an eval run folder (no config.json)"
    )
