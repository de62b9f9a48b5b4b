"""ReMemR1 control flow and memory recall against a scripted backend (ALGORITHMS.md section 2)."""

import json

import pytest

from longread.agents.memagent import NO_MEMORY
from longread.agents.recall import RecallHit, TfidfHistory
from longread.agents.rememr1 import (
    FORMAT_STOPS,
    NO_RECALL,
    ReMemR1,
    ReMemR1Config,
    parse_step_reply,
    step_grammar,
)
from longread.errors import UsageError
from longread.trace import (
    COPY_REPAIRED,
    FOCUSED_REREAD,
    FORMAT_ERROR,
    FORMAT_STOPPED,
    LOOP_STOPPED,
    MEMORY_TRUNCATED,
    NO_BOXED_ANSWER,
    NOTES_UNGROUNDED,
    NOTES_UNRELATED,
    Run,
)

from .scripted import ScriptedBackend, WordTokenizer
from .test_memagent import chunks


def agent_for(backend: ScriptedBackend, **config) -> ReMemR1:
    return ReMemR1(backend, WordTokenizer(), ReMemR1Config(**config))


def prompts(backend: ScriptedBackend) -> list[str]:
    return [request[0][0]["content"] for request in backend.requests]


def recalled_slot(prompt: str) -> str:
    """The text between the recalled-memory heading and the current-memory heading."""
    after = prompt.split("Recalled earlier memory:\n", 1)[1]
    return after.split("\n\nCurrent memory:", 1)[0].split("\n\nMemory:", 1)[0].strip()


def update(memory: str, recall: str | None = None) -> str:
    reply = f"Thinking about it.\n<update>{memory}</update>"
    return reply + (f"\n<recall>{recall}</recall>" if recall is not None else "")


# --- recall ---------------------------------------------------------------------------------


async def test_recall_brings_back_the_matching_earlier_memory_in_the_next_prompt():
    backend = ScriptedBackend(
        [
            update("The meeting was held in Zurich."),
            update("Bananas were served at lunch."),
            update("The host was Carla.", recall="Zurich"),
            update("Carla met in Zurich."),
            "\\boxed{Zurich}",
        ]
    )
    run = await agent_for(backend).run("Where was the meeting?", chunks("a", "b", "c", "d"))

    sent = prompts(backend)
    assert recalled_slot(sent[3]) == "[step 0] The meeting was held in Zurich."
    assert "Bananas" not in recalled_slot(sent[3])
    step2 = run.steps[2]
    assert step2.recall.query == "Zurich"
    assert step2.recall.step == 0
    assert step2.recall.memory == "[step 0] The meeting was held in Zurich."
    # A step that asks nothing leaves the recalled slot of the next prompt empty.
    assert recalled_slot(sent[1]) == NO_RECALL and recalled_slot(sent[4]) == NO_RECALL


async def test_query_sharing_no_word_with_history_recalls_nothing():
    backend = ScriptedBackend(
        [
            update("The meeting was held in Zurich."),
            update("Bananas at lunch.", recall="spaceship engines"),
            update("same"),
            "\\boxed{x}",
        ]
    )
    run = await agent_for(backend).run("q", chunks("a", "b", "c"))
    step1 = run.steps[1]
    assert step1.recall.query == "spaceship engines"
    assert step1.recall.memory is None and step1.recall.step is None
    assert recalled_slot(prompts(backend)[2]) == NO_RECALL
    assert any("1 recall(s) asked, 0 found" in note for note in run.notes)


async def test_threshold_drops_weak_matches():
    replies = [
        update("zurich alpha beta gamma delta epsilon zeta eta theta"),
        update("other words", recall="zurich lambda mu nu xi omicron"),
        "\\boxed{x}",
    ]
    weak = await agent_for(ScriptedBackend(replies)).run("q", chunks("a", "b"))
    assert weak.steps[1].recall.step == 0  # default threshold: a weak match counts
    strict = await agent_for(ScriptedBackend(replies), recall_threshold=0.9).run(
        "q", chunks("a", "b")
    )
    assert strict.steps[1].recall.memory is None


async def test_retrieval_happens_before_the_step_adds_its_own_memory():
    backend = ScriptedBackend(
        [
            update("Bananas were served."),
            update("Kangaroos live in Australia.", recall="kangaroos australia"),
            "\\boxed{x}",
        ]
    )
    run = await agent_for(backend).run("q", chunks("a", "b"))
    assert run.steps[1].recall.memory is None  # not itself, though it matches best


