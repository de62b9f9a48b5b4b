"""Many questions, one document: MemAgent's single chunk-major pass (agents/multi.py) and
evaluation samples that share a document."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pytest

from longread.agents.memagent import NO_MEMORY, MemAgent, MemAgentConfig
from longread.data.records import Sample
from longread.errors import UsageError
from longread.eval.runner import group_by_document, run_eval
from longread.eval.store import DONE, FAILED
from longread.llm.base import Message
from longread.text.chunking import Chunk
from longread.trace import Step

from .eval_helpers import AnswerBackend, open_store
from .scripted import ScriptedBackend, WordTokenizer

QUESTIONS = ["Who wrote the letter?", "Where was it sent?", "When did it arrive?"]
SECTIONS = ["Ann wrote a letter.", "She sent it to Rome.", "It arrived in May.", "The end."]


def chunks(*texts: str) -> list[Chunk]:
    tok = WordTokenizer()
    return [Chunk(i, t, tok.count(t)) for i, t in enumerate(texts)]


def digest_reply(messages: Sequence[Message]) -> str:
    """A reply that is a function of the whole prompt: two runs give the same replies only
    if every prompt they sent was the same."""
    prompt = messages[-1]["content"]
    digest = hashlib.sha1(prompt.encode()).hexdigest()[:8]
    return f"\\boxed{{{digest}}}" if "\\boxed" in prompt else f"kept {digest}"


def digest_backend() -> ScriptedBackend:
    return ScriptedBackend([digest_reply] * 200)


def agent_for(backend: ScriptedBackend, **config: object) -> MemAgent:
    return MemAgent(backend, WordTokenizer(), MemAgentConfig(**config))  # type: ignore[arg-type]


def prompts_of(backend: ScriptedBackend) -> list[str]:
    return [messages[-1]["content"] for messages, _ in backend.requests]


class Sink:
    """Keeps each step's record as written (a sink's steps shed their text afterwards)."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []

    def write(self, step: Step) -> None:
        self.steps.append(step.to_dict())


# -- the prompt order ------------------------------------------------------------------------


@pytest.mark.parametrize("section_first", [False, True])
async def test_section_first_puts_the_section_before_the_problem_and_memory(section_first):
    backend = ScriptedBackend(["m", "\\boxed{x}"])
    agent = agent_for(backend, section_first=section_first)
    run = await agent.run("Who wrote it?", chunks("The author is Ann."))
    update = prompts_of(backend)[0]
    where = {s: update.index(s) for s in ("Who wrote it?", NO_MEMORY, "The author is Ann.")}
    order = sorted(where, key=where.__getitem__)
    if section_first:
        assert order == ["The author is Ann.", "Who wrote it?", NO_MEMORY]
    else:  # the paper's order stays the default
        assert order == ["Who wrote it?", NO_MEMORY, "The author is Ann."]
    assert run.config["section_first"] is section_first  # recorded with the run


@pytest.mark.parametrize("prompt_set", ["paper", "notes"])
async def test_section_first_calls_on_one_chunk_share_a_prefix_holding_the_whole_chunk(
    prompt_set,
):
    shared = []
    for section_first in (False, True):
        backend = digest_backend()
        agent = agent_for(backend, section_first=section_first, prompt_set=prompt_set)
        await agent.run_many(QUESTIONS[:2], chunks(*SECTIONS))
        first, second = prompts_of(backend)[:2]  # chunk 0 for question 1, then question 2
        shared.append(common_prefix(first, second))
    paper, section_first = shared
    assert SECTIONS[0] not in paper
    assert SECTIONS[0] in section_first


def common_prefix(a: str, b: str) -> str:
    same = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return a[:same]


# -- one pass, many questions ----------------------------------------------------------------


@pytest.mark.parametrize("section_first", [False, True])
async def test_answers_and_steps_equal_asking_one_question_at_a_time(section_first):
    alone = []
    for question in QUESTIONS:
        backend = digest_backend()
        alone.append(await agent_for(backend, section_first=section_first).run(
            question, chunks(*SECTIONS)
        ))  # fmt: skip
    backend = digest_backend()
    together = await agent_for(backend, section_first=section_first).run_many(
        QUESTIONS, chunks(*SECTIONS)
    )
    assert [run.question for run in together] == QUESTIONS
    for one, many in zip(alone, together, strict=True):
        assert many.answer == one.answer and many.boxed == one.boxed
        assert [s.messages for s in many.steps] == [s.messages for s in one.steps]
        assert [(s.kind, s.step, s.chunk_index, s.memory) for s in many.steps] == [
            (s.kind, s.step, s.chunk_index, s.memory) for s in one.steps
        ]
        assert many.config == one.config
    assert len(backend.requests) == len(QUESTIONS) * (len(SECTIONS) + 1)


