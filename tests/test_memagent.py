"""MemAgent control flow against a scripted backend (ALGORITHMS.md section 1)."""

import pytest

from longread.agents.memagent import NO_MEMORY, MemAgent, MemAgentConfig
from longread.errors import BackendError, BudgetError, UsageError
from longread.text.chunking import Chunk, chunk_text
from longread.trace import MEMORY_KEPT, MEMORY_TRUNCATED, NO_BOXED_ANSWER, Run

from .scripted import ScriptedBackend, WordTokenizer


def chunks(*texts: str) -> list[Chunk]:
    tok = WordTokenizer()
    return [Chunk(i, t, tok.count(t)) for i, t in enumerate(texts)]


def agent_for(backend: ScriptedBackend, **config) -> MemAgent:
    return MemAgent(backend, WordTokenizer(), MemAgentConfig(**config))


async def test_n_chunks_make_n_plus_one_calls_and_memory_is_replaced():
    backend = ScriptedBackend(["memory A", "memory B", "memory C", "It is \\boxed{42}."])
    run = await agent_for(backend).run("What is the number?", chunks("one", "two", "three"))

    assert run.calls == 4
    assert [c.kind for c in run.steps] == ["update"] * 3 + ["final"]
    prompts = [req[0][0]["content"] for req in backend.requests]
    # Each update sees the previous reply as its memory, and only that: replacement, not append.
    assert NO_MEMORY in prompts[0]
    assert "memory A" in prompts[1] and NO_MEMORY not in prompts[1]
    assert "memory B" in prompts[2] and "memory A" not in prompts[2]
    assert "memory C" in prompts[3] and "memory B" not in prompts[3]
    assert [c.memory for c in run.steps[:3]] == ["memory A", "memory B", "memory C"]
    assert run.answer == "42" and run.boxed


async def test_update_prompt_orders_problem_memory_section():
    backend = ScriptedBackend(["m", "\\boxed{x}"])
    await agent_for(backend).run("Who wrote it?", chunks("The author is Ann."))
    update = backend.requests[0][0][0]["content"]
    positions = [update.index(s) for s in ("Who wrote it?", NO_MEMORY, "The author is Ann.")]
    assert positions == sorted(positions)
    final = backend.requests[1][0][0]["content"]
    assert "Who wrote it?" in final and "The author is Ann." not in final  # memory only


async def test_think_blocks_are_not_carried_into_memory():
    backend = ScriptedBackend(["<think>long musing</think>the key is 7", "\\boxed{7}"])
    run = await agent_for(backend).run("key?", chunks("text"))
    assert run.steps[0].memory == "the key is 7"
    assert "long musing" not in backend.requests[1][0][0]["content"]


async def test_budgets_are_sent_as_max_tokens():
    backend = ScriptedBackend(["m", "\\boxed{x}"])
    await agent_for(backend, memory_tokens=300, final_tokens=50, seed=7).run("q", chunks("c"))
    assert backend.requests[0][1].max_tokens == 300
    assert backend.requests[1][1].max_tokens == 50
    assert backend.requests[0][1].seed == 7


async def test_truncated_memory_is_flagged_and_reported():
    backend = ScriptedBackend(["cut memo", "\\boxed{x}"], finish_reasons=["length", "stop"])
    run = await agent_for(backend, memory_tokens=2).run("q", chunks("c"))
    assert MEMORY_TRUNCATED in run.steps[0].flags
    assert any("cap" in note for note in run.notes)


async def test_answer_without_box_is_the_whole_reply_and_flagged():
    backend = ScriptedBackend(["m", "Paris, I think"])
    run = await agent_for(backend).run("q", chunks("c"))
    assert run.answer == "Paris, I think" and not run.boxed
    assert NO_BOXED_ANSWER in run.steps[-1].flags


async def test_string_document_is_chunked_with_the_tokenizer():
    document = " ".join(f"word{i}" for i in range(250))  # 250 tokens
    backend = ScriptedBackend(["m"] * 3 + ["\\boxed{x}"])
    run = await agent_for(backend, chunk_tokens=100).run("q", document)
    updates = run.steps[:-1]
    assert [c.chunk_tokens for c in updates] == [100, 100, 50]
    expected = chunk_text(document, WordTokenizer(), 100)
    assert "".join(c.text for c in expected) == document
    for conversation, chunk in zip(updates, expected, strict=True):
        assert chunk.text in conversation.messages[0]["content"]