async def test_first_step_recall_finds_nothing_because_the_placeholder_is_not_history():
    backend = ScriptedBackend(
        [update("notes", recall="previous memory"), update("notes 2"), "\\boxed{x}"]
    )
    run = await agent_for(backend).run("q", chunks("a", "b"))
    assert run.steps[0].recall.query == "previous memory"
    assert run.steps[0].recall.memory is None


async def test_top_k_returns_memories_in_score_order():
    backend = ScriptedBackend(
        [
            update("Zurich is a city."),
            update("Zurich lake Zurich bank Zurich trams."),
            update("Bananas only."),
            update("Carla.", recall="Zurich lake trams"),
            update("end"),
            "\\boxed{x}",
        ]
    )
    run = await agent_for(backend, recall_top_k=2).run("q", chunks("a", "b", "c", "d", "e"))
    recalled = run.steps[3].recall.memory
    assert (
        recalled == "[step 1] Zurich lake Zurich bank Zurich trams.\n\n[step 0] Zurich is a city."
    )
    assert run.steps[3].recall.step == 1
    assert recalled in prompts(backend)[4]


# --- what is carried forward -----------------------------------------------------------------


async def test_only_the_update_body_is_carried_forward():
    backend = ScriptedBackend(
        [
            "My secret reasoning here. <update>Ann wrote it.</update> More musing after.",
            "<think>hidden</think>Reasons again.<update>Ann wrote it in 1900.</update>",
            "\\boxed{Ann}",
        ]
    )
    run = await agent_for(backend).run("Who wrote it?", chunks("a", "b"))
    sent = prompts(backend)
    assert "Ann wrote it." in sent[1]
    for text in ("secret reasoning", "More musing", "Reasons again", "hidden"):
        assert text not in sent[1] and text not in sent[2]
    assert [c.memory for c in run.steps[:2]] == ["Ann wrote it.", "Ann wrote it in 1900."]
    assert not any(c.flags for c in run.steps)


async def test_missing_update_keeps_previous_memory_and_flags_format_error():
    backend = ScriptedBackend(
        [update("Ann wrote it."), "I forgot the tags, the answer is Bob.", "\\boxed{Ann}"]
    )
    run = await agent_for(backend).run("q", chunks("a", "b"))
    assert run.steps[1].memory == "Ann wrote it."
    assert FORMAT_ERROR in run.steps[1].flags
    assert "Ann wrote it." in prompts(backend)[2] and "Bob" not in prompts(backend)[2]
    assert any("broke the <update>/<recall> format" in note for note in run.notes)


async def test_first_step_without_update_keeps_the_placeholder():
    backend = ScriptedBackend(["no tags", "\\boxed{x}"])
    run = await agent_for(backend).run("q", chunks("a"))
    assert run.steps[0].memory == NO_MEMORY
    assert FORMAT_ERROR in run.steps[0].flags


async def test_unclosed_update_is_a_format_error_and_keeps_previous_memory():
    backend = ScriptedBackend(
        [update("Ann wrote it."), "<update>Bob wrote it, cut mid-", "\\boxed{x}"],
        finish_reasons=["stop", "length", "stop"],
    )
    run = await agent_for(backend).run("q", chunks("a", "b"))
    step = run.steps[1]
    assert step.memory == "Ann wrote it."
    assert FORMAT_ERROR in step.flags and MEMORY_TRUNCATED in step.flags


async def test_two_updates_use_the_last_and_flag():
    backend = ScriptedBackend(["<update>first</update> then <update>second</update>", "\\boxed{x}"])
    run = await agent_for(backend).run("q", chunks("a"))
    assert run.steps[0].memory == "second"
    assert FORMAT_ERROR in run.steps[0].flags


# What a backend that keeps the stop string returns for a reply that went on past its format:
# a closed <update>, a closed <recall>, then another <update> opening.
RAN_ON = "<update>Ann wrote it.</update>\n<recall>Ann</recall>\n<update>"


