"""The memory adapter shipped for the embedded model (issue 10): that it ships with its
provenance, how ``--adapter memory`` applies it, that eval runs record it, and what it changes
in the notes."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import gguf
import pytest
from click.testing import CliRunner

from longread.cli.main import cli
from longread.errors import UsageError
from longread.eval.store import RunStore, run_config
from longread.llm.factory import BackendSettings
from longread.llm.memory_adapter import bundled_memory_adapter, memory_adapter_provenance

ADAPTER = bundled_memory_adapter()
DEMO = Path(__file__).resolve().parents[1] / "examples" / "needle.txt"


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_the_package_ships_a_llamacpp_lora_with_its_provenance() -> None:
    assert ADAPTER is not None, "src/longread/adapters/ holds no memory adapter"
    reader = gguf.GGUFReader(ADAPTER)
    kind = reader.fields["general.type"]
    assert bytes(kind.parts[kind.data[0]]).decode() == "adapter"
    provenance = memory_adapter_provenance()
    assert provenance is not None
    assert provenance["sha256"] == "sha256:" + hashlib.sha256(ADAPTER.read_bytes()).hexdigest()
    # what a reader needs to redo it: the recipe, the commit, the stages and their time
    assert provenance["made_by"].startswith("recipes/smollm2/train.sh")
    assert re.fullmatch(r"[0-9a-f]{40}", provenance["commit"])
    assert [s["stage"] for s in provenance["stages"]][:2] == ["sft", "sft1k"]
    assert provenance["training_seconds"] == sum(s["seconds"] for s in provenance["stages"])


def test_adapter_memory_names_the_shipped_adapter(tmp_path: Path) -> None:
    other = tmp_path / "other.gguf"
    assert BackendSettings(adapter="memory").applied_adapter() == str(ADAPTER)
    assert BackendSettings(adapter=str(other)).applied_adapter() == str(other)
    # the bundled model gets it by default; --base-model runs the model as released, and a
    # model of one's own (--gguf) never gets a LoRA trained on another model's weights
    assert BackendSettings().applied_adapter() == str(ADAPTER)
    assert BackendSettings(base_model=True).applied_adapter() is None
    assert BackendSettings(gguf=str(tmp_path / "mine.gguf")).applied_adapter() is None


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_base_model_and_adapter_together_are_refused(tmp_path: Path, no_server: None) -> None:
    (tmp_path / "a.gguf").write_bytes(b"x")
    result = invoke(
        "ask", str(DEMO), "-q", "q", "--base-model", "--adapter", str(tmp_path / "a.gguf")
    )
    assert result.exit_code == 2
    assert result.stderr == (
        "longread: error: --base-model runs the model without any adapter; drop --adapter\n"
    )


def test_base_model_with_a_server_is_refused(no_server: None) -> None:
    url = "http://127.0.0.1:9/v1"
    result = invoke("ask", str(DEMO), "-q", "q", "--base-url", url, "--base-model")
    assert result.exit_code == 2
    assert "--base-model is for the embedded model" in result.stderr


def test_adapter_scale_scales_the_shipped_adapter(no_server: None) -> None:
    settings = BackendSettings(adapter="memory", adapter_scale=0.5)
    assert settings.resolved_backend() == "llamacpp"  # accepted: there is an adapter to scale


def save_config(run: Path, settings: BackendSettings) -> dict:
    with RunStore(run) as store:
        store.save_config(run_config("memagent", {}, settings, "d.jsonl"))
    return json.loads((run / "config.json").read_text())


def test_an_eval_run_records_the_shipped_adapter_and_keeps_to_it(tmp_path: Path) -> None:
    backend = save_config(tmp_path / "run", BackendSettings(adapter="memory"))["backend"]
    assert backend["adapter_sha256"] == memory_adapter_provenance()["sha256"]
    # a run made with the adapter never resumes without it (its answers came from another model)
    with pytest.raises(UsageError, match="--base-model"):
        save_config(tmp_path / "run", BackendSettings(base_model=True))
    # and a run of the model as released resumes only as such
    save_config(tmp_path / "base", BackendSettings(base_model=True))
    with pytest.raises(UsageError, match=r"saved none, now .*smollm2-135m-memory\.gguf"):
        save_config(tmp_path / "base", BackendSettings(adapter="memory"))


@pytest.mark.model
def test_the_adapter_keeps_short_notes_where_the_base_model_fills_the_cap(
    tmp_path: Path, no_server: None
) -> None:
    """On a RULER niah_single_2 document (essay filler), the model as released copies filler
    into its notes up to the cap; with the adapter each update is a short note."""
    data = tmp_path / "data"
    built = invoke(
        "data", "ruler", "--task", "niah_single_2", "--lengths", "2048", "--n", "1",
        "--seed", "77", "--out", str(data),
    )  # fmt: skip
    assert built.exit_code == 0, built.output
    sample = json.loads(next(data.glob("*.jsonl")).read_text().splitlines()[0])
    document = tmp_path / "doc.txt"
    document.write_text(sample["context"])
    updates = {}
    for model in ("--base-model", "--adapter=memory"):
        trace = tmp_path / f"{model[2:6]}.json"
        result = invoke(
            "ask", str(document), "-q", sample["question"], "--chunk-tokens", "1000",
            "--memory-tokens", "256", model, "--trace", str(trace),
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        steps = json.loads(trace.read_text())["steps"]
        updates[model] = [s["completion_tokens"] for s in steps if s["kind"] == "update"]
    assert max(updates["--adapter=memory"]) < 64
    assert max(updates["--base-model"]) == 256  # the cap


def test_reports_name_shipped_adapters_by_their_recipe_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every shipped adapter has the same file name, so the tables name it by the recipe stage
    that made it, the one shipped now and those it replaced (base, warm start and GRPO rows
    stand apart); any other adapter by its file name, or a training run's adapter.gguf by its
    run folder (the stage being measured before it ships)."""
    from longread.eval.report import agent_labels
    from longread.llm import memory_adapter

    now, before, unknown = ("sha256:" + c * 64 for c in "abc")
    provenance = {"sha256": now, "stage": "grpo", "earlier": [{"stage": "sft1k", "sha256": before}]}
    monkeypatch.setattr(memory_adapter, "shipped_provenances", lambda: [provenance])

    def run(sha: str, file: str) -> tuple[Path, dict]:
        backend = {"adapter": f"/somewhere/{file}", "adapter_sha256": sha}
        return tmp_path, {"agent": "memagent", "agent_config": {}, "backend": backend}

    runs = [run(now, ADAPTER.name), run(before, ADAPTER.name), run(unknown, "my-lora.gguf")]
    runs.append(run(unknown.replace("c", "d"), "runs/sft2a/adapter.gguf"))
    assert agent_labels(runs) == [
        "memagent + memory adapter grpo",
        "memagent + memory adapter sft1k",
        "memagent + my-lora",
        "memagent + sft2a",
    ]


