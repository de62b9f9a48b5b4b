"""An adapter reads the way it was trained: ``ask``, ``eval run`` and ``serve`` take the agent
settings recorded beside the applied adapter (the shipped memory adapter's provenance, or the
``adapter.json`` the trainer exports) where no flag is given, and say so once on stderr.

The model is replaced by a backend that answers by question (any call order), so the chunk
sizes, memory and final-answer caps the agents used are read from the traces, as a user would.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from longread.agents.registry import make_config
from longread.cli import cli
from longread.cli.serve import _trained_defaults
from longread.errors import UsageError
from longread.llm.factory import BackendSettings
from longread.llm.memory_adapter import memory_adapter_provenance
from longread.llm.trained_settings import (
    FINAL_TOKENS_READ_MIN,
    TrainedSettings,
    read_trained_settings,
    write_trained_settings,
)
from longread.serve.config import ServeConfig
from longread.serve.requests import ChatRequest, resolve
from longread.train.config import TrainConfig

from .eval_helpers import AnswerBackend
from .scripted import WordTokenizer

cli_main = importlib.import_module("longread.cli.main")
QUESTION = "What is the special magic number?"
SHIPPED = {"prompt_set": "paper", "chunk_tokens": 1000, "memory_tokens": 256, "final_tokens": 32}
# ... as a run reads with them: the final answers' cap raised so that a UUID answer fits
READ = {**SHIPPED, "final_tokens": FINAL_TOKENS_READ_MIN}
PAPER = {"prompt_set": "paper", "chunk_tokens": 5000, "memory_tokens": 1024, "final_tokens": 1024}
SAID = (
    "longread: the memory adapter was trained with 1000-token chunks, 256-token memory, "
    "32-token final answers, paper prompts; using them, final answers up to 64 tokens (give "
    "--chunk-tokens/--memory-tokens/--final-tokens/--prompt-set to override)\n"
)
# ... and the memory options an adapter reads with (the shared one's for another agent than
# memagent, which has no probe adapter trained for it)
MEMORY_READS = (
    "longread: the memory adapter reads with grounded notes, focused notes, exact copies and "
    "focused rereads, as it shipped (give --grounded-notes off/--focused-notes off/"
    "--exact-copies off/--focused-reread off for the papers' memory)\n"
)
# ... and, once the shipped adapter reads with the exit probe (`ship.py grpo26b --reads-with
# ... --reads-with exit_probe`, issue 29's default once every results set is measured), the
# probe, whose calls memagent's probe adapter takes and whose yes is honoured only on grounded
# notes (that adapter was trained to exit)
PROBE_READS = (
    "longread: the memory adapter reads with grounded notes, focused notes, exact copies, "
    "focused rereads and the exit probe, as it shipped (give --grounded-notes off/"
    "--focused-notes off/--exact-copies off/--focused-reread off/--exit-probe off for the "
    "papers' reading)\n"
    "longread: memagent's probe adapter exits only on notes found in the sections read (give "
    "--grounded-exit off for the papers' gate)\n"
)
SHIPPED_PROBE = "exit_probe" in (memory_adapter_provenance() or {}).get("reads_with", [])
READS = PROBE_READS if SHIPPED_PROBE else MEMORY_READS  # the shipped adapter's


def settings_said(stderr: str) -> str:
    """What stderr says about the settings: every line but the run's notes ("note: ...",
    here focused notes clearing the scripted model's notes, which share no term with the
    question)."""
    return "".join(
        line for line in stderr.splitlines(True) if not line.startswith("longread: note:")
    )


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AnswerBackend:
    """The embedded model (no server named) replaced by one that answers by question."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LONGREAD_CACHE_DIR", str(tmp_path / "cache"))
    backend = AnswerBackend({QUESTION: "noted \\boxed{4720519}"})

    async def tokenizer(*args: Any) -> WordTokenizer:
        return WordTokenizer()

    factory = importlib.import_module("longread.llm.factory")
    for module in (cli_main, factory):  # ask imports them by name; eval run from the factory
        monkeypatch.setattr(module, "make_backend", lambda settings: backend)
        monkeypatch.setattr(module, "make_tokenizer", tokenizer)
    return backend


@pytest.fixture
def book(tmp_path: Path) -> Path:
    """2,970 tokens (a word or a full stop each, for the test tokenizer): 3 chunks of 1,000,
    or one of 5,000."""
    path = tmp_path / "book.txt"
    sentences = [f"Line {i} of the filler says nothing at all here." for i in range(270)]
    path.write_text("\n\n".join(" ".join(sentences[i : i + 6]) for i in range(0, 270, 6)))
    return path