async def test_format_stop_cuts_a_reply_where_its_format_was_complete():
    backend = ScriptedBackend([RAN_ON, "\\boxed{Ann}"])
    run = await agent_for(backend, format_stop=True).run("Who wrote it?", chunks("a"))
    step = run.steps[0]
    assert step.memory == "Ann wrote it." and step.recall.query == "Ann"
    assert FORMAT_STOPPED in step.flags and FORMAT_ERROR not in step.flags
    (_, sent), (_, final) = backend.requests
    assert sent.include_stop and "</recall>\n<update>" in sent.stop and sent.stop == FORMAT_STOPS
    assert not final.stop  # the answer is not a step reply


async def test_without_format_stop_a_reply_is_read_whole_as_the_paper_does():
    backend = ScriptedBackend([RAN_ON, "\\boxed{Ann}"])
    run = await agent_for(backend).run("Who wrote it?", chunks("a"))
    assert FORMAT_ERROR in run.steps[0].flags and FORMAT_STOPPED not in run.steps[0].flags
    (_, sent), _ = backend.requests
    assert not sent.stop and not sent.include_stop


async def test_format_stop_leaves_a_reply_that_ended_by_itself_alone():
    backend = ScriptedBackend(["<update>Ann wrote it.</update>", "\\boxed{Ann}"])
    run = await agent_for(backend, format_stop=True).run("Who wrote it?", chunks("a"))
    assert run.steps[0].memory == "Ann wrote it." and not run.steps[0].flags


# What a backend with loop stops returns for a reply that fell into a loop inside its block.
LOOPED = "<update>The locker" + "_finally" * 22


async def test_loop_stop_asks_for_it_and_flags_a_reply_it_ended():
    backend = ScriptedBackend(
        [update("Ann wrote it."), LOOPED, "\\boxed{Ann}"], finish_reasons=["stop", "loop"]
    )
    run = await agent_for(backend, loop_stop=True).run("Who wrote it?", chunks("a", "b"))
    first, looped = run.steps[:2]
    assert LOOP_STOPPED not in first.flags
    # the unclosed block is malformed, as at the cap: the memory stays
    assert LOOP_STOPPED in looped.flags and FORMAT_ERROR in looped.flags
    assert looped.memory == "Ann wrote it."
    (_, step_params), _, (_, final_params) = backend.requests
    assert step_params.loop_stop and not final_params.loop_stop  # step replies only


async def test_without_loop_stop_no_call_asks_for_it():
    backend = ScriptedBackend([update("Ann wrote it."), "\\boxed{Ann}"])
    await agent_for(backend).run("Who wrote it?", chunks("a"))
    assert not any(params.loop_stop for _, params in backend.requests)


async def test_format_grammar_is_asked_for_step_replies_only():
    backend = ScriptedBackend([update("Ann wrote it."), "\\boxed{Ann}"])
    config = {"format_grammar": True, "format_stop": True}
    run = await agent_for(backend, **config).run("Who wrote it?", chunks("a"))
    assert run.steps[0].memory == "Ann wrote it."
    (_, step_params), (_, final_params) = backend.requests
    # with format stops, the grammar that lets the stop's second <update> open
    assert step_params.grammar == step_grammar(format_stop=True)
    assert final_params.grammar is None  # the answer is not a step reply


async def test_without_format_grammar_no_call_is_constrained():
    backend = ScriptedBackend([update("Ann wrote it."), "\\boxed{Ann}"])
    await agent_for(backend, format_stop=True).run("Who wrote it?", chunks("a"))
    assert all(params.grammar is None for _, params in backend.requests)


async def test_tags_in_other_case_and_spanning_lines_are_read():
    reply = "reason\n<UPDATE>\nline one\nline two\n</Update>\n<Recall>\nZurich\n</RECALL>"
    backend = ScriptedBackend([update("Zurich notes"), reply, "\\boxed{x}"])
    run = await agent_for(backend).run("q", chunks("a", "b"))
    step = run.steps[1]
    assert step.memory == "line one\nline two"
    assert step.recall.query == "Zurich" and step.recall.step == 0
    assert not step.flags


def test_parse_step_reply_edge_cases():
    assert parse_step_reply("<update>  </update>").update is None
    assert "empty <update>" in parse_step_reply("<update></update>").problems
    nested = parse_step_reply("<update>keep <recall>q</recall> this</update>")
    assert nested.update == "keep  this" and nested.recall == "q" and nested.well_formed
    assert parse_step_reply("<update>a</update><recall>b").problems == ("unclosed <recall>",)
    both = parse_step_reply("<update>a</update><recall>x</recall><recall>y</recall>")
    assert both.recall == "y" and not both.well_formed
    empty_recall = parse_step_reply("<update>a</update><recall> </recall>")
    assert empty_recall.recall is None and empty_recall.well_formed
    assert parse_step_reply("< update >a</ update >").update == "a"


