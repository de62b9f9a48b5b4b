"""The exit probe's calls on an adapter of their own (issue 29): memagent's shipped probe
adapter, or ``--probe-adapter``, takes the probe's yes/no calls while the updates keep the
memory adapter; it is loaded and recorded only when the probe is on; an adapter trained to
exit grounds the exits its probe says yes to."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from click.testing import CliRunner

from longread.agents.memagent import MemAgent, MemAgentConfig
from longread.cli.main import cli
from longread.cli.options import with_trained_settings, without_idle_calls
from longread.cli.serve import _Prepared, _trained_defaults
from longread.errors import UsageError
from longread.llm.base import Message
from longread.llm.factory import BackendSettings
from longread.llm.memory_adapter import agent_adapter_file
from longread.text.chunking import Chunk

from .scripted import ScriptedBackend, WordTokenizer
from .test_agent_adapters import TRAINED, shared_build, ship

PROBES = ["probe"]


@pytest.fixture
def probe_shipped(tmp_path, monkeypatch):
    """A build shipping the shared adapter and memagent's own for its probe calls only,
    trained with the exit probe on."""
    folder, shared = shared_build(tmp_path, monkeypatch)
    probe = ship(
        folder, agent_adapter_file("memagent"),
        {"stage": "sft29q", "agent": "memagent", "calls": PROBES,
         "trained_with": {"agent": "memagent", **TRAINED, "exit_probe": True}},
    )  # fmt: skip
    return {"shared": shared, "probe": probe}


def run_settings(options: dict, **settings) -> tuple[BackendSettings, dict]:
    """The backend settings and agent options memagent's run reads with, as ``ask`` and
    ``eval run`` resolve them."""
    from longread.agents.registry import make_config

    backend = BackendSettings(agent="memagent", **settings)
    merged = with_trained_settings("memagent", backend, options)
    config = make_config("memagent", **{k: v for k, v in merged.items() if v is not None})
    return without_idle_calls(backend, config), merged


def test_the_probe_reads_with_the_probe_adapter_and_the_updates_with_the_shared_one(
    probe_shipped,
):
    shared, probe = (str(probe_shipped[k][0]) for k in ("shared", "probe"))
    settings, _ = run_settings({"exit_probe": True})
    assert settings.applied_adapter() == shared
    assert settings.applied_call_adapters() == {"probe": probe}
    # the other agents, and the model as released, never get it
    assert BackendSettings(agent="rememr1").applied_call_adapters() == {}
    assert BackendSettings(agent="memagent", base_model=True).applied_call_adapters() == {}


def test_with_the_probe_off_no_probe_adapter_is_loaded_or_recorded(probe_shipped, tmp_path):
    from longread.eval.store import RunStore, run_config

    settings, _ = run_settings({"exit_probe": None})
    assert settings.applied_call_adapters() == {}
    with RunStore(tmp_path / "run") as store:
        store.save_config(run_config("memagent", {}, settings, "d"))
    backend = json.loads((tmp_path / "run" / "config.json").read_text())["backend"]
    # a run without the probe records what every run before the probe adapter recorded
    assert "call_adapters" not in backend
    assert backend["adapter_sha256"] == probe_shipped["shared"][1]


def test_an_eval_run_with_the_probe_records_and_names_its_probe_adapter(probe_shipped, tmp_path):
    from longread.eval.report import agent_labels
    from longread.eval.store import RunStore, run_config

    settings, _ = run_settings({"exit_probe": True})
    with RunStore(tmp_path / "run") as store:
        store.save_config(run_config("memagent", {}, settings, "d"))
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    calls = config["backend"]["call_adapters"]
    assert {kind: r["adapter_sha256"] for kind, r in calls.items()} == {
        "probe": probe_shipped["probe"][1]
    }
    assert agent_labels([(tmp_path / "run", config)]) == [
        "memagent + memory adapter grpo26b + probes memory adapter sft29q"
    ]


def test_probe_adapter_names_another_adapter_for_the_probe(probe_shipped, tmp_path):
    mine = tmp_path / "mine.gguf"
    settings, _ = run_settings({"exit_probe": True}, call_adapters={"probe": str(mine)})
    assert settings.applied_call_adapters() == {"probe": str(mine)}
    with pytest.raises(UsageError, match="give --exit-probe on"):
        run_settings({"exit_probe": None}, call_adapters={"probe": str(mine)})


def test_probe_adapter_without_the_exit_probe_is_one_clear_error(tmp_path, monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    doc = tmp_path / "doc.txt"
    doc.write_text("The code is 4412.")
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(b"x")
    # the shipped memagent reads with the probe on by default: turned off, it takes no call
    result = CliRunner().invoke(
        cli,
        ["ask", str(doc), "--question", "What is the code?", "--exit-probe", "off",
         "--probe-adapter", str(mine)],
    )  # fmt: skip
    assert result.exit_code != 0
    assert "--probe-adapter takes the exit probe's calls; give --exit-probe on" in result.output


def test_a_probe_adapter_trained_to_exit_grounds_its_exits_unless_a_flag_says(probe_shipped):
    _, merged = run_settings({"exit_probe": True, "grounded_exit": None})
    assert merged["grounded_exit"] is True
    _, merged = run_settings({"exit_probe": True, "grounded_exit": False})
    assert merged["grounded_exit"] is False  # the papers' gate, asked for
    _, merged = run_settings({"exit_probe": None, "grounded_exit": None})
    assert merged["grounded_exit"] is None  # no exit, nothing to ground


def test_a_probe_adapter_not_trained_to_exit_leaves_the_papers_gate(probe_shipped):
    record = probe_shipped["probe"][0].with_suffix(".json")
    raw = json.loads(record.read_text())
    raw["trained_with"] = {"agent": "memagent", **TRAINED}
    record.write_text(json.dumps(raw))
    _, merged = run_settings({"exit_probe": True, "grounded_exit": None})
    assert merged["grounded_exit"] is None


def test_serve_gives_memagent_s_probe_its_backend_and_grounds_it(probe_shipped):
    prepared = _Prepared(BackendSettings())
    prepared._agent_backends()
    assert list(prepared.calls) == ["memagent"]
    assert prepared.calls["memagent"]["probe"].adapter_path == probe_shipped["probe"][0]
    defaults = _trained_defaults(BackendSettings(), {"exit_probe": True})
    assert defaults["memagent"]["grounded_exit"] is True


def ship_reading_with_the_probe(shared: tuple) -> None:
    """The shared adapter's record as shipped since stop 71: it reads with the exit probe."""
    record = shared[0].with_suffix(".json")
    raw = json.loads(record.read_text())
    record.write_text(json.dumps({**raw, "reads_with": ["focused_notes", "exit_probe"]}))


