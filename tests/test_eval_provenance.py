"""What a run folder keeps on disk: no credentials anywhere, and paths that travel with it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from longread.data.loaders import load_samples, save_samples
from longread.eval.closed_book import Question, ask_closed_book
from longread.eval.sanitize import redact_text
from longread.eval.scoring import score_answer
from longread.eval.store import FAILED, RunStore, SampleResult, run_config
from longread.llm.base import SamplingParams
from longread.llm.factory import BackendSettings

from .eval_helpers import AnswerBackend, sample

SECRETS = ("pa55w0rd", "sk-body", "hf_abc123", "Bearer xyz", "sess-1", "alice")


def on_disk(folder: Path) -> str:
    """Every byte the store wrote under ``folder``, as text (the database included)."""
    return "".join(
        p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file()
    )


def secret_settings(**overrides) -> BackendSettings:
    return BackendSettings(
        backend="openai",
        base_url="https://alice:pa55w0rd@llm.example.com:8443/v1",
        api_key="sk-flag",
        extra_body={
            "api_key": "sk-body",
            "hf_token": "hf_abc123",
            "headers": {"Authorization": "Bearer xyz", "Accept": "json"},
            "sessionToken": "sess-1",
            "top_k": 20,
            "max_tokens": 64,
            "tokenizer": "gpt2",
        },
        **overrides,
    )


def test_config_json_holds_no_credentials_from_the_url_or_extra_body(tmp_path):
    data = tmp_path / "d.jsonl"
    save_samples([sample("a", ["Paris"])], data)
    config = run_config("full", {}, secret_settings(), data, load_samples(data))
    with RunStore(tmp_path / "run") as store:
        store.save_config(config)
        store.save_config(config)  # a resume writes the session's backend again
        saved = store.load_config()
    text = (tmp_path / "run" / "config.json").read_text()
    assert not [s for s in (*SECRETS, "sk-flag") if s in text]
    for backend in (saved["backend"], saved["resumed"][0]["backend"]):
        # What the run needs to be understood or rebuilt stays: host, port, path, settings.
        assert backend["base_url"] == "https://llm.example.com:8443/v1"
        assert backend["extra_body"] == {
            "api_key": "<redacted>",
            "hf_token": "<redacted>",
            "headers": {"Authorization": "<redacted>", "Accept": "json"},
            "sessionToken": "<redacted>",
            "top_k": 20,
            "max_tokens": 64,
            "tokenizer": "gpt2",
        }


def test_urls_in_text_lose_userinfo_and_key_like_query_values():
    text = "GET https://alice:pa55w0rd@h/v1/models?key=k1&api_key=k2&region=eu&max_tokens=5 failed"
    assert redact_text(text) == (
        "GET https://h/v1/models?key=<redacted>&api_key=<redacted>&region=eu&max_tokens=5 failed"
    )


def test_a_server_url_from_the_environment_loses_its_credentials(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://alice:pa55w0rd@localhost:8000")
    config = run_config("full", {}, BackendSettings(model="m"), "d.jsonl")
    assert config["backend"]["base_url"] == "http://localhost:8000/v1"


def test_a_config_built_elsewhere_is_written_without_credentials(tmp_path):
    # The trainer's held-out evaluation writes its own config through the same store.
    config = {
        "agent": "full",
        "agent_config": {},
        "data": "d.jsonl",
        "backend": {"backend": "openai", "base_url": "http://alice:pa55w0rd@h/v1",
                    "extra_body": {"password": "pa55w0rd"}},
    }  # fmt: skip
    with RunStore(tmp_path / "run") as store:
        store.save_config(config)
    assert "pa55w0rd" not in on_disk(tmp_path / "run")


def test_error_messages_in_the_database_and_summaries_lose_url_credentials(tmp_path):
    error = "BackendError: request to https://alice:pa55w0rd@h/v1/chat/completions failed"
    score = score_answer(None, ["Paris"]).to_dict()
    with RunStore(tmp_path / "run") as store:
        store.record(SampleResult("a", FAILED, "qa", score, error=error))
        store.save_summary({"failures": [{"error": error, "transient": True, "samples": 1}]})
        (row,) = store.results()
    assert row.error == "BackendError: request to https://h/v1/chat/completions failed"
    assert "pa55w0rd" not in on_disk(tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["failures"][0]["error"] == row.error


async def test_the_closed_book_log_header_holds_no_credentials(tmp_path):
    header = {"base_url": "http://alice:pa55w0rd@h/v1", "extra_body": {"api_key": "sk-body"}}
    questions = [Question("q1", "Capital of France?", ("Paris",))]
    backend = AnswerBackend({"Capital of France?": "Paris"})
    log = tmp_path / "closed.log"
    params = SamplingParams(max_tokens=8)
    await ask_closed_book(questions, backend, params, log, header, progress=False)
    assert "pa55w0rd" not in log.read_text() and "sk-body" not in log.read_text()
    # The same settings resume the log: the question is not asked again.
    again = AnswerBackend({})
    (answer,) = await ask_closed_book(questions, again, params, log, header, progress=False)
    assert answer.id == "q1" and again.calls == []


# -- paths that travel ------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A home folder of our own, so what lies under ``~`` is known."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


def checkout(root: Path) -> Path:
    """A folder that is a git checkout (a ``.git`` folder is all that is looked for)."""
    (root / ".git").mkdir(parents=True)
    return root


def saved_paths(run_dir: Path, settings: BackendSettings, data: Path) -> dict:
    config = run_config("full", {}, settings, data, load_samples(data))
    with RunStore(run_dir) as store:
        store.save_config(config)
        return store.load_config()


def test_data_beside_the_run_in_the_same_checkout_is_written_relative_to_it(tmp_path, home):
    repo = checkout(tmp_path / "repo")
    data = repo / "results" / "data" / "d.jsonl"
    data.parent.mkdir(parents=True)
    save_samples([sample("a", ["Paris"])], data)
    tokenizer = repo / "tokenizers" / "tokenizer.json"
    tokenizer.parent.mkdir()
    tokenizer.write_text("{}")
    settings = BackendSettings(backend="openai", base_url="h", tokenizer=str(tokenizer))
    saved = saved_paths(repo / "results" / "runs" / "r", settings, data)
    assert saved["data"] == "../../data/d.jsonl"
    assert saved["backend"]["tokenizer"] == "../../../tokenizers/tokenizer.json"


def test_paths_under_home_are_written_under_tilde_and_others_as_given(tmp_path, home):
    mine = home / "datasets" / "d.jsonl"
    mine.parent.mkdir()
    save_samples([sample("a", ["Paris"])], mine)
    tokenizer = tmp_path / "shared" / "tokenizer.json"
    tokenizer.parent.mkdir()
    tokenizer.write_text("{}")
    settings = BackendSettings(backend="openai", base_url="h", tokenizer=str(tokenizer))
    saved = saved_paths(tmp_path / "runs" / "r", settings, mine)  # no checkout around it
    assert saved["data"] == "~/datasets/d.jsonl"
    assert saved["backend"]["tokenizer"] == str(tokenizer.resolve())  # the user's own path


def test_no_absolute_machine_path_is_written_for_the_embedded_model(tmp_path, home, monkeypatch):
    # The converted model sits in the cache under ~, the package's files in the checkout's venv.
    monkeypatch.setenv("LONGREAD_CACHE_DIR", str(home / ".cache" / "longread"))
    repo = checkout(tmp_path / "repo")
    model = repo / ".venv" / "site-packages" / "model" / "m.Q4_1.gguf"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"GGUF not really")
    data = repo / "data.jsonl"
    save_samples([sample("a", ["Paris"])], data)
    saved = saved_paths(repo / "runs" / "r", BackendSettings(gguf=str(model), quant="q8_0"), data)
    backend = saved["backend"]
    assert backend["source"] == "../../.venv/site-packages/model/m.Q4_1.gguf"
    assert backend["model_path"].startswith("~/.cache/longread/models/m.Q4_1.")
    text = (repo / "runs" / "r" / "config.json").read_text()
    assert str(tmp_path) not in text


def test_adapters_of_some_calls_are_written_relative_to_the_run_too(tmp_path, home):
    """The exit probe's adapter (and MemReread's decisions'): a clone of the repository finds
    them beside the run as it finds the memory adapter (they were once written absolute)."""
    repo = checkout(tmp_path / "repo")
    data = repo / "results" / "data" / "d.jsonl"
    data.parent.mkdir(parents=True)
    save_samples([sample("a", ["Paris"])], data)
    model, probe = repo / "m.gguf", repo / "adapters" / "probe.gguf"
    probe.parent.mkdir()
    for file in (model, probe):
        file.write_bytes(b"GGUF not really")
    settings = BackendSettings(gguf=str(model), quant="original", adapter=str(probe),
                               call_adapters={"probe": str(probe)})  # fmt: skip
    saved = saved_paths(repo / "results" / "runs" / "r", settings, data)
    backend = saved["backend"]
    assert backend["call_adapters"]["probe"]["adapter"] == "../../../adapters/probe.gguf"
    assert backend["adapter"] == backend["call_adapters"]["probe"]["adapter"]
    assert str(tmp_path) not in (repo / "results" / "runs" / "r" / "config.json").read_text()


def test_a_checkout_copied_elsewhere_resumes_and_finds_its_data(tmp_path, home):
    repo = checkout(tmp_path / "repo")
    data = repo / "results" / "data" / "d.jsonl"
    data.parent.mkdir(parents=True)
    save_samples([sample("a", ["Paris"]), sample("b", ["Rome"])], data)
    settings = BackendSettings(backend="openai", base_url="h")
    saved_paths(repo / "results" / "runs" / "r", settings, data)
    shutil.copytree(repo, tmp_path / "clone")
    shutil.rmtree(repo)
    run_dir, moved = tmp_path / "clone/results/runs/r", tmp_path / "clone/results/data/d.jsonl"
    saved = saved_paths(run_dir, settings, moved)
    assert saved["resumed"][0]["data"] == saved["data"] == "../../data/d.jsonl"
    assert (run_dir / saved["data"]).resolve() == moved.resolve()
    assert os.sep + "repo" + os.sep not in (run_dir / "config.json").read_text()