# --- the run ----------------------------------------------------------------------------------


async def test_n_chunks_make_n_plus_one_calls_and_final_sees_recall():
    backend = ScriptedBackend(
        [
            update("The code is 4417."),
            update("Unrelated notes."),
            update("Still unrelated.", recall="code"),
            "The answer is \\boxed{4417}.",
        ]
    )
    run = await agent_for(backend).run("What is the code?", chunks("a", "b", "c"))
    assert run.calls == 4
    assert [c.kind for c in run.steps] == ["update"] * 3 + ["final"]
    final_prompt = prompts(backend)[3]
    assert recalled_slot(final_prompt) == "[step 0] The code is 4417."
    assert "Still unrelated." in final_prompt and "What is the code?" in final_prompt
    assert run.answer == "4417" and run.boxed and run.agent == "rememr1"
    assert run.config["recall_top_k"] == 1 and run.config["chunk_tokens_used"] == 5000


async def test_step_prompt_orders_problem_recalled_memory_section():
    backend = ScriptedBackend(
        [update("Zurich memo"), update("m", recall="Zurich"), update("m2"), "\\boxed{x}"]
    )
    await agent_for(backend).run("Who wrote it?", chunks("S1", "S2", "The section text."))
    prompt = prompts(backend)[2]
    order = ["Who wrote it?", "[step 0] Zurich memo", "Current memory:\nm", "The section text."]
    positions = [prompt.index(s) for s in order]
    assert positions == sorted(positions)


async def test_answer_without_box_is_the_whole_reply_and_flagged():
    backend = ScriptedBackend([update("m"), "Paris, I think"])
    run = await agent_for(backend).run("q", chunks("c"))
    assert run.answer == "Paris, I think" and not run.boxed
    assert NO_BOXED_ANSWER in run.steps[-1].flags


async def test_sampling_settings_and_budgets_are_sent():
    backend = ScriptedBackend([update("m"), "\\boxed{x}"])
    config = {"memory_tokens": 300, "final_tokens": 50, "temperature": 0.7, "top_p": 0.95}
    await agent_for(backend, seed=3, **config).run("q", chunks("c"))
    (_, step), (_, final) = backend.requests
    assert (step.max_tokens, final.max_tokens) == (300, 50)
    assert (step.temperature, step.top_p, step.seed) == (0.7, 0.95, 3)