def test_a_shared_adapter_shipped_with_the_probe_reads_with_it_unless_a_flag_says_off(
    probe_shipped,
):
    """Issue 29's default: the shipped memagent reads with the exit probe on, its calls on the
    probe adapter and its yes grounded; ``--exit-probe off`` gives the reading before it,
    with no probe adapter loaded."""
    ship_reading_with_the_probe(probe_shipped["shared"])
    settings, merged = run_settings({"exit_probe": None, "grounded_exit": None})
    assert merged["exit_probe"] is True and merged["grounded_exit"] is True
    assert settings.applied_call_adapters() == {"probe": str(probe_shipped["probe"][0])}
    settings, merged = run_settings({"exit_probe": False, "grounded_exit": None})
    assert merged["exit_probe"] is False and merged["grounded_exit"] is None
    assert settings.applied_call_adapters() == {}
    # the exit gate asked for is the exit: the shipped probe does not come beside it
    _, merged = run_settings({"exit_probe": None, "exit_gate": True, "grounded_exit": None})
    assert merged["exit_probe"] is None and merged["exit_gate"] is True
    # a server reads memagent's requests with it too, grounded
    defaults = _trained_defaults(BackendSettings(), {})
    assert defaults["memagent"]["exit_probe"] is True
    assert defaults["memagent"]["grounded_exit"] is True


def test_a_shipped_probe_stays_off_where_no_adapter_trained_for_it_takes_its_calls(
    probe_shipped,
):
    """The shared adapter's own yes/no was never trained: without a probe adapter trained to
    exit (here its record says it was not), the probe it shipped with is not turned on."""
    ship_reading_with_the_probe(probe_shipped["shared"])
    record = probe_shipped["probe"][0].with_suffix(".json")
    raw = json.loads(record.read_text())
    record.write_text(json.dumps({**raw, "trained_with": {"agent": "memagent", **TRAINED}}))
    _, merged = run_settings({"exit_probe": None, "grounded_exit": None})
    assert merged["exit_probe"] is None and merged["focused_notes"] is True
    assert "exit_probe" not in _trained_defaults(BackendSettings(), {})["memagent"]