async def test_small_window_shrinks_chunks_and_says_so():
    document = " ".join(f"w{i}" for i in range(3000))
    plan = agent_for(
        ScriptedBackend([], context_window=2048), memory_tokens=256, final_tokens=64
    ).plan("q")
    assert plan.shrunk and plan.chunk_tokens < 5000
    expected_chunks = -(-3000 // plan.chunk_tokens)
    backend = ScriptedBackend(["m"] * expected_chunks + ["\\boxed{x}"], context_window=2048)
    agent = agent_for(backend, memory_tokens=256, final_tokens=64)
    run = await agent.run("q", document)
    assert run.calls == expected_chunks + 1
    assert any("shrunk" in note for note in run.notes)
    for messages, params in backend.requests:
        prompt = sum(backend.tokenizer.count(m["content"]) for m in messages)
        assert prompt + params.max_tokens <= 2048


async def test_oversized_precut_chunk_is_refused():
    backend = ScriptedBackend([], context_window=2048)
    big = chunks(" ".join(["x"] * 4000))
    with pytest.raises(BudgetError, match="cut the document"):
        await agent_for(backend, memory_tokens=256, final_tokens=64).run("q", big)


async def test_backend_failure_fails_the_run_instead_of_an_empty_answer():
    def boom(messages):
        raise BackendError("server down")

    backend = ScriptedBackend(["m", boom])
    with pytest.raises(BackendError):
        await agent_for(backend).run("q", chunks("a", "b"))


@pytest.mark.parametrize("question", ["", "   "])
async def test_empty_question_is_a_usage_error(question):
    with pytest.raises(UsageError, match="question"):
        await agent_for(ScriptedBackend([])).run(question, chunks("a"))


async def test_empty_document_is_a_usage_error():
    with pytest.raises(UsageError, match="empty"):
        await agent_for(ScriptedBackend([])).run("q", "  \n")


@pytest.mark.parametrize("bad", [{"chunk_tokens": 0}, {"temperature": 3.0}, {"top_p": 0.0}])
def test_bad_config_values_are_usage_errors(bad):
    with pytest.raises(UsageError):
        MemAgentConfig(**bad)


async def test_trace_round_trips_through_json(tmp_path):
    backend = ScriptedBackend(["m1", "\\boxed{ok}"])
    run = await agent_for(backend).run("q", chunks("c"))
    path = tmp_path / "trace.json"
    run.save(path)
    import json

    loaded = Run.from_dict(json.loads(path.read_text()))
    assert loaded.answer == "ok" and loaded.calls == 2
    assert loaded.steps[0].messages == run.steps[0].messages
    assert loaded.steps[0].memory == "m1"


async def test_progress_callback_sees_every_call_with_expected_total():
    seen = []
    backend = ScriptedBackend(["m", "m", "\\boxed{x}"])
    agent = MemAgent(
        backend, WordTokenizer(), progress=lambda c, total: seen.append((c.kind, total))
    )
    await agent.run("q", chunks("a", "b"))
    assert seen == [("update", 3), ("update", 3), ("final", 3)]


async def test_an_empty_update_keeps_the_previous_memory_and_says_so():
    backend = ScriptedBackend(["the key is 7", "  ", "\\boxed{7}"])
    run = await agent_for(backend).run("key?", chunks("a", "b"))
    assert run.steps[1].memory == "the key is 7"
    assert MEMORY_KEPT in run.steps[1].flags
    assert "the key is 7" in backend.requests[2][0][0]["content"]  # the final call still sees it
    assert any("previous memory was kept" in note for note in run.notes)


async def test_a_reply_cut_inside_an_unclosed_think_keeps_the_previous_memory():
    backend = ScriptedBackend(
        ["the key is 7", "<think>the section talks about", "\\boxed{7}"],
        finish_reasons=["stop", "length", "stop"],
    )
    run = await agent_for(backend).run("key?", chunks("a", "b"))
    assert run.steps[1].memory == "the key is 7"
    assert {MEMORY_KEPT, MEMORY_TRUNCATED} <= set(run.steps[1].flags)
    assert "the key is 7" in backend.requests[2][0][0]["content"]


async def test_the_notes_prompt_set_is_selectable_and_differs_from_the_paper_default():
    paper, notes = ScriptedBackend(["m", "\\boxed{x}"]), ScriptedBackend(["m", "\\boxed{x}"])
    await agent_for(paper).run("q?", chunks("c"))
    await agent_for(notes, prompt_set="notes").run("q?", chunks("c"))
    paper_update, notes_update = (
        paper.requests[0][0][0]["content"],
        notes.requests[0][0][0]["content"],
    )
    assert "keep every relevant detail" in paper_update  # the papers' free rewrite
    assert "copied exactly" in notes_update and "copied exactly" not in paper_update


def test_an_unknown_prompt_set_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown prompt set 'terse'"):
        MemAgentConfig(prompt_set="terse")


def test_no_bundled_prompt_shows_an_example_answer():
    import importlib.resources
    import re

    folder = importlib.resources.files("longread.agents") / "prompts"
    texts = [f.read_text() for s in folder.iterdir() if s.is_dir() for f in s.iterdir()]
    assert len(texts) >= 13
    for text in texts:
        assert not re.search(r"\\boxed\{[^}]", text), text  # only the empty \boxed{} format
        # No worked example with made-up facts either: formats are shown with placeholders.
        assert "example" not in text.lower() and "Turin" not in text, text
