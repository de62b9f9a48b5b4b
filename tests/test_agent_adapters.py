"""An agent may ship a memory adapter of its own (issue 28: MemReread's decisions need training
the shared adapter does not have): that agent reads with it, by default and for ``--adapter
memory``, with the settings its record gives; the other agents keep the shared one; runs made
with it are named by its recipe stage; ``serve`` runs the model once per adapter."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from longread.cli.options import adapter_trained_settings
from longread.cli.serve import _Prepared, _trained_defaults
from longread.errors import UsageError
from longread.llm import memory_adapter
from longread.llm.factory import BackendSettings
from longread.llm.memory_adapter import (
    MEMORY_ADAPTER_FILE,
    agent_adapter_file,
    memory_adapter_stage,
)

TRAINED = {"prompt_set": "paper", "chunk_tokens": 1000, "memory_tokens": 256, "final_tokens": 32}
EARLIER = "sha256:" + "e" * 64


def ship(folder: Path, file: str, record: dict) -> tuple[Path, str]:
    """An adapter file and its provenance beside it, as recipes/smollm2/ship.py writes them."""
    adapter = folder / file
    adapter.write_bytes(file.encode())  # the content only has to differ
    sha = "sha256:" + hashlib.sha256(adapter.read_bytes()).hexdigest()
    adapter.with_suffix(".json").write_text(json.dumps({"adapter": file, "sha256": sha, **record}))
    return adapter, sha


def shared_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, tuple[Path, str]]:
    """A build folder, in place of the package's, shipping the shared adapter (memagent's
    training, stage grpo26b) and no server to talk to: the folder and that adapter."""
    folder = tmp_path / "adapters"
    folder.mkdir()
    shared = ship(
        folder, MEMORY_ADAPTER_FILE,
        {"stage": "grpo26b", "trained_with": {"agent": "memagent", **TRAINED}},
    )  # fmt: skip
    monkeypatch.setattr(memory_adapter, "adapters_folder", lambda: folder)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return folder, shared


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[Path, str]]:
    """A build shipping the shared adapter (memagent's training) and memreread's own."""
    folder = tmp_path / "adapters"
    folder.mkdir()
    shared = ship(
        folder, MEMORY_ADAPTER_FILE,
        {"stage": "grpo26b", "trained_with": {"agent": "memagent", **TRAINED},
         "reads_with": ["focused_notes"], "earlier": [{"stage": "sft1e", "sha256": EARLIER}]},
    )  # fmt: skip
    own = ship(
        folder, agent_adapter_file("memreread"),
        {"stage": "sft28w", "agent": "memreread",
         "trained_with": {"agent": "memreread", **TRAINED, "chunk_tokens": 800},
         "reads_with": ["grounded_notes", "focused_reread"]},
    )  # fmt: skip
    monkeypatch.setattr(memory_adapter, "adapters_folder", lambda: folder)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return {"shared": shared, "own": own}


def applied(**settings: object) -> str | None:
    return BackendSettings(**settings).applied_adapter()  # type: ignore[arg-type]


def test_the_agent_reads_with_its_own_adapter_and_the_others_with_the_shared_one(shipped):
    own, shared = str(shipped["own"][0]), str(shipped["shared"][0])
    assert applied(agent="memreread") == own
    assert applied(agent="memreread", adapter="memory") == own
    assert applied(agent="memagent") == shared and applied(agent="rememr1") == shared
    assert applied() == shared  # no agent named (closed-book checks, benchmarks)
    # the model as released, a model of one's own, or an adapter named: never the agent's
    assert applied(agent="memreread", base_model=True) is None
    assert applied(agent="memreread", gguf="mine.gguf") is None
    assert applied(agent="memreread", adapter="lora.gguf") == "lora.gguf"
    # memory:AGENT: the adapter that agent reads with, e.g. the shared one for memreread
    assert applied(agent="memreread", adapter="memory:memagent") == shared
    assert applied(agent="memagent", adapter="memory:memreread") == own
    with pytest.raises(UsageError, match="no agent 'nobody'"):
        applied(adapter="memory:nobody")


def test_without_an_adapter_of_its_own_an_agent_keeps_the_shared_one(shipped):
    shipped["own"][0].unlink()
    assert applied(agent="memreread") == str(shipped["shared"][0])


def test_it_reads_with_the_settings_its_own_record_gives(shipped):
    name, trained = adapter_trained_settings(BackendSettings(agent="memreread"))
    assert name == "memreread's memory adapter"
    assert trained.agent == "memreread" and trained.chunk_tokens == 800
    assert trained.reads_with == ("grounded_notes", "focused_reread")
    name, trained = adapter_trained_settings(BackendSettings(agent="memagent"))
    assert name == "the memory adapter" and trained.chunk_tokens == 1000


def test_runs_made_with_either_are_named_by_their_recipe_stage(shipped):
    assert memory_adapter_stage(shipped["own"][1]) == "sft28w"
    assert memory_adapter_stage(shipped["shared"][1]) == "grpo26b"
    assert memory_adapter_stage(EARLIER) == "sft1e"
    assert memory_adapter_stage("sha256:" + "0" * 64) is None


def test_serve_gives_each_agent_its_adapter_s_settings_and_a_backend_per_adapter(
    shipped, capsys: pytest.CaptureFixture[str]
):
    trained = _trained_defaults(BackendSettings(), {})
    assert trained["memreread"]["chunk_tokens"] == 800
    assert trained["memreread"]["grounded_notes"] and trained["memreread"]["focused_reread"]
    assert "focused_notes" not in trained["memreread"]  # the shared one's, not its own
    assert trained["memagent"]["chunk_tokens"] == 1000 and trained["memagent"]["focused_notes"]
    assert "rememr1" not in trained  # neither adapter learnt its calls
    said = capsys.readouterr().err
    assert said.count("memreread's memory adapter was trained with") == 1
    assert said.count("the memory adapter was trained with") == 1
    prepared = _Prepared(BackendSettings())
    prepared._agent_backends()
    assert list(prepared.own) == ["memreread"] and not prepared.calls  # the rest share one
    assert prepared.own["memreread"].adapter_path == shipped["own"][0]  # loaded when called


@pytest.fixture
def for_decisions(shipped):
    """memreread's own adapter shipped for its decide and integrate calls only."""
    record = shipped["own"][0].with_suffix(".json")
    record.write_text(json.dumps({**json.loads(record.read_text()), "calls": DECISIONS}))
    return shipped


DECISIONS = ["decide", "integrate"]


def test_an_adapter_for_some_calls_takes_those_and_the_shared_one_the_rest(for_decisions):
    own, shared = str(for_decisions["own"][0]), str(for_decisions["shared"][0])
    assert applied(agent="memreread") == shared
    settings = BackendSettings(agent="memreread")
    assert settings.applied_call_adapters() == dict.fromkeys(DECISIONS, own)
    memory = BackendSettings(agent="memreread", adapter="memory")
    assert memory.applied_call_adapters() == dict.fromkeys(DECISIONS, own)
    # the reading passes read as the shared adapter was trained
    assert adapter_trained_settings(settings)[0] == "the memory adapter"
    # not for another agent, an adapter named, the model as released, or --decision-adapter
    assert BackendSettings(agent="memagent").applied_call_adapters() == {}
    assert BackendSettings(agent="memreread", adapter="x.gguf").applied_call_adapters() == {}
    assert BackendSettings(agent="memreread", base_model=True).applied_call_adapters() == {}
    given = BackendSettings(agent="memreread", call_adapters=dict.fromkeys(DECISIONS, "d.gguf"))
    assert given.applied_call_adapters() == dict.fromkeys(DECISIONS, "d.gguf")


def test_an_eval_run_records_the_adapter_its_decisions_read_with(for_decisions, tmp_path):
    from longread.eval.store import RunStore, run_config

    with RunStore(tmp_path / "run") as store:
        store.save_config(run_config("memreread", {}, BackendSettings(agent="memreread"), "d"))
    backend = json.loads((tmp_path / "run" / "config.json").read_text())["backend"]
    assert backend["adapter_sha256"] == for_decisions["shared"][1]
    calls = backend["call_adapters"]
    assert {kind: r["adapter_sha256"] for kind, r in calls.items()} == dict.fromkeys(
        DECISIONS, for_decisions["own"][1]
    )


def test_serve_gives_memreread_s_decisions_their_backend(for_decisions):
    prepared = _Prepared(BackendSettings())
    prepared._agent_backends()
    assert not prepared.own and list(prepared.calls) == ["memreread"]
    decide, integrate = (prepared.calls["memreread"][kind] for kind in DECISIONS)
    assert decide is integrate and decide.adapter_path == for_decisions["own"][0]
