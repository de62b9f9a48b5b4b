"""The run folder's durable store: rows, upserts, config.json and resume checks."""

from __future__ import annotations

import json
import sqlite3

import pytest

from longread import __version__
from longread.errors import UsageError
from longread.eval.scoring import score_answer
from longread.eval.store import DONE, FAILED, RunStore, SampleResult, run_config
from longread.llm.factory import BackendSettings


def done(sample_id: str, reply: str = "\\boxed{Paris}", **extra) -> SampleResult:
    score = score_answer(reply, ["Paris"]).to_dict()
    cost = {"calls": 2, "prompt_tokens": 100, "completion_tokens": 5, "seconds": 0.5}
    return SampleResult(
        sample_id, DONE, "qa", score, cost, trace=f"traces/{sample_id}.json", **extra
    )


def failed(sample_id: str) -> SampleResult:
    score = score_answer(None, ["Paris"]).to_dict()
    return SampleResult(sample_id, FAILED, "qa", score, error="BackendError: 500")


def test_rows_survive_reopening_in_order(tmp_path):
    with RunStore(tmp_path / "run") as store:
        store.record(done("b", dataset="hotpot", context_length=8000))
        store.record(failed("a"))
    with RunStore(tmp_path / "run") as store:
        assert store.done_ids() == {"b"}
        assert store.failed_ids() == {"a"}
        first, second = store.results()
    assert first == done("b", dataset="hotpot", context_length=8000)
    assert (second.sample_id, second.error, second.score["null"]) == (
        "a",
        "BackendError: 500",
        True,
    )
    assert (tmp_path / "run" / "traces").is_dir()


def test_a_retried_failure_becomes_done_in_place(tmp_path):
    with RunStore(tmp_path) as store:
        store.record(failed("a"))
        store.record(done("z"))
        store.record(done("a"))
        assert store.failed_ids() == set()
        assert store.done_ids() == {"a", "z"}
        rows = store.results()
    assert [(r.sample_id, r.status, r.attempts, r.error) for r in rows] == [
        ("a", DONE, 2, None),
        ("z", DONE, 1, None),
    ]


def test_a_reader_sees_rows_while_the_writer_is_open(tmp_path):
    writer = RunStore(tmp_path)
    writer.record(done("a"))
    reader = sqlite3.connect(tmp_path / "results.sqlite")
    assert reader.execute("SELECT sample_id, status FROM results").fetchall() == [("a", "done")]
    assert reader.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    reader.close()
    writer.close()


def test_headline_is_sub_em_or_ruler_match_all():
    assert done("a", reply="It is Paris").headline == 1.0
    assert done("a", reply="\\boxed{Rome}").headline == 0.0
    ruler = score_answer("\\boxed{11}", ["11", "22"], kind="ruler").to_dict()
    assert SampleResult("r", DONE, "ruler", ruler).headline == 0.5


def settings(**overrides) -> BackendSettings:
    return BackendSettings(
        backend="openai", base_url="http://h/v1", api_key="sk-secret", **overrides
    )


def test_config_records_how_the_run_was_built_without_the_key(tmp_path):
    (tmp_path / "d.jsonl").write_text("")
    config = run_config("memagent", {"chunk_tokens": 5000}, settings(), tmp_path / "d.jsonl")
    with RunStore(tmp_path / "run") as store:
        store.save_config(config)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["agent"] == "memagent"
    assert saved["agent_config"] == {"chunk_tokens": 5000}
    assert saved["data"] == str((tmp_path / "d.jsonl").resolve())
    assert saved["backend"]["base_url"] == "http://h/v1"
    assert "api_key" not in saved["backend"]
    assert "sk-secret" not in (tmp_path / "run" / "config.json").read_text()
    assert saved["versions"]["longread"] == __version__
    assert saved["versions"]["python"].count(".") == 2
    assert saved["started"]


def test_resuming_with_the_same_settings_is_noted(tmp_path):
    with RunStore(tmp_path) as store:
        store.save_config(run_config("rag", {"rag_k": 4}, settings(), "d.jsonl"))
        # Another server for the same run is fine: only agent, agent config and data must match.
        store.save_config(run_config("rag", {"rag_k": 4}, settings(timeout=5.0), "d.jsonl"))
        saved = store.load_config()
    assert saved["backend"]["timeout"] == 600.0
    assert [r["backend"]["timeout"] for r in saved["resumed"]] == [5.0]


@pytest.mark.parametrize(
    ("agent", "agent_config", "data", "key"),
    [
        ("memagent", {"rag_k": 4}, "d.jsonl", "agent"),
        ("rag", {"rag_k": 8}, "d.jsonl", "agent_config.rag_k"),
        ("rag", {"rag_k": 4}, "other.jsonl", "data"),
    ],
)
def test_resuming_with_other_settings_is_refused(tmp_path, agent, agent_config, data, key):
    with RunStore(tmp_path) as store:
        store.save_config(run_config("rag", {"rag_k": 4}, settings(), "d.jsonl"))
        with pytest.raises(UsageError, match=rf"different {key} \(saved") as error:
            store.save_config(run_config(agent, agent_config, settings(), data))
        assert "--out" in str(error.value)
        assert "resumed" not in store.load_config()


def test_a_file_is_not_a_run_folder(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        RunStore(tmp_path / "f")
    with RunStore(tmp_path / "empty") as store, pytest.raises(UsageError, match=r"no config\.json"):
        store.load_config()
