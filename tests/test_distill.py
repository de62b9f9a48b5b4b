"""Self-distilled update rows (train/distill.py): a teacher run's own replies, trained under
the training agent's prompt."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from longread.agents.memagent import NO_MEMORY, MemAgent, MemAgentConfig, update_messages
from longread.agents.prompts import Prompts
from longread.data.records import Sample
from longread.errors import UsageError
from longread.train.distill import distilled_record, teacher_prompts, teacher_updates
from longread.train.oracle import oracle_episode, oracle_rows

from .scripted import ScriptedBackend, WordTokenizer
from .test_gates import CharPolicy

ROOT = Path(__file__).resolve().parents[1]
FILLER = [f"Filler line {i} about the hills." for i in range(300)]
SAMPLE = Sample(
    "s1",
    "Which river runs past the mill?",
    " ".join([*FILLER[:120], "The Avon runs past the mill.", *FILLER[120:]]),
    ["Avon"],
)


async def teacher_trace(replies: list[str]) -> dict:
    """A memagent run in the papers' order, as ``eval run`` writes its trace: ``replies`` to
    its first updates, the last one again to the rest."""
    config = MemAgentConfig(chunk_tokens=400)
    _, chunks = await MemAgent(ScriptedBackend([]), WordTokenizer(), config).chunks(
        SAMPLE.question, SAMPLE.context
    )
    script = [*replies, *[replies[-1]] * (len(chunks) - len(replies)), "\\boxed{Avon}"]
    agent = MemAgent(ScriptedBackend(script), WordTokenizer(), config)
    run = await agent.run(SAMPLE.question, SAMPLE.context)
    run.sample_id = SAMPLE.id
    return run.to_dict()


async def test_teacher_updates_are_the_runs_own_states_and_replies():
    """Each first-pass update comes back as the memory it was shown, its section and its
    reply: the notes the teacher wrote are the memory of the next update."""
    replies = ["Hills.", "The Avon runs past the mill."]
    trace = await teacher_trace(replies)
    updates = teacher_updates(trace, Prompts())
    assert len(updates) >= 3 and [u["reply"] for u in updates[:2]] == replies
    assert [u["memory"] for u in updates[:3]] == [NO_MEMORY, "Hills.", replies[1]]
    sections = [u["section"] for u in updates]
    assert sum("The Avon runs past the mill." in s for s in sections) == 1
    assert all(sum(f"{line} " in f"{s} " for s in sections) == 1 for line in FILLER)


def test_distilled_rows_train_the_teachers_replies_under_the_gate_prompt():
    """The oracle gives a distilled sample's updates the training agent's own prompt (its
    update gate's sentence included) and the teacher's replies, never the oracle's copy or a
    <keep/>; every one stays a row even when update_share drops other rows; no final row."""
    trace = asyncio.run(teacher_trace(["Hills.", "The Avon runs past the mill."]))
    replies = [u["reply"] for u in teacher_updates(trace, Prompts())]
    distilled = Sample(**distilled_record(SAMPLE, trace, Prompts()))
    gated = MemAgent(
        ScriptedBackend([]), WordTokenizer(), MemAgentConfig(chunk_tokens=400, update_gate=True)
    )
    turns = asyncio.run(oracle_episode(gated, distilled))
    assert [t.reply for t in turns] == replies and {t.kind for t in turns} == {"update"}
    section = teacher_updates(trace, Prompts())[1]["section"]
    expected = update_messages(SAMPLE.question, "Hills.", section, None, gated.config)
    assert turns[1].messages == expected and "<keep/>" in expected[-1]["content"]
    rows = oracle_rows(gated, CharPolicy(), [distilled], update_share=0.01)
    assert [bytes(r.completion_ids[:-1]).decode() for r in rows] == replies
    assert not any(r.is_final for r in rows)


@pytest.mark.parametrize("option", ["section_first", "update_gate"])
def test_a_teacher_must_read_the_papers_plain_prompts(option):
    """A teacher run whose update prompts carry another layout is refused, naming it."""
    config = {"agent": "memagent", "agent_config": {"prompt_set": "paper", option: True}}
    with pytest.raises(UsageError, match=option):
        teacher_prompts(config)


async def test_a_trace_of_another_sample_or_prompt_is_refused():
    trace = await teacher_trace(["a", "b", "c"])
    other = Sample("s2", SAMPLE.question, SAMPLE.context, SAMPLE.answers)
    with pytest.raises(UsageError, match="s2"):
        distilled_record(other, trace, Prompts())
    with pytest.raises(UsageError, match="not the papers' update prompt"):
        teacher_updates(trace, Prompts("notes"))


async def test_the_recipe_writes_distilled_samples(tmp_path):
    """recipes/smollm2/self_distill.py: a run folder and its data in, samples with their
    teacher's updates out; a sample without a trace is a one-line error."""
    trace = await teacher_trace(["a", "b", "c"])
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"agent": "memagent", "agent_config": {}}))
    (run / "traces" / "s1.json").write_text(json.dumps(trace))
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps(SAMPLE.to_dict()) + "\n")
    script = ROOT / "recipes/smollm2/self_distill.py"
    out = tmp_path / "out" / "d.jsonl"
    command = [sys.executable, script, run, data, out]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    assert [u["reply"] for u in record["meta"]["teacher_updates"]][:3] == ["a", "b", "c"]
    (run / "traces" / "s1.json").unlink()
    failed = subprocess.run(command, capture_output=True, text=True)
    assert failed.returncode != 0 and "1 of 1 samples have no trace" in failed.stderr


def test_only_memagent_trains_on_a_teachers_updates():
    """A teacher's updates are memagent's prompts and replies: a ReMemR1 stage given such a
    sample is refused, naming the sample, rather than trained on its own oracle."""
    from longread.agents.rememr1 import ReMemR1, ReMemR1Config

    trace = asyncio.run(teacher_trace(["a", "b"]))
    distilled = Sample(**distilled_record(SAMPLE, trace, Prompts()))
    agent = ReMemR1(ScriptedBackend([]), WordTokenizer(), ReMemR1Config(chunk_tokens=400))
    with pytest.raises(UsageError, match="s1"):
        oracle_rows(agent, CharPolicy(), [distilled])