async def test_calls_go_chunk_major_then_the_final_answers():
    backend = digest_backend()
    await agent_for(backend, section_first=True).run_many(QUESTIONS, chunks(*SECTIONS))
    order = []
    for prompt in prompts_of(backend):
        question = next(i for i, q in enumerate(QUESTIONS) if q in prompt)
        section = next((i for i, s in enumerate(SECTIONS) if s in prompt), None)
        order.append((section, question))
    chunk_major = [(c, q) for c in range(len(SECTIONS)) for q in range(len(QUESTIONS))]
    assert order == chunk_major + [(None, q) for q in range(len(QUESTIONS))]


async def test_each_question_keeps_its_own_run_ids_and_step_records():
    sinks = [Sink(), Sink()]
    backend = digest_backend()
    runs = await agent_for(backend).run_many(
        QUESTIONS[:2], chunks(*SECTIONS), sample_ids=["s1", "s2"], sinks=sinks
    )
    assert [run.sample_id for run in runs] == ["s1", "s2"]
    assert runs[0].run_id != runs[1].run_id
    for run, sink in zip(runs, sinks, strict=True):
        # One typed record per model call, every one of them in this question's sink.
        assert [s["kind"] for s in sink.steps] == ["update"] * len(SECTIONS) + ["final"]
        ids = {(s["run_id"], s["sample_id"]) for s in sink.steps}
        assert ids == {(run.run_id, run.sample_id)}
        assert all(run.question in s["messages"][-1]["content"] for s in sink.steps)
        assert run.streamed and run.steps[-1].reply  # the final step kept whole
    assert sum(run.calls for run in runs) == len(backend.requests)


async def test_a_run_many_on_text_cuts_it_once_to_the_smallest_plan():
    backend = ScriptedBackend([digest_reply] * 50, context_window=1000)
    agent = agent_for(backend, chunk_tokens=800, memory_tokens=60, final_tokens=20)
    long_question = "Which " + "very " * 40 + "long question?"
    plan = agent.plan_many(["Short?", long_question])
    assert plan.chunk_tokens == agent.plan(long_question).chunk_tokens
    assert plan.chunk_tokens < agent.plan("Short?").chunk_tokens
    text = " ".join(f"Word{i}." for i in range(1500))
    runs = await agent.run_many(["Short?", long_question], text)
    assert [run.config["chunk_tokens_used"] for run in runs] == [plan.chunk_tokens] * 2


@pytest.mark.parametrize("questions", [[], ["fine?", "   "]])
async def test_no_question_or_an_empty_one_is_a_usage_error(questions):
    backend = digest_backend()
    with pytest.raises(UsageError, match="question"):
        await agent_for(backend).run_many(questions, chunks(*SECTIONS))
    assert backend.requests == []


# -- evaluation: samples that share a document -----------------------------------------------


def shared_samples() -> list[Sample]:
    book, other = " ".join(SECTIONS), "A different document entirely."
    return [
        Sample(id="q1", question=QUESTIONS[0], context=book, answers=["Ann"]),
        Sample(id="x", question="What is it?", context=other, answers=["it"]),
        Sample(id="q2", question=QUESTIONS[1], context=book, answers=["Rome"]),
        Sample(id="q3", question=QUESTIONS[2], context=book, answers=["May"]),
    ]


def memagent_factory(backend: object, **config: object) -> object:
    cfg = MemAgentConfig(chunk_tokens=6, **config)  # type: ignore[arg-type]
    return lambda progress: MemAgent(backend, WordTokenizer(), cfg, progress)  # type: ignore[arg-type]


def test_samples_are_grouped_by_identical_document_in_first_seen_order():
    groups = group_by_document(shared_samples())
    assert [[s.id for s in group] for group in groups] == [["q1", "q2", "q3"], ["x"]]


