"""MemReread control flow against a scripted backend (ALGORITHMS.md section 3)."""

from __future__ import annotations

import pytest

from longread.agents.memreread import (
    HISTORY_TRIMMED,
    REPEATED_SUBQUESTION,
    MemReread,
    MemRereadConfig,
    parse_decision,
)
from longread.errors import UsageError
from longread.text.chunking import Chunk
from longread.trace import DECISION_TRUNCATED, FORMAT_ERROR, MEMORY_KEPT

from .scripted import ScriptedBackend, WordTokenizer


def chunks(n: int) -> list[Chunk]:
    return [Chunk(i, f"section text {i}.", 3) for i in range(n)]


class Router:
    """Replies by the kind of call, read off the prompt: decide, integrate, update or answer."""

    def __init__(self, decisions: list[str]) -> None:
        self.decisions = list(decisions)
        self.updates = 0

    def __call__(self, messages) -> str:
        content = messages[0]["content"]
        if "Decide whether the memory is enough" in content:
            return self.decisions.pop(0)
        if "You reread the whole document" in content:
            return "integrated notes <confirmed>fact</confirmed>"
        if "Section:" in content:
            self.updates += 1
            return f"memory after update {self.updates}"
        return "the answer is \\boxed{Zurich}"


def make(decisions: list[str], max_reread: int = 2, calls: int = 100):
    router = Router(decisions)
    backend = ScriptedBackend([router] * calls)
    agent = MemReread(backend, WordTokenizer(), MemRereadConfig(max_reread=max_reread))
    return agent, backend


def kinds(run) -> list[str]:
    return [c.kind for c in run.steps]


async def test_stop_after_root_pass_costs_n_plus_2_calls():
    agent, _ = make(["<stop/>"])
    run = await agent.run("Where is the vault?", chunks(3))
    assert kinds(run) == ["update"] * 3 + ["decide", "final"]
    assert run.calls == 3 + 2
    assert [c.phase for c in run.steps] == ["root"] * 3 + ["decide-1", "final"]
    assert run.answer == "Zurich"


async def test_one_reread_builds_a_sub_memory_and_integrates_it():
    agent, _ = make(["<subquestion>Which city holds the vault?</subquestion>", "<stop/>"])
    run = await agent.run("Where is the vault?", chunks(2))

    assert kinds(run) == ["update"] * 2 + ["decide"] + ["update"] * 2 + [
        "final", "integrate", "decide", "final",
    ]  # fmt: skip
    reread = [c for c in run.steps if c.phase == "reread-1"]
    # The reread reads the whole document with the sub-question as its problem.
    assert [c.chunk_index for c in reread if c.kind == "update"] == [0, 1]
    assert all("Which city holds the vault?" in c.messages[0]["content"] for c in reread)
    integrate = next(c for c in run.steps if c.kind == "integrate")
    prompt = integrate.messages[0]["content"]
    assert "memory after update 2" in prompt  # old root memory
    assert "memory after update 4" in prompt  # the reread's sub-memory (the reference dropped it)
    assert "Which city holds the vault?" in prompt and "Zurich" in prompt  # sub-q and sub-answer
    # The integrated memory is what the second decision and the final answer see.
    assert "integrated notes" in run.steps[-2].messages[0]["content"]
    assert "integrated notes" in run.steps[-1].messages[0]["content"]
    # The second decision sees the first question and its answer in the history.
    assert "Which city holds the vault?" in run.steps[-2].messages[0]["content"]


async def test_rereading_stops_at_max_reread_without_a_last_decision():
    n, r = 3, 2
    agent, _ = make([f"<subquestion>new question {i}?</subquestion>" for i in range(5)], r)
    run = await agent.run("q", chunks(n))
    assert run.calls == (r + 1) * n + 3 * r + 1  # the worst case of ALGORITHMS.md section 3
    assert kinds(run).count("decide") == r
    assert kinds(run).count("integrate") == r


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("decisions", [["<stop/>"], ["<subquestion>a?</subquestion>", "<stop/>"]])
async def test_call_count_stays_within_the_documented_bounds(n, decisions):
    r = 2
    agent, _ = make(decisions + ["<subquestion>b?</subquestion>"] * 3, r)
    run = await agent.run("q", chunks(n))
    assert n + 2 <= run.calls <= (r + 1) * n + 3 * r + 1


async def test_a_repeated_sub_question_is_never_reread():
    agent, _ = make(["<subquestion>Who?</subquestion>", "<subquestion>who</subquestion>"], 3)
    run = await agent.run("q", chunks(2))
    assert kinds(run).count("integrate") == 1
    second = [c for c in run.steps if c.kind == "decide"][1]
    assert REPEATED_SUBQUESTION in second.flags and second.reread is None
    assert any("repeated" in note for note in run.notes)


async def test_malformed_decision_is_a_recorded_format_error_not_a_silent_stop():
    agent, _ = make(["I am not sure what to do."])
    run = await agent.run("q", chunks(2))
    decide = next(c for c in run.steps if c.kind == "decide")
    assert FORMAT_ERROR in decide.flags
    assert any("format error" in note for note in run.notes)
    assert kinds(run)[-1] == "final"


async def test_max_reread_zero_is_memagent_plus_nothing():
    agent, _ = make([], max_reread=0)
    run = await agent.run("q", chunks(3))
    assert kinds(run) == ["update"] * 3 + ["final"]


