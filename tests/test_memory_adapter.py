"""The memory adapter shipped for the embedded model (issue 10): that it ships with its
provenance, when it applies, how ``--base-model`` turns it off, that eval runs record it, and
that the demo reads with it."""

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


def test_the_bundled_model_gets_the_adapter_unless_told_otherwise(tmp_path: Path) -> None:
    other = tmp_path / "other.gguf"
    assert BackendSettings().applied_adapter() == str(ADAPTER)
    assert BackendSettings(base_model=True).applied_adapter() is None
    assert BackendSettings(adapter=str(other)).applied_adapter() == str(other)
    # a LoRA belongs to the weights it was trained on: another model gets none by default
    assert BackendSettings(gguf=str(other)).applied_adapter() is None


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
    settings = BackendSettings(adapter_scale=0.5)
    assert settings.resolved_backend() == "llamacpp"  # accepted: there is an adapter to scale


def save_config(run: Path, settings: BackendSettings) -> dict:
    with RunStore(run) as store:
        store.save_config(run_config("memagent", {}, settings, "d.jsonl"))
    return json.loads((run / "config.json").read_text())


def test_an_eval_run_records_the_shipped_adapter_and_keeps_to_it(tmp_path: Path) -> None:
    backend = save_config(tmp_path / "run", BackendSettings())["backend"]
    assert backend["adapter_sha256"] == memory_adapter_provenance()["sha256"]
    # a run made with the adapter never resumes without it (its answers came from another model)
    with pytest.raises(UsageError, match="--base-model"):
        save_config(tmp_path / "run", BackendSettings(base_model=True))
    # and a run of the model as released resumes only as such
    save_config(tmp_path / "base", BackendSettings(base_model=True))
    with pytest.raises(UsageError, match=r"saved none, now .*smollm2-135m-memory\.gguf"):
        save_config(tmp_path / "base", BackendSettings())


@pytest.mark.model
def test_the_demo_keeps_the_needle_in_short_notes(tmp_path: Path, no_server: None) -> None:
    """``make demo``'s command, with the shipped adapter: the notes hold the needle, stay far
    under the cap, and the answer is the needle's number."""
    trace = tmp_path / "trace.json"
    result = invoke(
        "ask", str(DEMO), "--chunk-tokens", "1000", "--memory-tokens", "256",
        "-q", "What is the special magic number mentioned in the document?",
        "--trace", str(trace),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    needle = re.search(r"special magic number[^0-9]*(\d+)", DEMO.read_text()).group(1)
    assert needle in result.stdout
    steps = json.loads(trace.read_text())["steps"]
    updates = [s for s in steps if s["kind"] == "update"]
    assert all(s["completion_tokens"] < 128 for s in updates)
    assert needle in updates[-1]["memory"]