def trace_steps(tmp_path, sample_id: str) -> list[tuple[str, str]]:
    data = json.loads((tmp_path / "traces" / f"{sample_id}.json").read_text())
    return [(s["kind"], s["messages"][-1]["content"]) for s in data["steps"]]


@pytest.mark.parametrize("section_first", [False, True])
async def test_eval_results_and_traces_equal_running_samples_one_by_one(tmp_path, section_first):
    samples = shared_samples()
    together, alone = tmp_path / "together", tmp_path / "alone"
    backend = digest_backend()
    with open_store(together, agent="memagent") as store:
        factory = memagent_factory(backend, section_first=section_first)
        await run_eval(samples, factory, store, concurrency=1, progress=False)
        rows = {r.sample_id: r for r in store.results()}
    with open_store(alone, agent="memagent") as store:
        for one in samples:  # each alone: no sample shares its document with another
            factory = memagent_factory(digest_backend(), section_first=section_first)
            await run_eval([one], factory, store, concurrency=1, progress=False)
        rows_alone = {r.sample_id: r for r in store.results()}
    for sample_id, row in rows.items():
        assert row.status == rows_alone[sample_id].status == DONE
        assert row.score == rows_alone[sample_id].score
        assert row.cost["calls"] == rows_alone[sample_id].cost["calls"]
        assert trace_steps(together, sample_id) == trace_steps(alone, sample_id)
    asked = [next((q for q in QUESTIONS if q in p), "other") for p in prompts_of(backend)]
    if section_first:  # read together: the first chunk for every question in a row
        assert asked[:3] == QUESTIONS
    else:  # the paper's order gains nothing from it: one sample after another
        assert asked[:3] == [QUESTIONS[0]] * 3


async def test_a_grouped_eval_resumes_per_sample_and_a_failure_fails_the_group(tmp_path):
    samples = shared_samples()
    replies: dict[str, str | BaseException] = {q: "\\boxed{Ann}" for q in QUESTIONS}
    replies["What is it?"] = "\\boxed{it}"
    replies[QUESTIONS[2]] = UsageError("scripted failure")
    backend = AnswerBackend(replies)
    with open_store(tmp_path, agent="memagent") as store:
        factory = memagent_factory(backend, section_first=True)
        summary = await run_eval(samples, factory, store, concurrency=2, progress=False)
        rows = {r.sample_id: r for r in store.results()}
    assert rows["x"].status == DONE
    assert {rows[i].status for i in ("q1", "q2", "q3")} == {FAILED}  # one unit of work
    assert summary.failed == 3
    # Each failed sample keeps what its own calls cost: q1 and q2 read the first chunk.
    assert [rows[i].cost["calls"] for i in ("q1", "q2", "q3")] == [1, 1, 0]
    assert not list((tmp_path / "traces").glob("q*.json"))  # a failed sample has no trace

    replies[QUESTIONS[2]] = "\\boxed{May}"
    again = AnswerBackend(replies)
    with open_store(tmp_path, agent="memagent") as store:
        factory = memagent_factory(again, section_first=True)
        summary = await run_eval(samples, factory, store, concurrency=2, progress=False)
    assert summary.skipped == 1 and summary.ran == 3  # x was done; the group is retried
    assert "What is it?" not in again.calls
    assert summary.done == 4 and summary.failed == 0
    assert (tmp_path / "traces" / "q3.json").is_file()


@pytest.mark.parametrize("prompt_set", ["paper", "notes"])
@pytest.mark.parametrize("section_first", [False, True])
def test_the_viewer_finds_the_exact_chunk_in_either_prompt_order(prompt_set, section_first):
    from longread.agents.memagent import MemAgentConfig, update_messages
    from longread.agents.prompts import Prompts
    from longread.view.chunks import find_chunk

    chunk = "Section:\nAnn wrote a letter.\n\nMemory: she kept a copy of it."
    prompts = Prompts(prompt_set=prompt_set)
    layout = MemAgentConfig(section_first=section_first)
    prompt = update_messages(QUESTIONS[0], "Earlier notes.", chunk, prompts, layout)[0]["content"]
    found = find_chunk(prompt, "memagent", None, "Earlier notes.")
    assert found is not None and found.exact
    assert found.text == chunk