def ask(book: Path, tmp_path: Path, *flags: str) -> tuple[Any, dict[str, Any]]:
    trace = tmp_path / "trace.json"
    result = CliRunner().invoke(
        cli, ["ask", str(book), "-q", QUESTION, "--trace", str(trace), *flags]
    )
    assert result.exit_code == 0, result.stderr
    return result, json.loads(trace.read_text())


def read_with(trace: dict[str, Any]) -> dict[str, Any]:
    """The settings a traced run read with, as its config records them."""
    return {k: trace["config"][k] for k in SHIPPED}


def chunk_sizes(trace: dict[str, Any]) -> list[int]:
    return [s["chunk_tokens"] for s in trace["steps"] if s.get("chunk_tokens") is not None]


def test_the_shipped_provenance_records_how_the_adapter_was_trained():
    provenance = memory_adapter_provenance()
    assert provenance is not None
    assert provenance["trained_with"] == {"agent": "memagent", **SHIPPED}
    agent = provenance["stages"][-1]["config"]["agent"]  # the shipped stage's own config
    assert {"agent": agent["name"], **{k: agent[k] for k in SHIPPED}} == provenance["trained_with"]
    # The provenance travels in the wheel: it names no path of the machine that made it.
    assert not re.search(r'"/|[A-Za-z]:\\\\', json.dumps(provenance))


def test_a_plain_ask_on_the_bundled_model_reads_as_the_adapter_was_trained(model, book, tmp_path):
    result, trace = ask(book, tmp_path)
    # The scripted model's number is nowhere in the filler: flagged, not cited.
    assert result.stdout == "4720519\nSources: none found in the document (unsupported answer)\n"
    assert settings_said(result.stderr) == SAID + READS  # once each, one line each
    assert read_with(trace) == READ
    assert trace["config"]["grounded_notes"] and trace["config"]["focused_notes"]
    assert trace["config"]["exact_copies"]
    # the exit probe as shipped; on, its yes honoured only on grounded notes
    assert trace["config"]["exit_probe"] is SHIPPED_PROBE
    assert trace["config"]["grounded_exit"] is SHIPPED_PROBE
    sizes = chunk_sizes(trace)
    assert len(sizes) == 3 and max(sizes) <= 1000  # 5,000-token chunks would be one chunk
    finals = [s for s in trace["steps"] if s["kind"] == "final"]
    assert len(finals) == 1


def test_flags_given_win_and_only_the_rest_is_said(model, book, tmp_path):
    result, trace = ask(book, tmp_path, "--chunk-tokens", "700", "--final-tokens", "64")
    assert read_with(trace) == {**SHIPPED, "chunk_tokens": 700, "final_tokens": 64}
    assert max(chunk_sizes(trace)) <= 700 and len(chunk_sizes(trace)) == 5
    assert settings_said(result.stderr) == (
        "longread: the memory adapter was trained with 256-token memory, paper prompts; "
        "using them (give --memory-tokens/--prompt-set to override)\n" + READS
    )


@pytest.mark.parametrize(
    ("flags", "agent"),
    [
        (["--base-model"], "memagent"),  # the model as released: the papers' defaults
        # the shared adapter never saw rememr1's calls
        (["--agent", "rememr1", "--adapter", "memory:memagent"], "rememr1"),
    ],
)
def test_without_the_adapters_agent_the_agents_own_defaults_hold(
    model, book, tmp_path, flags, agent
):
    result, trace = ask(book, tmp_path, *flags)
    expected = PAPER if agent == "memagent" else {**PAPER, "memory_tokens": 2048}
    assert read_with(trace) == {**expected, "final_tokens": trace["config"]["final_tokens"]}
    assert trace["config"]["chunk_tokens"] == 5000 and len(chunk_sizes(trace)) >= 1
    assert max(chunk_sizes(trace)) > 1000
    assert "trained with" not in result.stderr


# rememr1's shipped adapter reads with the memory options rememr1 has (stop 67), focused
# rereads included (stop 68), as memagent's shipped adapter does, and with format stops
# (stop 73), which end its step replies where their format is complete, and loop stops (stop
# 74), which end them where they fall into a loop
REMEMR1_READS = (
    "longread: rememr1's memory adapter reads with grounded notes, focused notes, exact "
    "copies, focused rereads, format stops, loop stops and its format's grammar, as it "
    "shipped (give --grounded-notes off/--focused-notes off/--exact-copies off/"
    "--focused-reread off/--format-stop off/--loop-stop off/--format-grammar off for the "
    "papers' reading)\n"
)
REMEMR1_OPTIONS = (
    "grounded_notes", "focused_notes", "exact_copies", "focused_reread", "format_stop",
    "loop_stop", "format_grammar",
)  # fmt: skip


