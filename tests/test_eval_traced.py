"""``longread.eval.traced``: a finished run read back as (trace, data record, mark) per sample,
the input of the campaign's counters (recipes/smollm2). The runs are made by ``run_eval``
itself, over a scripted backend, so the folders are laid out exactly as ``eval run`` lays them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longread.errors import BackendError, UsageError
from longread.eval.runner import run_eval
from longread.eval.traced import run_samples, traced_samples

from .eval_helpers import AnswerBackend, factory, open_store, question, sample

SAMPLES = [sample("a", ["blue"]), sample("b", ["red"]), sample("c", ["green"])]


def write_data(path: Path) -> Path:
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in SAMPLES))
    return path


async def finished_run(tmp_path: Path) -> Path:
    """Sample a answered right, b wrong, c failed (its backend raised)."""
    data = write_data(tmp_path / "data.jsonl")
    backend = AnswerBackend(
        {question("a"): "\\boxed{blue}", question("b"): "\\boxed{yellow}",
         question("c"): BackendError("server answered 500")}
    )  # fmt: skip
    run_dir = tmp_path / "run"
    with open_store(run_dir, data=str(data)) as store:
        await run_eval(SAMPLES, factory(backend), store, concurrency=1, progress=False)
    return run_dir


async def test_each_finished_sample_comes_with_its_trace_its_record_and_its_mark(tmp_path):
    traced = traced_samples(await finished_run(tmp_path))

    assert [(t.sample.id, t.right) for t in traced] == [("a", True), ("b", False)]
    assert [t.run.answer for t in traced] == ["blue", "yellow"]
    assert traced[1].sample.answers == ["red"]  # the record, not the answer given
    assert traced[0].run.steps and traced[0].run.sample_id == "a"


async def test_a_sample_whose_trace_is_gone_is_left_out(tmp_path):
    run_dir = await finished_run(tmp_path)
    (run_dir / "traces" / "a.json").unlink()
    assert [t.sample.id for t in traced_samples(run_dir)] == ["b"]


async def test_a_folder_of_data_files_is_read_as_one_set(tmp_path):
    folder = tmp_path / "sets"
    (folder / "one").mkdir(parents=True)
    write_data(folder / "one" / "part.jsonl")
    run_dir = tmp_path / "run"
    open_store(run_dir, data=str(folder)).close()
    assert sorted(run_samples(run_dir)) == ["a", "b", "c"]


def test_a_folder_that_is_not_a_run_is_refused_in_one_line(tmp_path):
    with pytest.raises(UsageError, match="is not an eval run folder"):
        traced_samples(tmp_path)


async def test_a_run_whose_data_moved_is_refused_in_one_line(tmp_path):
    run_dir = await finished_run(tmp_path)
    (tmp_path / "data.jsonl").unlink()
    with pytest.raises(UsageError, match=r"data .*data\.jsonl is missing"):
        traced_samples(run_dir)
