"""The update gate's own shipped adapter (issue 29): the shared adapter never learnt to reply
``<keep/>``, so ``--update-gate on`` on the bundled model reads memagent's and memreread's
updates with an adapter trained for the gate, where one ships; every other reading keeps the
adapter it had."""

from __future__ import annotations

import hashlib
import json

import gguf
import pytest

from longread.cli.options import adapter_trained_settings, backend_settings
from longread.cli.serve import _Prepared
from longread.llm import memory_adapter
from longread.llm.factory import BackendSettings
from longread.llm.memory_adapter import (
    GATE_ADAPTER_FILE,
    agent_adapter_file,
    memory_adapter_stage,
)

from .test_agent_adapters import TRAINED, shared_build, ship


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A build shipping the shared adapter, the update gate's and rememr1's own."""
    folder, shared = shared_build(tmp_path, monkeypatch)
    gate = ship(
        folder, GATE_ADAPTER_FILE,
        {"stage": "sft29y", "update_gate": True,
         "trained_with": {"agent": "memagent", **TRAINED, "update_gate": True},
         "reads_with": ["focused_notes"]},
    )  # fmt: skip
    own = ship(
        folder, agent_adapter_file("rememr1"),
        {"stage": "sft28q", "agent": "rememr1", "trained_with": {"agent": "rememr1", **TRAINED}},
    )  # fmt: skip
    return {"shared": str(shared[0]), "gate": str(gate[0]), "own": str(own[0]), "sha": gate[1]}


def applied(**settings: object) -> str | None:
    return BackendSettings(**settings).applied_adapter()  # type: ignore[arg-type]


def test_the_gate_on_reads_memagent_s_updates_with_the_gate_s_adapter(shipped):
    assert applied(agent="memagent", update_gate=True) == shipped["gate"]
    assert applied(agent="memagent", update_gate=True, adapter="memory") == shipped["gate"]
    assert applied(agent="memreread", update_gate=True) == shipped["gate"]
    assert applied(agent="memagent") == shipped["shared"]  # the gate off: as before


def test_memreread_keeps_its_own_adapter_under_the_gate(shipped):
    """The gate's adapter takes the shared one's place only: MemReread's own adapter learnt a
    root pass that keeps a chain's bridge, which the gate's loses (stop 81), so a build that
    ships one reads MemReread with it, the gate then only a sentence of the prompt."""
    own = ship(
        memory_adapter.adapters_folder(), agent_adapter_file("memreread"),
        {"stage": "sft28z", "agent": "memreread",
         "trained_with": {"agent": "memreread", **TRAINED}},
    )  # fmt: skip
    assert applied(agent="memreread", update_gate=True) == str(own[0])
    assert BackendSettings(agent="memreread", update_gate=True).applied_call_adapters() == {}
    assert applied(agent="memagent", update_gate=True) == shipped["gate"]  # memagent's as before


def test_an_adapter_asked_for_by_name_or_the_model_as_released_wins_over_the_gate(shipped):
    shared = applied(agent="memagent", update_gate=True, adapter="memory:memagent")
    assert shared == shipped["shared"]
    assert applied(agent="memagent", update_gate=True, adapter="lora.gguf") == "lora.gguf"
    assert applied(agent="memagent", update_gate=True, base_model=True) is None
    assert applied(agent="memagent", update_gate=True, gguf="mine.gguf") is None
    # an agent whose updates are not memagent's keeps its own
    assert applied(agent="rememr1", update_gate=True) == shipped["own"]


def test_a_build_without_the_gate_s_adapter_reads_the_gate_with_the_shared_one(shipped):
    (memory_adapter.adapters_folder() / GATE_ADAPTER_FILE).unlink()
    assert applied(agent="memagent", update_gate=True) == shipped["shared"]


def test_the_flag_picks_it_and_its_record_gives_the_settings_it_reads_with(shipped):
    flags = {
        "backend": "auto", "base_url": None, "model": None, "api_key": None,
        "context_window": None, "tokenizer_path": None, "timeout": 600.0, "retries": 5,
        "extra_body": None, "gguf": None, "quant": None, "n_ctx": None, "adapter": None,
        "adapter_scale": 1.0, "base_model": False, "parallel": None, "lookup_decoding": None,
    }  # fmt: skip
    settings = backend_settings({**flags, "update_gate": True}, "memagent")
    name, trained = adapter_trained_settings(settings)
    assert name == "the update gate's memory adapter"
    assert trained.update_gate and trained.reads_with == ("focused_notes",)
    gate_off = backend_settings({**flags, "update_gate": None}, "memagent")
    assert gate_off.applied_adapter() == shipped["shared"]


def test_runs_read_with_it_are_named_by_its_stage(shipped):
    assert memory_adapter_stage(shipped["sha"]) == "sft29y"


def test_serve_with_the_gate_on_gives_the_agents_reading_the_shared_adapter_its_backend(shipped):
    prepared = _Prepared(BackendSettings(update_gate=True))
    prepared._agent_backends()
    assert sorted(prepared.own) == ["memagent", "memreread", "rememr1"]
    assert str(prepared.own["memagent"].adapter_path) == shipped["gate"]
    assert prepared.own["memreread"] is prepared.own["memagent"]  # one model per adapter


def test_the_package_ships_sft29y_as_the_gate_s_adapter_with_its_provenance():
    """Issue 29, stop 80: the adapter trained for the gate is a llama.cpp LoRA recorded as the
    others are (hash, the stages that made it), read with the gate on only."""
    gate = memory_adapter.bundled_gate_adapter("memagent")
    assert gate is not None and gate.name == GATE_ADAPTER_FILE
    reader = gguf.GGUFReader(gate)
    kind = reader.fields["general.type"]
    assert bytes(kind.parts[kind.data[0]]).decode() == "adapter"
    record = json.loads(gate.with_suffix(".json").read_text(encoding="utf-8"))
    assert record["sha256"] == "sha256:" + hashlib.sha256(gate.read_bytes()).hexdigest()
    assert record["update_gate"] and record["trained_with"]["update_gate"]
    stages = [s["stage"] for s in record["stages"]]
    assert stages[-1] == record["stage"] == "sft29y" and "grpo26b" in stages
    assert BackendSettings(agent="memagent", update_gate=True).applied_adapter() == str(gate)
    assert BackendSettings(agent="memagent").applied_adapter() != str(gate)