def test_rememr1_reads_as_its_own_shipped_adapter_was_trained(model, book, tmp_path):
    """Issue 28: rememr1 ships an adapter trained on its own format, at the shared one's
    settings, to read with the memory options; it reads with them and says whose they are."""
    result, trace = ask(book, tmp_path, "--agent", "rememr1")
    assert read_with(trace) == READ
    assert all(trace["config"][option] for option in REMEMR1_OPTIONS)
    said = settings_said(result.stderr)
    assert said == SAID.replace("the memory adapter", "rememr1's memory adapter") + REMEMR1_READS
    assert len(chunk_sizes(trace)) == 3  # 1,000-token chunks, not ReMemR1's 5,000
    # the flags give the paper's memory back
    off = [arg for option in REMEMR1_OPTIONS
           for arg in ("--" + option.replace("_", "-"), "off")]  # fmt: skip
    (tmp_path / "off").mkdir()
    _, trace = ask(book, tmp_path / "off", "--agent", "rememr1", *off)
    assert not any(trace["config"][option] for option in REMEMR1_OPTIONS)


def test_memreread_reads_its_passes_as_memagent_was_trained(model, book, tmp_path):
    shared = ("--agent", "memreread", "--max-reread", "0", "--adapter", "memory:memagent")
    result, trace = ask(book, tmp_path, *shared)
    assert read_with(trace) == READ
    # the shared adapter's shipped exit probe is memagent's: its probe adapter is memagent's own
    assert settings_said(result.stderr) == SAID + MEMORY_READS
    assert trace["config"]["exit_probe"] is False
    # by default it reads with its own shipped adapter, which says so, trained as it was
    result, trace = ask(book, tmp_path, "--agent", "memreread", "--max-reread", "0")
    own = memory_adapter_provenance("memreread")
    said = SAID + MEMORY_READS
    if own is not None and own.get("agent") == "memreread" and not own.get("calls"):
        said = said.replace("the memory adapter", "memreread's memory adapter")
        assert read_with(trace) == {
            **{k: own["trained_with"][k] for k in SHIPPED}, "final_tokens": FINAL_TOKENS_READ_MIN
        }  # fmt: skip
    assert settings_said(result.stderr) == said


def test_an_adapter_of_your_own_brings_its_settings(model, book, tmp_path):
    adapter = tmp_path / "runs" / "adapter.gguf"
    adapter.parent.mkdir()
    adapter.write_bytes(b"not loaded: the model is replaced")
    write_trained_settings(adapter, TrainedSettings("memagent", "notes", 600, 96, 48))
    result, trace = ask(book, tmp_path, "--adapter", str(adapter))
    assert read_with(trace) == {
        "prompt_set": "notes", "chunk_tokens": 600, "memory_tokens": 96, "final_tokens": 64
    }  # fmt: skip
    assert result.stderr.startswith(f"longread: the adapter {adapter} was trained with 600-token")
    (adapter.parent / "adapter.json").unlink()  # an adapter with no record: the defaults
    _, trace = ask(book, tmp_path, "--adapter", str(adapter))
    assert read_with(trace) == PAPER