async def test_small_window_shrinks_chunks_and_every_call_fits():
    window, cap = 2048, 128
    settings = {"memory_tokens": cap, "final_tokens": 64, "recall_top_k": 2}
    plan = agent_for(ScriptedBackend([], context_window=window), **settings).plan("q")
    assert plan.shrunk and plan.chunk_tokens < 5000
    document = " ".join(f"w{i}" for i in range(5000))
    n = -(-5000 // plan.chunk_tokens)
    # Replies as long as the cap allows (20 tokens of thought, tags and query), each recalling
    # the two first memories, so the recalled slot is as full as top-k 2 makes it.
    replies = [update(" ".join([f"w{i}"] * (cap - 20)), recall="w0 w1") for i in range(n)]
    backend = ScriptedBackend([*replies, "\\boxed{x}"], context_window=window)
    run = await agent_for(backend, **settings).run("q", document)
    assert run.calls == n + 1
    assert any("shrunk" in note for note in run.notes)
    # A full chunk went out with two cap-sized recalled memories next to the memory.
    full = prompts(backend)[3]
    assert "[step 0] w0" in full and "[step 1] w1" in full and len(run.steps) > 4
    for messages, params in backend.requests:
        prompt = sum(backend.tokenizer.count(m["content"]) for m in messages)
        assert prompt + params.max_tokens <= window
    assert all(c.completion_tokens == cap for c in run.steps[:-1])


@pytest.mark.parametrize(
    "bad",
    [
        {"chunk_tokens": 0},
        {"memory_tokens": -1},
        {"final_tokens": 0},
        {"recall_top_k": 0},
        {"recall_threshold": -0.1},
        {"recall_threshold": 1.5},
        {"temperature": 3.0},
        {"top_p": 0.0},
    ],
)
def test_bad_config_values_are_usage_errors(bad):
    with pytest.raises(UsageError):
        ReMemR1Config(**bad)


async def test_empty_question_is_a_usage_error():
    with pytest.raises(UsageError, match="question"):
        await agent_for(ScriptedBackend([])).run("  ", chunks("a"))


async def test_trace_round_trips_through_json(tmp_path):
    backend = ScriptedBackend([update("Zurich"), update("m", recall="Zurich"), "\\boxed{ok}"])
    run = await agent_for(backend).run("q", chunks("a", "b"))
    path = tmp_path / "trace.json"
    run.save(path)
    loaded = Run.from_dict(json.loads(path.read_text()))
    assert loaded.steps[1].recall.query == "Zurich"
    assert loaded.steps[1].recall.step == 0
    assert loaded.answer == "ok"


async def test_a_custom_history_can_be_plugged_in():
    class Everything(TfidfHistory):
        def search(self, query, top_k=1, threshold=0.1):
            return [RecallHit(step, memory, 1.0) for step, memory in self.entries][:top_k]

    backend = ScriptedBackend([update("alpha"), update("m", recall="zzz"), "\\boxed{x}"])
    agent = ReMemR1(backend, WordTokenizer(), new_history=Everything)
    run = await agent.run("q", chunks("a", "b"))
    assert run.steps[1].recall.memory == "[step 0] alpha"


# --- the TF-IDF history ------------------------------------------------------------------------


def history_of(*memories: str) -> TfidfHistory:
    history = TfidfHistory()
    for step, memory in enumerate(memories):
        history.add(step, memory)
    return history


def test_empty_history_and_empty_query_give_no_hit():
    assert TfidfHistory().search("anything") == []
    assert history_of("some memory").search("   ") == []


def test_history_without_any_word_gives_no_hit():
    assert history_of("!!", "? .").search("!!") == []  # empty vocabulary, no crash


def test_identical_query_scores_one():
    [hit] = history_of("the red fox", "a blue whale").search("a blue whale")
    assert hit.step == 1 and hit.memory == "a blue whale"
    assert hit.score == pytest.approx(1.0)


def test_threshold_and_zero_scores():
    history = history_of("red fox jumps over the lazy dog today", "blue whale")
    assert history.search("red", threshold=0.0)[0].step == 0
    assert history.search("red", threshold=0.99) == []
    assert history.search("green", threshold=0.0) == []  # no shared word never counts


def test_hits_are_ordered_by_score_then_earlier_step():
    history = history_of("cat dog", "cat", "dog cat", "bird")
    hits = history.search("cat", top_k=3, threshold=0.0)
    assert [hit.step for hit in hits] == [1, 0, 2]
    assert hits[0].score > hits[1].score == pytest.approx(hits[2].score)


def test_duplicates_are_stored_once_under_their_first_step():
    history = TfidfHistory()
    assert history.add(0, "same notes")
    assert not history.add(3, "same notes")
    assert history.entries == [(0, "same notes")] and len(history) == 1


def test_steps_must_increase():
    history = history_of("a memory")
    with pytest.raises(ValueError):
        history.add(0, "another memory")
    with pytest.raises(ValueError):
        history.search("memory", top_k=0)


# --- longread's memory options, as memagent reads with them -----------------------------------

NEEDLE_SECTIONS = ["Ann wrote it.", "The code is 4412.", "Filler.", "More filler."]


def current_memory(prompt: str) -> str:
    return prompt.split("Current memory:\n", 1)[1].split("\n\n", 1)[0]


def made_up_then_kept(made_up: str):
    """A model that writes ``made_up`` over an empty memory before the evidence, copies the
    code when its memory is empty at the code's section, and otherwise keeps its memory:
    sft28q's two misses at niah_single_2 16K."""

    def reply(messages) -> str:
        prompt = messages[-1]["content"]
        if "Section:" not in prompt:  # the final call: memory and recalled memory only
            return "\\boxed{4412}" if "4412" in prompt else "\\boxed{none}"
        memory = current_memory(prompt)
        if memory == NO_MEMORY:
            return update("The code is 4412." if "4412" in prompt else made_up)
        return update(memory, recall="code")

    return reply


async def test_grounded_notes_cut_a_made_up_note_so_the_needle_gets_in_and_it_is_never_recalled():
    made_up = "A code mentioned in the provided text is no previous memory."
    question = "What is the code?"
    backend = ScriptedBackend([made_up_then_kept(made_up)] * 5)
    run = await agent_for(backend, grounded_notes=True).run(question, chunks(*NEEDLE_SECTIONS))
    assert NOTES_UNGROUNDED in run.steps[0].flags and run.steps[0].memory == NO_MEMORY
    assert run.steps[1].memory == "The code is 4412." and run.answer == "4412"
    # the cut note is not in the history: the later recalls bring back the needle only
    assert all("no previous memory" not in (s.recall.memory or "") for s in run.steps[2:-1])
    assert run.steps[2].recall.memory == "[step 1] The code is 4412."
    # the paper's memory keeps the made-up note to the end
    run = await agent_for(ScriptedBackend([made_up_then_kept(made_up)] * 5)).run(
        question, chunks(*NEEDLE_SECTIONS)
    )
    assert run.steps[-2].memory == made_up and run.answer == "none"


async def test_focused_notes_clear_copied_filler_before_the_needle():
    question = "What is the code?"
    backend = ScriptedBackend([made_up_then_kept("Ann wrote it.")] * 5)
    run = await agent_for(backend, focused_notes=True).run(question, chunks(*NEEDLE_SECTIONS))
    assert NOTES_UNRELATED in run.steps[0].flags and run.answer == "4412"
    plain = await agent_for(ScriptedBackend([made_up_then_kept("Ann wrote it.")] * 5)).run(
        question, chunks(*NEEDLE_SECTIONS)
    )
    assert plain.answer == "none"


async def test_exact_copies_repair_a_miscopied_value_in_notes_and_answer():
    question = "What is the code?"
    sections = ["The code is 44120917.", "Filler."]
    backend = ScriptedBackend(
        [update("The code is 4412917."), update("The code is 4412917."), "\\boxed{4412917}"]
    )
    run = await agent_for(backend, exact_copies=True).run(question, chunks(*sections))
    assert COPY_REPAIRED in run.steps[0].flags
    assert run.steps[0].memory == "The code is 44120917." and run.answer == "44120917"


def test_the_memory_options_are_rememr1_flags():
    from longread.agents import make_config

    config = make_config("rememr1", grounded_notes=True, focused_notes=True, exact_copies=True)
    assert (config.grounded_notes, config.focused_notes, config.exact_copies) == (True,) * 3
    assert not ReMemR1Config().grounded_notes  # the paper's memory by default
    assert make_config("rememr1", focused_reread=True).focused_reread
    assert not ReMemR1Config().focused_reread


def section(prompt: str) -> str:
    return prompt.split("Section:\n", 1)[1].split("\n\n", 1)[0]


GLUED = "The fox ran past the hedge and an owl The code for amber is 4412."


def misses_the_glued_needle(messages) -> str:
    """A model that calls a section empty unless shown the needle's sentence alone, and
    recalls "amber" at every step: sft28q's miss at niah_single_2 16K (sample 3)."""
    prompt = messages[-1]["content"]
    if "Section:" not in prompt:
        return "\\boxed{4412}" if "4412" in prompt else "\\boxed{none}"
    memory = current_memory(prompt)
    if section(prompt) == GLUED:
        return update("The code for amber is 4412.", recall="owl")
    return update(memory, recall="amber")


async def test_focused_reread_shows_the_glued_needle_alone_and_its_note_is_carried_and_stored():
    question = "What is the code for amber?"
    sections = ["Filler about a dog.", f"Rain fell on the roof. {GLUED}", "More filler."]
    backend = ScriptedBackend([misses_the_glued_needle] * 6)
    run = await agent_for(backend, focused_reread=True).run(question, chunks(*sections))
    reread = run.steps[2]
    assert FOCUSED_REREAD in reread.flags and section(prompts(backend)[2]) == GLUED
    assert run.steps[1].memory == NO_MEMORY  # the step itself missed it
    assert reread.memory == "The code for amber is 4412." and run.answer == "4412"
    # the step's own <recall> stands, the reread's is not searched; the note is stored
    assert run.steps[1].recall.query == "amber" and reread.recall is None
    assert run.steps[3].recall.memory == "[step 1] The code for amber is 4412."
    # the paper's step reads each section once and misses it
    plain = await agent_for(ScriptedBackend([misses_the_glued_needle] * 4)).run(
        question, chunks(*sections)
    )
    assert len(plain.steps) == 4 and plain.answer == "none"
