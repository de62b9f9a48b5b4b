"""The step record: what every model call leaves behind, for eval, training, serving, viewing."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from longread.agents import Agent, make_agent
from longread.agents.memagent import MemAgent
from longread.cli import cli
from longread.errors import BackendError
from longread.text.chunking import Chunk
from longread.trace import SCHEMA_VERSION, STEP_KINDS, Run, Step

from .scripted import ScriptedBackend, WordTokenizer

RESULTS = Path(__file__).resolve().parent.parent / "results" / "runs"


def chunks(*texts: str) -> list[Chunk]:
    tok = WordTokenizer()
    return [Chunk(i, t, tok.count(t)) for i, t in enumerate(texts)]


def memagent(backend: ScriptedBackend, **options) -> MemAgent:
    return MemAgent(backend, WordTokenizer(), **options)


async def test_every_step_carries_schema_ids_time_and_a_known_kind():
    backend = ScriptedBackend(["memory A", "memory B", "\\boxed{7}"])
    run = await memagent(backend).run("q?", chunks("one", "two"), sample_id="s-1")
    assert run.schema == SCHEMA_VERSION and run.sample_id == "s-1" and run.run_id
    for index, step in enumerate(run.steps):
        assert step.schema == SCHEMA_VERSION
        assert (step.run_id, step.sample_id, step.step) == (run.run_id, "s-1", index)
        assert step.kind in STEP_KINDS
        assert datetime.fromisoformat(step.started) >= datetime.fromisoformat(run.started)
        assert step.seconds >= 0
    assert [s.started for s in run.steps] == sorted(s.started for s in run.steps)


async def test_two_runs_get_different_run_ids():
    backend = ScriptedBackend(["m", "\\boxed{1}", "m", "\\boxed{1}"])
    agent = memagent(backend)
    first, second = await agent.run("q?", chunks("a")), await agent.run("q?", chunks("a"))
    assert first.run_id != second.run_id


async def test_a_run_named_before_it_starts_carries_that_name_in_every_step():
    """``longread serve`` sends the run's id in its headers before the first call."""
    seen = []
    backend = ScriptedBackend(["memory A", "\\boxed{7}"])
    agent = MemAgent(backend, WordTokenizer(), progress=lambda step, _: seen.append(step.run_id))
    run = await agent.run("q?", chunks("one"), run_id="run-42")
    assert run.run_id == "run-42"
    assert [s.run_id for s in run.steps] == seen == ["run-42", "run-42"]


async def test_a_saved_trace_loads_back_equal(tmp_path):
    backend = ScriptedBackend(["m", "\\boxed{1}"], with_tokens=True)
    run = await memagent(backend, record_tokens=True).run("q?", chunks("a"), sample_id="x")
    run.save(tmp_path / "trace.json")
    assert Run.load(tmp_path / "trace.json") == run


async def test_tokens_are_recorded_only_when_asked():
    backend = ScriptedBackend(["memory", "\\boxed{1}"], with_tokens=True)
    plain = await memagent(backend).run("q?", chunks("a"))
    assert all(s.tokens is None for s in plain.steps)
    assert not any(params.record_tokens for _, params in backend.requests)


async def test_recorded_tokens_are_the_backends_ids_and_logprobs():
    backend = ScriptedBackend(["memory words", "\\boxed{1}"], with_tokens=True)
    run = await memagent(backend, record_tokens=True).run("q?", chunks("a"))
    assert all(params.record_tokens for _, params in backend.requests)
    update = run.steps[0].tokens
    assert update is not None
    tokenizer = WordTokenizer()
    prompt = backend.requests[0][0][0]["content"]
    assert update.prompt_ids == tokenizer.encode(prompt)
    assert update.completion_ids == tokenizer.encode("memory words")
    assert update.logprobs == [-0.5, -0.5]


async def test_a_backend_that_cannot_record_tokens_fails_the_run_clearly():
    backend = ScriptedBackend(["memory", "\\boxed{1}"], with_tokens=False)
    with pytest.raises(BackendError, match="no token ids"):
        await memagent(backend, record_tokens=True).run("q?", chunks("a"))


def test_registry_agents_satisfy_the_agent_protocol():
    backend = ScriptedBackend([])
    for name in ("memagent", "rememr1", "memreread", "full", "rag"):
        agent = make_agent(name, backend, WordTokenizer())
        assert isinstance(agent, Agent)
        assert agent.plan("a question?").chunk_tokens > 0


def test_an_unknown_kind_or_a_newer_schema_is_refused():
    record = dict(kind="update", step=0, seconds=0.1, messages=[], reply="", finish_reason="stop",
                  prompt_tokens=1, completion_tokens=1)  # fmt: skip
    with pytest.raises(ValueError, match="unknown step kind"):
        Step(**{**record, "kind": "summarise"})
    with pytest.raises(ValueError, match="newer"):
        Step.from_dict({**record, "schema": SCHEMA_VERSION + 1})