def test_an_adapter_trained_with_the_gates_reads_with_them_unless_a_flag_says_off(
    model, book, tmp_path
):
    adapter = tmp_path / "runs" / "adapter.gguf"
    adapter.parent.mkdir()
    adapter.write_bytes(b"not loaded: the model is replaced")
    gated = TrainedSettings("memagent", "paper", 1000, 256, 32, update_gate=True, exit_gate=True)
    write_trained_settings(adapter, gated)
    assert read_trained_settings(adapter) == gated
    result, trace = ask(book, tmp_path, "--adapter", str(adapter))
    assert (trace["config"]["update_gate"], trace["config"]["exit_gate"]) == (True, True)
    assert "the update gate on, the exit gate on" in result.stderr
    assert "--update-gate off/--exit-gate off" in result.stderr
    _, trace = ask(book, tmp_path, "--adapter", str(adapter), "--exit-gate", "off")
    assert (trace["config"]["update_gate"], trace["config"]["exit_gate"]) == (True, False)
    # Gates learnt without their instructions: the papers' prompt, and the tags still read.
    silent = TrainedSettings("memagent", "paper", 1000, 256, 32, exit_gate=True,
                             gate_instructions=False)  # fmt: skip
    write_trained_settings(adapter, silent)
    assert read_trained_settings(adapter) == silent
    result, trace = ask(book, tmp_path, "--adapter", str(adapter))
    assert (trace["config"]["exit_gate"], trace["config"]["gate_instructions"]) == (True, False)
    assert "the gates left out of the prompt" in result.stderr
    # The exit probe, recorded and read with, and a flag turns it off.
    write_trained_settings(adapter, TrainedSettings("memagent", "paper", 1000, 256, 32,
                                                    exit_probe=True))  # fmt: skip
    result, trace = ask(book, tmp_path, "--adapter", str(adapter))
    assert trace["config"]["exit_probe"] and "the exit probe on" in result.stderr
    # An adapter trained to exit takes its exits grounded (it said yes to made-up notes),
    # says so, and --grounded-exit off gives the papers' gate.
    assert trace["config"]["grounded_exit"]
    assert "(give --grounded-exit off for the papers' gate)" in result.stderr
    _, trace = ask(book, tmp_path, "--adapter", str(adapter), "--grounded-exit", "off")
    assert trace["config"]["exit_probe"] and not trace["config"]["grounded_exit"]
    # With no exit on there is nothing to ground: the setting stays as the agent's default.
    result, trace = ask(book, tmp_path, "--adapter", str(adapter), "--exit-probe", "off")
    assert not trace["config"]["exit_probe"] and not trace["config"]["grounded_exit"]
    assert "grounded" not in result.stderr
    # An adapter trained without the gates records none: its JSON reads as it always did.
    write_trained_settings(adapter, TrainedSettings("memagent", "paper", 1000, 256, 32))
    assert "gate" not in (adapter.parent / "adapter.json").read_text()


def test_an_adapter_shipped_with_reading_options_reads_with_them_unless_a_flag_says_off(
    model, book, tmp_path
):
    adapter = tmp_path / "runs" / "adapter.gguf"
    adapter.parent.mkdir()
    adapter.write_bytes(b"not loaded: the model is replaced")
    shipped = TrainedSettings("memagent", "paper", 1000, 256, 32, reads_with=("focused_notes",))
    write_trained_settings(adapter, shipped)
    record = json.loads((adapter.parent / "adapter.json").read_text())
    assert record["reads_with"] == ["focused_notes"]  # apart from how it trained
    assert "focused_notes" not in record["trained_with"]
    assert read_trained_settings(adapter) == shipped
    result, trace = ask(book, tmp_path, "--adapter", str(adapter))
    assert trace["config"]["focused_notes"] and not trace["config"]["grounded_notes"]
    assert f"the adapter {adapter} reads with focused notes, as it shipped" in result.stderr
    assert "(give --focused-notes off for the papers' memory)" in result.stderr
    # The scripted model's notes ("noted ...") share no term with the question: each update's
    # notes are cleared, as focused notes do to copied filler.
    updates = [s for s in trace["steps"] if s["kind"] == "update"]
    assert all("notes_unrelated" in s["flags"] for s in updates)
    assert {s["memory"] for s in updates} == {"No previous memory"}
    # the flag wins: the papers' memory keeps what the model wrote
    result, trace = ask(book, tmp_path, "--adapter", str(adapter), "--focused-notes", "off")
    assert not trace["config"]["focused_notes"] and "focused notes" not in result.stderr
    updates = [s for s in trace["steps"] if s["kind"] == "update"]
    assert not any("notes_unrelated" in s["flags"] for s in updates)
    # a server reads with them too, for the agents that read as the adapter trained
    trained = _trained_defaults(BackendSettings(adapter=str(adapter)), {})
    assert trained["memagent"]["focused_notes"] and trained["memreread"]["focused_notes"]
    assert "rememr1" not in trained