def test_serve_grounds_a_probe_a_request_turns_on_itself(probe_shipped):
    """A server started with the probe off (``--exit-probe off``): a memagent request that
    turns it on reads with the grounded exit, as ``ask --exit-probe on`` does, unless the
    request sets ``grounded_exit``; agents with no adapter trained to exit keep the papers'."""
    from longread.cli.serve import _grounded_exit_agents
    from longread.serve.config import ServeConfig
    from longread.serve.requests import ChatRequest, resolve

    flags = {"exit_probe": False}
    settings = ServeConfig(
        runs_dir="unused",
        agent_defaults=flags,
        trained_defaults=_trained_defaults(BackendSettings(), flags),
        grounded_exit_agents=_grounded_exit_agents(BackendSettings()),
    )

    def config(agent: str, **extension: object) -> object:
        body = {"model": f"longread-{agent}", "messages": [{"role": "user", "content": "q"}]}
        body["longread"] = {"document": "text", **extension}
        return resolve(ChatRequest.model_validate(body), settings, "").config

    assert settings.grounded_exit_agents == {"memagent"}
    assert config("memagent").exit_probe is False  # the server's flag
    assert config("memagent", exit_probe=True).grounded_exit is True
    assert config("memagent", exit_probe=True, grounded_exit=False).grounded_exit is False
    assert config("memreread", exit_probe=True).grounded_exit is False  # no probe trained


SECTIONS = ["Ann wrote it.", "The code is 4412.", "Filler.", "More filler."]


async def test_the_probe_backend_decides_the_exit_and_the_updates_never_reach_it():
    """The routing a user relies on: the probe adapter's "yes" stops the reading, and the
    memory adapter writes every note."""

    def update(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            return "\\boxed{4412}"
        shown = prompt.split("Section:\n", 1)[1]
        return "The code is 4412." if shown.startswith(SECTIONS[1]) else "No previous memory"

    def probe(messages: Sequence[Message]) -> str:
        return "yes" if "4412" in messages[-1]["content"] else "no"

    updates, probes = ScriptedBackend([update] * 10), ScriptedBackend([probe] * 10)
    tok = WordTokenizer()
    agent = MemAgent(updates, tok, MemAgentConfig(exit_probe=True), call_backends={"probe": probes})
    chunks = [Chunk(i, text, tok.count(text)) for i, text in enumerate(SECTIONS)]
    run = await agent.run("What is the code?", chunks)
    assert [s.kind for s in run.steps] == ["update", "update", "probe", "final"]
    assert run.config["chunks_read"] == 2
    assert len(probes.requests) == 1 and len(updates.requests) == 3
    assert run.answer == "4412"


def test_memagent_ships_sft29q_for_its_probe_calls_with_its_provenance(monkeypatch):
    """Issue 29: the exit probe trained into the embedded model's shipped adapters, for the
    probe's calls only; the updates keep the shared adapter."""
    import hashlib

    import gguf

    from longread.llm.memory_adapter import adapters_folder, bundled_memory_adapter

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    probe = adapters_folder() / agent_adapter_file("memagent")
    kind = gguf.GGUFReader(probe).fields["general.type"]
    assert bytes(kind.parts[kind.data[0]]).decode() == "adapter"
    record = json.loads(probe.with_suffix(".json").read_text())
    assert record["sha256"] == "sha256:" + hashlib.sha256(probe.read_bytes()).hexdigest()
    assert record["calls"] == PROBES and record["trained_with"]["exit_probe"] is True
    assert record["stage"] == "sft29q" and record["stages"][-1]["stage"] == "sft29q"
    settings = BackendSettings(agent="memagent")
    assert settings.applied_adapter() == str(bundled_memory_adapter())  # the shared one
    assert settings.applied_call_adapters() == {"probe": str(probe)}


def test_a_run_made_before_the_probe_was_the_default_names_the_flag_that_resumes_it(tmp_path):
    """An eval folder of the shipped reading made before stop 70 read without the probe: a
    plain resume now would mix two readings, so it is refused with the flag that gives the
    saved reading back."""
    from longread.eval.resume import check_resume

    run = {"agent": "memagent", "record_tokens": False, "data_hash": "d"}
    saved = {**run, "agent_config": {"exit_probe": False}}
    new = {**run, "agent_config": {"exit_probe": True}}
    with pytest.raises(UsageError, match=r"exit_probe \(saved False, now True\); resume with "
                       r"the same settings \(--exit-probe off\)"):  # fmt: skip
        check_resume(saved, new, tmp_path)
    new["agent_config"]["exit_probe"] = False
    check_resume(saved, new, tmp_path)  # the flag given: the same reading, resumed