def test_reports_keep_lookup_decoding_runs_apart(tmp_path: Path) -> None:
    """A run with lookup decoding may flip near-ties, so its samples never pool with the
    plain run's in one row, though the agent's settings are the same."""
    from longread.eval.report import agent_labels

    def run(lookup: bool) -> tuple[Path, dict]:
        backend = {"lookup_decoding": lookup}
        return tmp_path, {"agent": "memagent", "agent_config": {}, "backend": backend}

    assert agent_labels([run(False), run(True)]) == ["memagent", "memagent + lookup decoding"]


def test_a_decision_adapter_is_recorded_named_and_kept_to(tmp_path: Path) -> None:
    """--decision-adapter (MemReread's decide and integrate calls): the run records it by
    content, its report row names it, and a resume without it (or with another) is refused."""
    from longread.eval.report import agent_labels

    decisions = tmp_path / "runs" / "sft28w" / "adapter.gguf"
    decisions.parent.mkdir(parents=True)
    decisions.write_bytes(b"a decision adapter")
    calls = {"decide": str(decisions), "integrate": str(decisions)}
    settings = BackendSettings(adapter="memory", call_adapters=calls)
    backend = save_config(tmp_path / "run", settings)["backend"]
    sha = "sha256:" + hashlib.sha256(b"a decision adapter").hexdigest()
    assert {r["adapter_sha256"] for r in backend["call_adapters"].values()} == {sha}
    config = {"agent": "memreread", "agent_config": {}, "backend": backend}
    stage = memory_adapter_provenance()["stage"]
    assert agent_labels([(tmp_path, config)]) == [
        f"memreread + memory adapter {stage} + decisions sft28w"
    ]
    with pytest.raises(UsageError, match="different adapters for its decide/integrate calls"):
        save_config(tmp_path / "run", BackendSettings(adapter="memory"))
    # a run without one keeps its record as it was, and resumes as such
    plain = save_config(tmp_path / "plain", BackendSettings(adapter="memory"))["backend"]
    assert "call_adapters" not in plain
    with pytest.raises(UsageError, match="decide/integrate"):
        save_config(tmp_path / "plain", settings)


def test_a_decision_adapter_is_for_the_embedded_model_with_adapters(no_server: None) -> None:
    calls = {"decide": "d.gguf", "integrate": "d.gguf"}
    with pytest.raises(UsageError, match="a server loads its own adapters"):
        BackendSettings(base_url="http://127.0.0.1:9/v1", call_adapters=calls).resolved_backend()
    with pytest.raises(UsageError, match="drop --decision-adapter"):
        BackendSettings(base_model=True, call_adapters=calls).resolved_backend()


@pytest.mark.parametrize("agent", ["memreread", "rememr1"])
def test_an_agent_ships_an_adapter_of_its_own_with_its_provenance(agent: str) -> None:
    """Issue 28: memreread and rememr1 read with their own adapters (trained on their own
    formats), recorded as the shared one is: content hash, the agent it serves, every stage
    that made it."""
    own = bundled_memory_adapter(agent)
    assert own is not None and own != ADAPTER
    reader = gguf.GGUFReader(own)
    kind = reader.fields["general.type"]
    assert bytes(kind.parts[kind.data[0]]).decode() == "adapter"
    provenance = memory_adapter_provenance(agent)
    assert provenance["sha256"] == "sha256:" + hashlib.sha256(own.read_bytes()).hexdigest()
    assert provenance["agent"] == agent and provenance["trained_with"]["agent"] == agent
    stages = [s["stage"] for s in provenance["stages"]]
    assert stages[-1] == provenance["stage"] and "grpo26b" in stages  # it went on from the shared
    assert not re.search(r'"/|[A-Za-z]:\\\\', json.dumps(provenance))


def test_memagent_keeps_the_shared_adapter() -> None:
    assert bundled_memory_adapter("memagent") == ADAPTER == bundled_memory_adapter()
    assert len({bundled_memory_adapter(a) for a in ("memagent", "memreread", "rememr1")}) == 3
