"""Training rows from recorded runs: one per conversation, prompt masked, sampled ids kept."""

from __future__ import annotations

import pytest

from longread.agents.memagent import MemAgent
from longread.text.chunking import Chunk
from longread.train import training_rows

from .scripted import ScriptedBackend, WordTokenizer


def chunks(*texts: str) -> list[Chunk]:
    tok = WordTokenizer()
    return [Chunk(i, t, tok.count(t)) for i, t in enumerate(texts)]


async def recorded_run(record_tokens: bool = True):
    backend = ScriptedBackend(["first memory", "second memory", "\\boxed{7}"], with_tokens=True)
    agent = MemAgent(backend, WordTokenizer(), record_tokens=record_tokens)
    return await agent.run("What is it?", chunks("one", "two"), sample_id="q1"), backend


async def test_every_conversation_is_one_row_with_its_own_advantage_and_sampled_ids():
    run, backend = await recorded_run()
    rows = training_rows(run, [0.5, 0.5, -0.25], group="q1")
    assert [r.step for r in rows] == [0, 1, 2]
    assert [r.advantage for r in rows] == [0.5, 0.5, -0.25]
    assert [r.is_final for r in rows] == [False, False, True]
    assert {(r.group, r.rollout) for r in rows} == {("q1", run.run_id)}
    tokenizer = WordTokenizer()
    for row, (messages, _) in zip(rows, backend.requests, strict=True):
        assert row.prompt_ids == tokenizer.encode(messages[0]["content"])
    assert rows[0].completion_ids == tokenizer.encode("first memory")
    assert rows[0].old_logprobs == [-0.5, -0.5]


async def test_the_loss_mask_covers_the_completion_only():
    run, _ = await recorded_run()
    row = training_rows(run, [1.0, 1.0, 1.0], group="q1")[2]
    assert len(row.loss_mask) == len(row.prompt_ids) + len(row.completion_ids)
    assert row.loss_mask == [0] * len(row.prompt_ids) + [1] * len(row.completion_ids)


async def test_a_run_without_token_records_is_refused():
    run, _ = await recorded_run(record_tokens=False)
    with pytest.raises(ValueError, match="record_tokens=True"):
        training_rows(run, [0.0, 0.0, 0.0], group="q1")


async def test_one_advantage_per_step_is_required():
    run, _ = await recorded_run()
    with pytest.raises(ValueError, match="2 advantages for a run of 3 steps"):
        training_rows(run, [0.0, 0.0], group="q1")