V1_REMEMR1 = {
    "agent": "rememr1", "question": "q", "answer": "x", "final_reply": "\\boxed{x}",
    "boxed": True, "seconds": 1.0,
    "conversations": [
        {"kind": "update", "step": 0, "messages": [], "reply": "r", "prompt_tokens": 3,
         "completion_tokens": 1, "seconds": 0.5, "finish_reason": "stop", "chunk_index": 0,
         "chunk_tokens": 2, "memory": "m", "answer": None, "flags": [], "phase": "",
         "recall_query": "Zurich", "recalled_memory": "[step 0] m", "recalled_step": 0,
         "sub_question": None, "truncated_tokens": None, "retrieved_chunks": None,
         "token_ids": None, "logprobs": None},
        {"kind": "final", "step": 1, "messages": [], "reply": "\\boxed{x}", "prompt_tokens": 3,
         "completion_tokens": 1, "seconds": 0.5, "finish_reason": "stop", "answer": "x",
         "sub_question": "Where?", "truncated_tokens": 12, "retrieved_chunks": [2, 0]},
    ],
}  # fmt: skip


def test_schema_1_traces_load_with_their_parts_typed():
    run = Run.from_dict(json.loads(json.dumps(V1_REMEMR1)))
    update, final = run.steps
    assert update.schema == SCHEMA_VERSION
    assert update.recall is not None
    assert (update.recall.query, update.recall.memory, update.recall.step) == (
        "Zurich",
        "[step 0] m",
        0,
    )
    assert final.reread is not None and final.reread.sub_question == "Where?"
    assert final.cut is not None and final.cut.cut_tokens == 12
    assert final.retrieval is not None and final.retrieval.chunks == [2, 0]


def test_the_committed_schema_1_results_still_load():
    traces = sorted(RESULTS.glob("*/traces/*.json"))
    assert traces, "the committed results/ runs are part of the repository"
    rag = next(p for p in traces if p.parts[-3].startswith("rag-"))
    old = json.loads(rag.read_text())
    run = Run.load(rag)
    assert run.answer == old["answer"] and len(run.steps) == len(old["conversations"])
    assert run.steps[0].retrieval is not None
    assert run.steps[0].retrieval.chunks == old["conversations"][0]["retrieved_chunks"]


def test_trace_migrate_rewrites_old_files_once(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(V1_REMEMR1))
    runner = CliRunner()
    first = runner.invoke(cli, ["trace", "migrate", str(path)])
    assert first.exit_code == 0, first.output
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA_VERSION and "conversations" not in data
    assert data["steps"][0]["recall"]["query"] == "Zurich"
    assert Run.from_dict(data) == Run.from_dict(V1_REMEMR1)
    second = runner.invoke(cli, ["trace", "migrate", str(path)])
    assert second.exit_code == 0 and "0 of 1" in second.output


def test_trace_migrate_takes_a_run_folder(tmp_path):
    source = next(p for p in sorted(RESULTS.glob("rag-*")) if p.is_dir())
    folder = tmp_path / "run"
    shutil.copytree(source / "traces", folder / "traces")
    count = len(list((folder / "traces").glob("*.json")))
    result = CliRunner().invoke(cli, ["trace", "migrate", str(folder)])
    assert result.exit_code == 0, result.output
    assert f"{count} of {count}" in result.output
    for path in (folder / "traces").glob("*.json"):
        assert json.loads(path.read_text())["schema"] == SCHEMA_VERSION


def test_trace_migrate_refuses_a_file_that_is_not_a_trace(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    result = CliRunner().invoke(cli, ["trace", "migrate", str(path)])
    assert result.exit_code == 2 and "not a longread trace" in result.output


async def test_eval_traces_name_their_sample_in_every_step(tmp_path):
    from longread.eval.runner import run_eval

    from .eval_helpers import AnswerBackend, factory, open_store, question, sample

    samples = [sample("a1", ["x"]), sample("a2", ["y"])]
    backend = AnswerBackend({question("a1"): "\\boxed{x}", question("a2"): "\\boxed{y}"})
    with open_store(tmp_path / "run") as store:
        await run_eval(samples, factory(backend, "memagent"), store, 1, progress=False)
        rows = {r.sample_id: r for r in store.results()}
    for sample_id in ("a1", "a2"):
        run = Run.load(tmp_path / "run" / rows[sample_id].trace)
        assert run.sample_id == sample_id and run.schema == SCHEMA_VERSION
        assert {(s.sample_id, s.run_id) for s in run.steps} == {(sample_id, run.run_id)}


def test_an_agent_given_another_agents_config_is_refused():
    from longread.agents import RAGConfig
    from longread.errors import UsageError

    with pytest.raises(UsageError, match="memagent takes a MemAgentConfig, not a RAGConfig"):
        make_agent("memagent", ScriptedBackend([]), WordTokenizer(), RAGConfig())
