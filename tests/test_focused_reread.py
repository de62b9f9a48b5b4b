"""Focused rereads (``--focused-reread on``): a section whose update wrote nothing about the
question is shown again as its sentences about the question, and notes about the question are
not lost to an update that wrote none. The scripted replies are stage grpo26b's own, from its
misses on the held-out ledger wording in Python's reference prose
(results/v2/runs/memagent-grpo26b-run-step6-unseen-ledger-8192-notes+focused)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from longread.agents.memagent import EARLIER_REREAD_RULES, NO_MEMORY, MemAgent, MemAgentConfig
from longread.citations.focus import (
    Restating,
    asks,
    focus_sentences,
    lost_notes,
    notes_about,
    restates,
)
from longread.llm.base import Message
from longread.text.chunking import Chunk
from longread.trace import (
    FOCUS_QUOTED,
    FOCUSED_REREAD,
    NOTES_RESTORED,
    NOTES_UNGROUNDED,
    NOTES_UNRELATED,
)

from .scripted import ScriptedBackend, WordTokenizer

QUESTION = "What does tired-beacon's shelf number read in the ledger?"
NEEDLE = "tired-beacon's shelf number, which nobody else may know, reads 4243307 in the ledger."
PROSE = "The binary arithmetic operations have the conventional priority levels."
DECOY = "Evaluating a literal yields an object of the given type (integer, floating point number)."
SECTION = f"{PROSE} {DECOY} {NEEDLE} Note that the unary operators bind tighter."


def test_the_sentence_sharing_most_of_the_question_is_picked_whatever_its_case():
    # the needle opens with its lower-case key, and the decoy shares one term ("number")
    assert focus_sentences(SECTION, QUESTION) == [NEEDLE]
    # one shared term is not enough: prose about numbers is not the needle
    assert focus_sentences(f"{PROSE} {DECOY}", QUESTION) == []
    assert focus_sentences("", QUESTION) == []


def test_a_sentence_answering_one_part_of_a_long_question_is_not_shown():
    """A multi-hop question's distractors share a few of its terms: on HotpotQA (stop 53's
    rereads) such a sentence was shown, noted and kept, and questions were lost. A needle
    restates its question, so it holds most of the terms."""
    question = (
        "Substorm was described in qualitative terms by a scientist nominated for what seven times?"
    )
    distractor = "It has been awarded to citizens of the Netherlands seven times."
    assert focus_sentences(distractor, question) == []  # 2 of 8 terms
    assert focus_sentences(distractor, question, least_share=0) == [distractor]  # stop 53's rule
    assert focus_sentences(SECTION, QUESTION) == [NEEDLE]  # 5 of 6


def test_notes_about_the_question_share_one_of_its_terms():
    assert restates(NEEDLE, Restating(QUESTION)) and not restates(DECOY, Restating(QUESTION))
    assert lost_notes(
        NEEDLE, DECOY, Restating(QUESTION)
    )  # the needle given up for a note on "number"
    assert not lost_notes(NEEDLE, DECOY, Restating(QUESTION, least_share=0))  # stop 53's rule
    assert not lost_notes(
        NEEDLE, f"{NEEDLE}\n{DECOY}", Restating(QUESTION)
    )  # the needle still there
    # a note sharing one term is not kept (filler sharing a key's word would be), as it was
    assert not lost_notes(DECOY, PROSE, Restating(QUESTION)) and lost_notes(
        DECOY, PROSE, Restating(QUESTION, least_share=0)
    )
    assert notes_about(NEEDLE, QUESTION)
    assert not notes_about(PROSE, QUESTION)
    assert not notes_about(NO_MEMORY, QUESTION)
    assert not notes_about("", QUESTION)


def update_parts(prompt: str) -> tuple[str, str]:
    """The section and the memory an update prompt (the papers' order) shows."""
    section = prompt.split("Section:\n", 1)[1].split("\n\nUpdate the memory", 1)[0]
    return section, prompt.split("Memory:\n", 1)[1].split("\n\nSection:", 1)[0]


def scripted_reader(
    value: str, made_up: str, update: Callable[[str, str], str], calls: int
) -> ScriptedBackend:
    """A reader whose updates ``update(section, memory)`` writes and whose final answer is
    ``value`` when the memory holds it, ``made_up`` otherwise (as a small model answers)."""

    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            return f"\\boxed{{{value if value in prompt else made_up}}}"
        return update(*update_parts(prompt))

    return ScriptedBackend([reply] * calls)


def reading(at_needle: str) -> ScriptedBackend:
    """A reader that copies prose at the needle's section, copies the needle when shown only
    the needle, keeps its memory elsewhere, and answers from the memory."""

    def update(section: str, memory: str) -> str:
        if section.strip() == NEEDLE:
            return NEEDLE
        return at_needle if "tired-beacon" in section else memory

    return scripted_reader("4243307", "1", update, 10)


def needle_then(prose: str) -> ScriptedBackend:
    """A reader that notes the needle where its section has it and copies ``prose`` over its
    notes everywhere else, and answers from the memory."""
    return scripted_reader(
        "4243307", "0", lambda section, _: NEEDLE if "tired-beacon" in section else prose, 6
    )


def chunks_of(*sections: str) -> list[Chunk]:
    tok = WordTokenizer()
    return [Chunk(i, text, tok.count(text)) for i, text in enumerate(sections)]


async def test_a_section_whose_notes_copied_prose_is_reread_as_its_needle():
    chunks = chunks_of("Filler about kettles.", SECTION, "Last filler.")
    config = MemAgentConfig(focused_notes=True)
    plain = await MemAgent(reading(PROSE), WordTokenizer(), config).run(QUESTION, chunks)
    assert plain.answer == "1"  # the papers' memory (with focused notes): the needle lost
    assert NOTES_UNRELATED in plain.steps[1].flags
    config = MemAgentConfig(focused_notes=True, focused_reread=True)
    backend = reading(PROSE)
    run = await MemAgent(backend, WordTokenizer(), config).run(QUESTION, chunks)
    assert run.answer == "4243307"
    reread = [s for s in run.steps if FOCUSED_REREAD in s.flags]
    assert len(reread) == 1 and reread[0].chunk_index == 1 and reread[0].memory == NEEDLE
    # the reread's prompt shows the needle alone, and its note is traced to the section
    shown = reread[0].messages[-1]["content"].split("Section:\n", 1)[1]
    assert shown.startswith(NEEDLE) and PROSE not in shown
    span = reread[0].sources[0]
    assert span.chunk == 1 and span.quote == NEEDLE and SECTION.index(NEEDLE) == span.in_chunk
    # one call more than the plain reading: the reread, only where the notes missed
    assert len(backend.requests) == len(plain.steps) + 1
    assert any("reread with only their sentences about it" in note for note in run.notes)


async def test_no_reread_where_the_notes_are_about_the_question_or_no_sentence_is():
    backend = reading(NEEDLE)  # the update takes the needle in itself
    config = MemAgentConfig(focused_notes=True, focused_reread=True)
    chunks = chunks_of("Filler about kettles.", SECTION, f"{PROSE} {DECOY}")
    run = await MemAgent(backend, WordTokenizer(), config).run(QUESTION, chunks)
    assert run.answer == "4243307"
    assert not any(FOCUSED_REREAD in s.flags for s in run.steps)
    assert len(backend.requests) == 4  # three updates and the answer


async def test_notes_about_the_question_are_kept_when_a_later_update_copies_prose_over_them():
    """grpo26b's ledger sample 8: the needle in the notes for six sections, then prose copied
    over it at the seventh, which focused notes cleared; the answer was lost."""

    chunks = chunks_of(NEEDLE, "Filler about kettles.", f"{PROSE} {DECOY}")
    for focused_notes in (True, False):
        config = MemAgentConfig(focused_notes=focused_notes)
        lost = await MemAgent(needle_then(PROSE), WordTokenizer(), config).run(QUESTION, chunks)
        assert lost.answer == "0"
        config = MemAgentConfig(focused_notes=focused_notes, focused_reread=True)
        run = await MemAgent(needle_then(PROSE), WordTokenizer(), config).run(QUESTION, chunks)
        assert run.answer == "4243307"
        assert [NOTES_RESTORED in s.flags for s in run.steps[:3]] == [False, True, True]
        assert all(s.memory == NEEDLE for s in run.steps[:3])


async def test_a_noted_needle_is_kept_against_prose_that_shares_one_generic_term():
    """grpo26b's ledger sample 18, archive 2 and 18, harbour 8 and 10 (stop 53's rereads): the
    needle noted, then a prose sentence that shares "number" with the question copied over it.
    Such a note is about the question, so stop 53's rule kept the prose and lost the answer."""
    generic = 'The rule "strings" and the token "NUMBER" are defined in the standard grammar.'

    chunks = chunks_of(NEEDLE, f"{generic} {PROSE}")
    assert notes_about(generic, QUESTION)  # one shared term: a note about the question
    stop53 = MemAgentConfig(focused_reread=True, reread_least_share=0, keep_notes_share=0)
    lost = await MemAgent(needle_then(generic), WordTokenizer(), stop53).run(QUESTION, chunks)
    assert lost.answer == "0"
    config = MemAgentConfig(focused_reread=True)
    backend = needle_then(generic)
    run = await MemAgent(backend, WordTokenizer(), config).run(QUESTION, chunks)
    assert run.answer == "4243307" and run.steps[1].memory == NEEDLE
    assert NOTES_RESTORED in run.steps[1].flags
    assert len(backend.requests) == 3  # no reread: no sentence of the prose restates the question


async def test_the_exit_probe_after_a_reread_judges_the_reread_notes():
    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "Section:" not in prompt:  # the probe or the answer
            if "\\boxed" in prompt:
                return "\\boxed{4243307}" if "4243307" in prompt else "\\boxed{1}"
            return "yes" if "4243307" in prompt else "no"
        section = prompt.split("Section:\n", 1)[1].split("\n\nUpdate the memory", 1)[0]
        return NEEDLE if section.strip() == NEEDLE else PROSE

    chunks = chunks_of(SECTION, "Last filler.")
    config = MemAgentConfig(focused_reread=True, exit_probe=True)
    run = await MemAgent(ScriptedBackend([reply] * 6), WordTokenizer(), config).run(
        QUESTION, chunks
    )
    kinds = [(s.kind, s.step) for s in run.steps]
    # the update, its reread, the probe on the reread's notes (yes: reading stops), the answer
    assert kinds == [("update", 0), ("update", 1), ("probe", 2), ("final", 3)]
    assert NEEDLE in run.steps[2].messages[-1]["content"] and run.answer == "4243307"


# grpo26b's misses on the held-out locker wording (stop 54,
# results/v2/runs/memagent-grpo26b-run-step6-unseen-locker-8192-notes+focused+exact+reread).
LOCKER_QUESTION = "To what number must the dial be turned to open lonely-flame's locker?"
LOCKER_NEEDLE = "Whoever wants to open lonely-flame's locker must turn the dial to 4331324."
REWORDED = "To turn the dial to 4331324, you must turn it to 4331324."  # sample 0's reread
MUST_PROSE = (  # sample 2's notes at the needle's section: "must" is one of the question's terms
    "The primary must evaluate to an object of a type that supports attribute references."
)


def locker_reading(at_needle: str, shown_needle: str) -> ScriptedBackend:
    """A reader that writes ``at_needle`` at the needle's section and ``shown_needle`` when
    shown the needle alone, copies prose over its notes at the last section (as sample 0
    did four sections after its reread), keeps its memory elsewhere, and answers from the
    memory."""

    def update(section: str, memory: str) -> str:
        if section.strip() == LOCKER_NEEDLE:
            return shown_needle
        if "Last filler" in section:
            return PROSE
        return at_needle if "lonely-flame" in section else memory

    return scripted_reader("4331324", "10", update, 8)


LOCKER_SECTION = f"{PROSE} {MUST_PROSE} {LOCKER_NEEDLE} {DECOY}"
STOP54 = EARLIER_REREAD_RULES["stop54"]
STOP55 = EARLIER_REREAD_RULES["stop55"]
SHIPPED_NOTES = {"grounded_notes": True, "focused_notes": True, "exact_copies": True}


async def run_locker(backend: ScriptedBackend, **settings: object):  # type: ignore[no-untyped-def]
    chunks = chunks_of("Filler about kettles.", LOCKER_SECTION, "Last filler.")
    config = MemAgentConfig(focused_reread=True, **SHIPPED_NOTES, **settings)  # type: ignore[arg-type]
    return await MemAgent(backend, WordTokenizer(), config).run(LOCKER_QUESTION, chunks)


async def test_a_reread_note_rewording_the_needle_it_was_shown_is_not_cut_as_made_up():
    """Locker samples 0, 1, 12, 14-17, 19 (9 of 12 misses): the reread rewords the needle too
    far for the fuzzy alignment, grounded notes cut it, and the answer is a guess. Traced to
    the needle, it is kept as a note restating the question when prose is copied over it
    later (the note alone shares 2 of the question's 8 terms)."""
    assert not restates(REWORDED, Restating(LOCKER_QUESTION))
    lost = await run_locker(locker_reading(PROSE, REWORDED), **STOP54)
    assert lost.answer == "10" and NOTES_UNGROUNDED in lost.steps[2].flags
    run = await run_locker(locker_reading(PROSE, REWORDED))
    assert run.answer == "4331324"
    reread = next(s for s in run.steps if FOCUSED_REREAD in s.flags)
    assert reread.memory == REWORDED and NOTES_UNGROUNDED not in reread.flags
    last = run.steps[-2]
    assert last.chunk_index == 2 and NOTES_RESTORED in last.flags and last.memory == REWORDED
    # the note is cited to the needle it rewords, where the needle stands in the section
    [span] = reread.sources
    assert span.quote == LOCKER_NEEDLE and span.chunk == 1
    assert span.in_chunk == LOCKER_SECTION.index(LOCKER_NEEDLE)
    # a value the shown sentence does not hold is still cut: it was made up (stop 55's rule
    # then answers a guess; the shipped one quotes the needle in its place)
    made_up_reply = REWORDED.replace("4331324", "1000")
    made_up = await run_locker(locker_reading(PROSE, made_up_reply), **STOP55)
    assert made_up.answer == "10"
    assert NOTES_UNGROUNDED in next(s for s in made_up.steps if FOCUSED_REREAD in s.flags).flags
    quoted = await run_locker(locker_reading(PROSE, made_up_reply))
    reread = next(s for s in quoted.steps if FOCUSED_REREAD in s.flags)
    assert NOTES_UNGROUNDED in reread.flags and FOCUS_QUOTED in reread.flags
    assert reread.memory == LOCKER_NEEDLE and quoted.answer == "4331324"


async def test_prose_sharing_one_word_of_the_question_does_not_stop_a_reread():
    """Locker samples 2, 4, 11: prose sharing "must" with the question is noted at the
    needle's section; it is about the question by one term, so stop 54's rule reread
    nothing."""
    assert notes_about(MUST_PROSE, LOCKER_QUESTION)
    assert not restates(MUST_PROSE, Restating(LOCKER_QUESTION))
    lost = await run_locker(locker_reading(MUST_PROSE, LOCKER_NEEDLE), **STOP54)
    assert lost.answer == "10" and not any(FOCUSED_REREAD in s.flags for s in lost.steps)
    backend = locker_reading(MUST_PROSE, LOCKER_NEEDLE)
    run = await run_locker(backend)
    assert run.answer == "4331324"
    assert [s.chunk_index for s in run.steps if FOCUSED_REREAD in s.flags] == [1]
    # no reread at the filler sections: no sentence there restates the question
    assert len(backend.requests) == 3 + 1 + 1  # three updates, the reread, the answer


# grpo26b's misses on the held-out greenhouse wording (stop 55,
# results/v2/runs/memagent-grpo26b-run-step6-unseen-greenhouse-8192-notes+focused+exact+reread):
# shown the needle alone, the reread wrote the question back (samples 6, 13, 15), the value
# alone (2, 8: too short to be a note) or the copied filler of the memory it was shown (1, 14).
GREENHOUSE_QUESTION = (
    "At what number does the thermostat stay when stormy-wheel tends the greenhouse?"
)
GREENHOUSE_NEEDLE = "When stormy-wheel tends the greenhouse, the thermostat stays at 4420144."
ECHO = "At what number does the thermostat stays when stormy-wheel tends the greenhouse?"
VALUE_ALONE = "At 4420144."
FLOOR = (  # sample 1's memory: copied filler that shares "number" with the question
    'The floor division operator and the "divmod()" function are not defined for complex '
    "numbers. Instead, convert to a floating point number if appropriate."
)


def greenhouse_reading(shown_needle: str) -> ScriptedBackend:
    """A reader that copies ``FLOOR`` at the first two sections (the needle's included),
    writes ``shown_needle`` when shown the needle alone, copies prose over its notes at the
    last section, and answers from the memory (a made-up 18 without the value)."""

    def update(section: str, _: str) -> str:
        if section.strip() == GREENHOUSE_NEEDLE:
            return shown_needle
        return PROSE if "Last filler" in section else FLOOR

    return scripted_reader("4420144", "18", update, 8)


async def run_greenhouse(backend: ScriptedBackend, **settings: object):  # type: ignore[no-untyped-def]
    section = f"{PROSE} {GREENHOUSE_NEEDLE} {DECOY}"
    chunks = chunks_of("Filler about kettles.", section, "Last filler.")
    config = MemAgentConfig(focused_reread=True, **SHIPPED_NOTES, **settings)  # type: ignore[arg-type]
    return await MemAgent(backend, WordTokenizer(), config).run(GREENHOUSE_QUESTION, chunks)


@pytest.mark.parametrize("shown_needle", [ECHO, VALUE_ALONE, FLOOR])
async def test_a_reread_that_still_records_no_answer_keeps_the_sentence_it_was_shown(
    shown_needle: str,
) -> None:
    """Stop 55's rule kept whatever the reread wrote, and the answer was made up. Now the
    needle it was shown heads the memory, as the section has it, cited to itself, and is
    kept to the end against the prose copied over it."""
    lost = await run_greenhouse(greenhouse_reading(shown_needle), **STOP55)
    assert lost.answer == "18"
    run = await run_greenhouse(greenhouse_reading(shown_needle))
    assert run.answer == "4420144"
    reread = next(s for s in run.steps if FOCUSED_REREAD in s.flags)
    assert FOCUS_QUOTED in reread.flags
    lines = reread.memory.splitlines()
    assert lines[0] == GREENHOUSE_NEEDLE and ECHO not in lines  # a question records nothing
    assert [s.quote for s in reread.sources] == [GREENHOUSE_NEEDLE]
    assert run.steps[-2].memory == reread.memory and NOTES_RESTORED in run.steps[-2].flags
    assert any("as the section has them" in note for note in run.notes)


def test_a_question_written_back_does_not_restate_it():
    assert restates(ECHO, Restating(GREENHOUSE_QUESTION))  # every term: stop 55's rule counted it
    assert not restates(ECHO, Restating(GREENHOUSE_QUESTION, skip_questions=True))
    assert restates(
        f"{ECHO}\n{GREENHOUSE_NEEDLE}", Restating(GREENHOUSE_QUESTION, skip_questions=True)
    )
    assert asks(ECHO) and not asks(GREENHOUSE_NEEDLE)


async def test_the_quoted_sentence_and_the_notes_after_it_stay_within_the_memory_cap():
    needle_words = WordTokenizer().count(GREENHOUSE_NEEDLE)
    floor_words = WordTokenizer().count(FLOOR)
    cap = needle_words + floor_words - 1  # the needle fits, the copied filler after it not
    run = await run_greenhouse(greenhouse_reading(FLOOR), memory_tokens=cap)
    reread = next(s for s in run.steps if FOCUSED_REREAD in s.flags)
    assert reread.memory == GREENHOUSE_NEEDLE and run.answer == "4420144"
    # a cap the needle does not fit in leaves the reread's memory as it was
    run = await run_greenhouse(greenhouse_reading(FLOOR), memory_tokens=needle_words - 1)
    reread = next(s for s in run.steps if FOCUSED_REREAD in s.flags)
    assert FOCUS_QUOTED not in reread.flags and GREENHOUSE_NEEDLE not in reread.memory