@pytest.mark.parametrize(
    ("reply", "sub_question", "flags"),
    [
        ("<stop/>", None, ()),
        ("STOP", None, ()),
        ("Reasoning...\n<STOP />", None, ()),
        ("<subquestion>\n  Who built it?\n</subquestion>", "Who built it?", ()),
        ("<think>stop?</think><subquestion>When?</subquestion>", "When?", ()),
        ("<subquestion>a?</subquestion> <subquestion>b?</subquestion>", "b?", ()),
        ("We should ask:\nWho built it?", "Who built it?", (FORMAT_ERROR,)),
        ("no idea", None, (FORMAT_ERROR,)),
        ("<subquestion>Who?</subquestion>", None, (REPEATED_SUBQUESTION,)),
    ],
)
def test_parse_decision(reply, sub_question, flags):
    decision = parse_decision(reply, asked=["who"])
    assert decision.sub_question == sub_question
    assert decision.flags == flags


@pytest.mark.parametrize("bad", [{"max_reread": -1}, {"decide_tokens": 0}, {"chunk_tokens": 0}])
def test_bad_config_values_are_usage_errors(bad):
    with pytest.raises(UsageError):
        MemRereadConfig(**bad)


async def test_every_call_fits_a_small_window():
    document = " ".join(f"w{i}" for i in range(3000))
    router = Router(["<subquestion>x?</subquestion>", "<subquestion>y?</subquestion>"])
    backend = ScriptedBackend([router] * 200, context_window=4096)
    config = MemRereadConfig(memory_tokens=256, final_tokens=64, decide_tokens=64)
    run = await MemReread(backend, WordTokenizer(), config).run("q", document)
    assert any("shrunk" in note for note in run.notes)
    for messages, params in backend.requests:
        prompt = sum(backend.tokenizer.count(m["content"]) for m in messages)
        assert prompt + params.max_tokens <= 4096


class LongAnswers(Router):
    """Every reread answers with a long box, so the decide prompt's history grows each round."""

    def __init__(self, rounds: int, answer_words: int) -> None:
        super().__init__([f"<subquestion>question {i}?</subquestion>" for i in range(rounds)])
        self.answer = " ".join(f"a{i}" for i in range(answer_words))

    def __call__(self, messages) -> str:
        reply = super().__call__(messages)
        return f"\\boxed{{{self.answer}}}" if reply.endswith("\\boxed{Zurich}") else reply


async def test_the_decide_call_fits_the_window_however_long_its_history_grows():
    window, rounds = 2048, 8
    backend = ScriptedBackend([LongAnswers(rounds, 300)] * 100, context_window=window)
    config = MemRereadConfig(max_reread=rounds, memory_tokens=128, final_tokens=300,
                             decide_tokens=64)  # fmt: skip
    run = await MemReread(backend, WordTokenizer(), config).run("q", chunks(1))
    for messages, params in backend.requests:
        prompt = sum(backend.tokenizer.count(m["content"]) for m in messages)
        assert prompt + params.max_tokens <= window
    decides = [s for s in run.steps if s.kind == "decide"]
    assert len(decides) == rounds
    assert HISTORY_TRIMMED in decides[-1].flags and HISTORY_TRIMMED not in decides[0].flags
    assert any("left out of a decision" in note for note in run.notes)


async def test_a_decide_reply_cut_at_its_cap_is_flagged():
    backend = ScriptedBackend(
        ["memory", "<subquestion>Which city holds", "\\boxed{x}"],
        finish_reasons=["stop", "length", "stop"],
    )
    run = await MemReread(backend, WordTokenizer()).run("q", chunks(1))
    decide = next(s for s in run.steps if s.kind == "decide")
    assert DECISION_TRUNCATED in decide.flags


async def test_an_empty_integration_keeps_the_root_memory():
    def router(messages) -> str:
        content = messages[0]["content"]
        if "Decide whether" in content:
            return "<subquestion>Where?</subquestion>" if "Where?" not in content else "<stop/>"
        if "You reread the whole document" in content:
            return "<think>cut off before any memory"
        return "root memory" if "Section:" in content else "\\boxed{x}"

    backend = ScriptedBackend([router] * 20)
    run = await MemReread(backend, WordTokenizer(), MemRereadConfig(max_reread=1)).run(
        "q", chunks(1)
    )
    integrate = next(s for s in run.steps if s.kind == "integrate")
    assert integrate.memory == "root memory" and MEMORY_KEPT in integrate.flags
    assert "root memory" in run.steps[-1].messages[0]["content"]


def test_a_decision_cut_inside_its_tag_keeps_the_question_without_the_tag():
    decision = parse_decision("<subquestion>Which city holds the vault?", [])
    assert decision.sub_question == "Which city holds the vault?"
    assert FORMAT_ERROR in decision.flags


async def test_a_decision_backend_takes_the_decide_and_integrate_calls_only():
    """``call_backends`` (``--decision-adapter``): the decisions and integrations go to their
    own backend (the model with a decision adapter), the reading passes to the agent's."""
    reader = ScriptedBackend([Router([])] * 100)
    decider = ScriptedBackend([Router(["<subquestion>Which city?</subquestion>", "<stop/>"])] * 9)
    agent = MemReread(
        reader, WordTokenizer(), MemRereadConfig(max_reread=2),
        call_backends={"decide": decider, "integrate": decider},
    )  # fmt: skip
    run = await agent.run("Where is the vault?", chunks(2))
    assert run.answer == "Zurich"
    prompts = [messages[0]["content"] for messages, _ in decider.requests]
    assert len(prompts) == 3  # decide, integrate, decide
    assert all("Section:" not in p for p in prompts)
    read = [messages[0]["content"] for messages, _ in reader.requests]
    assert len(read) == 2 + 2 + 1 + 1  # root, reread, its answer, the final answer
    assert not any("Decide whether the memory is enough" in p for p in read)