def test_eval_run_records_the_trained_settings_in_its_config(model, book, tmp_path):
    data = tmp_path / "data.jsonl"
    sample = {"id": "a", "question": QUESTION, "context": book.read_text(), "answers": ["4720519"]}
    data.write_text(json.dumps(sample) + "\n")
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        ["eval", "run", "--data", str(data), "--agent", "memagent", "--out", str(out),
         "--memory-tokens", "300", "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    config = json.loads((out / "config.json").read_text())["agent_config"]
    assert {k: config[k] for k in SHIPPED} == {**READ, "memory_tokens": 300}
    assert len(re.findall("trained with", result.stderr)) == 1


def test_serve_gives_the_trained_settings_to_the_agents_that_read_as_trained(
    model, capsys: pytest.CaptureFixture[str]
):
    trained = _trained_defaults(BackendSettings(), {"memory_tokens": 300})
    said = capsys.readouterr().err
    # once an adapter: the shared one, and memreread's and rememr1's own where this build
    # ships them
    own = {a for a in ("memreread", "rememr1")
           if memory_adapter_provenance(a) != memory_adapter_provenance()}  # fmt: skip
    assert said.count("trained with 1000-token chunks") == 1 + len(own)
    for agent in own:
        assert said.count(f"{agent}'s memory adapter was trained with") == 1
    settings = ServeConfig(
        runs_dir="unused", agent_defaults={"memory_tokens": 300}, trained_defaults=trained
    )

    def config(agent: str, **extension: Any) -> Any:
        body = {"model": f"longread-{agent}", "messages": [{"role": "user", "content": "q"}]}
        body["longread"] = {"document": "text", **extension}
        return resolve(ChatRequest.model_validate(body), settings, "").config

    memagent = config("memagent")
    assert (memagent.chunk_tokens, memagent.memory_tokens, memagent.final_tokens) == (1000, 300, 64)
    assert config("memreread").chunk_tokens == 1000
    assert config("memagent", chunk_tokens=2000).chunk_tokens == 2000  # the request wins
    # its own adapter's settings where it ships one, else ReMemR1's own default
    assert config("rememr1").chunk_tokens == (1000 if "rememr1" in own else 5000)
    assert _trained_defaults(BackendSettings(base_model=True), {}) == {}


def test_serve_grounds_the_exits_of_an_adapter_trained_to_exit(
    model, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    adapter = tmp_path / "adapter.gguf"
    adapter.write_bytes(b"not loaded: the model is replaced")
    probe = TrainedSettings("memagent", "paper", 1000, 256, 32, exit_probe=True)
    write_trained_settings(adapter, probe)
    trained = _trained_defaults(BackendSettings(adapter=str(adapter)), {})
    assert trained["memagent"]["exit_probe"] and trained["memagent"]["grounded_exit"]
    assert "--grounded-exit off for the papers' gate" in capsys.readouterr().err
    # a server flag chose: the papers' gate, or no exit at all
    off = _trained_defaults(BackendSettings(adapter=str(adapter)), {"grounded_exit": False})
    assert "grounded_exit" not in off["memagent"]
    no_exit = _trained_defaults(BackendSettings(adapter=str(adapter)), {"exit_probe": False})
    assert "grounded_exit" not in no_exit["memagent"]


def test_longread_train_defaults_to_the_settings_ask_reads_with():
    """A model trained with the defaults is read, by default, the way it was trained."""
    trained, asked = TrainConfig().agent, make_config("memagent")
    assert trained.name == "memagent"
    assert {k: getattr(trained, k) for k in PAPER} == {k: getattr(asked, k) for k in PAPER}
    assert {k: getattr(asked, k) for k in PAPER} == PAPER


def test_a_malformed_record_is_one_clear_error(tmp_path):
    adapter = tmp_path / "adapter.gguf"
    (tmp_path / "adapter.json").write_text(json.dumps({"trained_with": {"agent": "memagent"}}))
    with pytest.raises(UsageError, match=r"trained_with\.prompt_set must be a str"):
        read_trained_settings(adapter)
    record = {"agent": "memagent", **SHIPPED, "exit_gate": "yes"}
    (tmp_path / "adapter.json").write_text(json.dumps({"trained_with": record}))
    with pytest.raises(UsageError, match=r"trained_with\.exit_gate must be true or false"):
        read_trained_settings(adapter)
    record = {"trained_with": {"agent": "memagent", **SHIPPED}, "reads_with": ["exit_gate"]}
    (tmp_path / "adapter.json").write_text(json.dumps(record))
    with pytest.raises(UsageError, match=r"reads_with must be a list of reading options among"):
        read_trained_settings(adapter)
    (tmp_path / "adapter.json").write_text(json.dumps({"something": "else"}))
    assert read_trained_settings(adapter) is None  # a JSON of another kind records nothing


def test_a_stage_trained_with_a_gate_records_it_for_the_readers():
    from longread.train.export import trained_settings

    agent = TrainConfig().agent
    assert trained_settings(agent).options() == {**PAPER}  # no gate: none recorded
    agent.options = {"exit_gate": True}
    assert trained_settings(agent).options() == {**PAPER, "exit_gate": True}
    # a memory option rolled out with is read with by default, as it trained
    agent.options = {"focused_notes": True, "grounded_notes": False}
    assert trained_settings(agent).reads_with == ("focused_notes",)
    assert trained_settings(agent).options() == {**PAPER, "focused_notes": True}
    # ... and rememr1's format stop: its rollouts' replies ended where their format did
    agent.name, agent.options = "rememr1", {"format_stop": True}
    assert trained_settings(agent).reads_with == ("format_stop",)
