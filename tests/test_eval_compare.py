"""``longread eval compare``: two runs of one data set, paired by sample.

The run folders are written with the evaluation's own store, as ``eval run`` writes them; the
numbers are chosen so that every cell can be worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from longread.cli.main import cli
from longread.eval.compare import mcnemar_exact
from longread.eval.store import RunStore, SampleResult


def write_run(folder: Path, *, probe: bool, right: set[str], seconds: dict[str, float],
              failed: set[str] = frozenset(), data_hash: str = "sha256:same",
              strict: set[str] | None = None, machine: str | None = None) -> str:  # fmt: skip
    """A HotpotQA-like run: sub-EM 1 for ``right``, strict 1 for ``strict`` (default: the
    same samples), ``failed`` samples raised; one session record, naming the CPU kernels
    ``machine`` when given."""
    store = RunStore(folder, writer=True)
    if machine:
        store.session_fields["machine"] = machine
    agent_config = {"chunk_tokens": 1000, "exit_probe": probe}
    store.save_config({"agent": "memagent", "agent_config": agent_config,
                       "data": "data/hotpotqa_8192.jsonl", "data_hash": data_hash})  # fmt: skip
    strict = right if strict is None else strict
    for sample, time in seconds.items():
        if sample in failed:
            store.record(SampleResult(sample, "failed", "qa", {}, {}, error="boom"))
            continue
        score = {"sub_em": float(sample in right), "strict": float(sample in strict)}
        cost = {"seconds": time}
        if probe:
            cost |= {"chunks": 10, "chunks_read": 5}
        store.record(SampleResult(sample, "done", "qa", score, cost))
    store.save_summary({"ran": len(seconds)})
    store.close()
    return str(folder)


def cells(output: str, first: str) -> list[str]:
    line = next(line for line in output.splitlines() if line.startswith(f"| {first} "))
    return [c.strip() for c in line.strip("|").split("|")]


def test_mcnemar_exact_is_the_binomial_tail_doubled() -> None:
    assert mcnemar_exact(0, 0) == 1.0  # nothing discordant: no evidence either way
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)  # 6 of 6 one way: 2 x (1/2)^6
    assert mcnemar_exact(5, 1) == pytest.approx(2 * 7 / 64)  # (C(6,0) + C(6,1)) / 2^6, doubled
    assert mcnemar_exact(3, 3) == 1.0


def test_runs_pair_by_sample_and_leave_out_what_one_did_not_finish(tmp_path: Path) -> None:
    seconds = {"a": 10.0, "b": 20.0, "c": 30.0, "d": 40.0}
    off = write_run(tmp_path / "off", probe=False, right={"a", "b"}, seconds=seconds)
    on = write_run(tmp_path / "on", probe=True, right={"b", "c"}, failed={"d"},
                   seconds={"a": 5.0, "b": 10.0, "c": 15.0, "d": 1.0})  # fmt: skip
    result = CliRunner().invoke(cli, ["eval", "compare", off, on])
    assert result.exit_code == 0, result.output
    row = cells(result.output, "hotpotqa_8192")
    assert row[1:3] == ["memagent (exit_probe False)", "memagent (exit_probe True)"]
    # n, A right, B right, B - A, only A, only B, p (1 against 1), s/sample both, speed-up
    assert row[3:12] == ["3", "2 (67%)", "2 (67%)", "+0", "1", "1", "1.000", "20.0", "10.0"]
    assert row[12:] == ["2.00x", "-", "50%"]
    assert "1 sample(s) finished by one run only are left out." in result.output


def test_several_pairs_get_a_pooled_row(tmp_path: Path) -> None:
    times = {"a": 10.0, "b": 10.0}
    runs = [
        write_run(tmp_path / "off1", probe=False, right={"a", "b"}, seconds=times),
        write_run(tmp_path / "on1", probe=True, right={"a"}, seconds=times),
        write_run(tmp_path / "off2", probe=False, right={"a", "b"}, seconds=times),
        write_run(tmp_path / "on2", probe=True, right=set(), seconds=times),
    ]
    result = CliRunner().invoke(cli, ["eval", "compare", *runs])
    assert result.exit_code == 0, result.output
    pooled = cells(result.output, "pooled")
    # 4 paired samples: A 4 right, B 1; 3 only A, none only B: p = 2 x (1/2)^3
    assert pooled[3:10] == ["4", "4 (100%)", "1 (25%)", "-75", "3", "0", "0.250"]


def test_the_metric_decides_what_counts_as_right(tmp_path: Path) -> None:
    times = {"a": 1.0, "b": 1.0}
    off = write_run(tmp_path / "off", probe=False, right={"a", "b"}, seconds=times)
    # "b" right when judged leniently, but not boxed (strict 0)
    on = write_run(tmp_path / "on", probe=True, right={"a", "b"}, strict={"a"}, seconds=times)
    lenient = CliRunner().invoke(cli, ["eval", "compare", off, on])
    strict = CliRunner().invoke(cli, ["eval", "compare", off, on, "--metric", "strict"])
    assert cells(lenient.output, "hotpotqa_8192")[4:6] == ["2 (100%)", "2 (100%)"]
    assert cells(strict.output, "hotpotqa_8192")[4:6] == ["2 (100%)", "1 (50%)"]


def test_the_json_holds_every_paired_sample(tmp_path: Path) -> None:
    off = write_run(tmp_path / "off", probe=False, right={"a"}, seconds={"a": 2.0, "b": 4.0})
    on = write_run(tmp_path / "on", probe=True, right={"b"}, seconds={"a": 1.0, "b": 2.0})
    out = tmp_path / "reports" / "pairs.jsonl"
    result = CliRunner().invoke(cli, ["eval", "compare", off, on, "--json", str(out)])
    assert result.exit_code == 0, result.output
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["only_a"] == ["a"] and record["only_b"] == ["b"]
    assert record["mcnemar_p"] == 1.0
    assert record["samples"][1] == {
        "sample_id": "b", "a_right": False, "b_right": True, "a_seconds": 4.0, "b_seconds": 2.0,
    }  # fmt: skip


def test_runs_of_different_data_are_refused(tmp_path: Path) -> None:
    times = {"a": 1.0}
    off = write_run(tmp_path / "off", probe=False, right={"a"}, seconds=times)
    on = write_run(tmp_path / "on", probe=True, right={"a"}, seconds=times, data_hash="sha256:x")
    result = CliRunner().invoke(cli, ["eval", "compare", off, on])
    assert result.exit_code != 0
    assert "read different data" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_an_odd_number_of_folders_or_a_missing_one_is_refused(tmp_path: Path) -> None:
    off = write_run(tmp_path / "off", probe=False, right={"a"}, seconds={"a": 1.0})
    odd = CliRunner().invoke(cli, ["eval", "compare", off])
    assert odd.exit_code != 0 and "in pairs" in odd.output
    missing = CliRunner().invoke(cli, ["eval", "compare", off, str(tmp_path / "nowhere")])
    assert missing.exit_code != 0 and "not an eval run folder" in missing.output
    assert not (tmp_path / "nowhere").exists()  # a typo makes no folder


AVX2 = "SSE3 AVX AVX2 FMA"
AVX512 = "SSE3 AVX AVX2 FMA AVX512 AVX512_VNNI"


def test_runs_on_other_cpu_kernels_are_said_to_part_for_that_alone(tmp_path: Path) -> None:
    """Greedy replies of a small model change with the CPU's kernels: a pair made on two
    machines is flagged, one made on one machine (or with nothing recorded) is not."""
    times = {"a": 10.0, "b": 10.0}
    old = write_run(tmp_path / "old", probe=False, right={"a"}, seconds=times, machine=AVX2)
    new = write_run(tmp_path / "new", probe=True, right={"a"}, seconds=times, machine=AVX512)
    same = write_run(tmp_path / "same", probe=True, right={"a"}, seconds=times, machine=AVX2)
    unknown = write_run(tmp_path / "unknown", probe=True, right={"a"}, seconds=times)
    result = CliRunner().invoke(cli, ["eval", "compare", old, new])
    assert result.exit_code == 0, result.output
    assert (
        "hotpotqa_8192: A and B ran on different CPU kernels (B's with AVX512 AVX512_VNNI)"
        in result.output
    )
    assert "pair runs made on one machine" in result.output
    for other in (same, unknown):
        result = CliRunner().invoke(cli, ["eval", "compare", old, other])
        assert result.exit_code == 0, result.output
        assert "different CPU kernels" not in result.output
    record = tmp_path / "pairs.jsonl"
    CliRunner().invoke(cli, ["eval", "compare", old, new, "--json", str(record)])
    pair = json.loads(record.read_text())
    assert (pair["machines_a"], pair["machines_b"]) == ([AVX2], [AVX512])
