"""Exact copies (``--exact-copies on``): a value a note nearly copied from its section is
written as the section has it. The miscopies are stage grpo26b's own, from its niah_single_3
8K misses (results/v2/runs/memagent-grpo26b-run-step6-ruler_niah_single_3-8192-notes+focused)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from longread.agents.memagent import NO_MEMORY, MemAgent, MemAgentConfig
from longread.citations import Provenance
from longread.citations.copies import exact_copies
from longread.eval.scoring import score_answer
from longread.llm.base import Message
from longread.text.chunking import Chunk
from longread.trace import COPY_REPAIRED, NOTES_UNGROUNDED

from .scripted import ScriptedBackend, WordTokenizer

QUESTION = "What is the special magic uuid for wise-fox mentioned in the provided text?"
UUID = "0c564d3c-9194-4e2b-a415-e330da39eecd"
NEEDLE = f"One of the special magic uuids for wise-fox is: {UUID}."
SECTION = f"The hills were quiet that year. {NEEDLE} Nobody came back."


def provenance_of(note: str, section: str = SECTION) -> Provenance:
    provenance = Provenance()
    provenance.on_update(NO_MEMORY, note, Chunk(0, section, 20), QUESTION)
    return provenance


@pytest.mark.parametrize(
    ("written", "source"),
    [
        ("0c564d3c-9194-4e2b-a415-e330da39e", UUID),  # the tail dropped
        ("0c564d3c-9194-4e2b-a415-e330da39eecf", UUID),  # the last character changed
        ("0c564d3c-9194-4e2ba415-e330da39eecd", UUID),  # a hyphen dropped
    ],
)
def test_a_value_nearly_copied_from_its_section_is_written_as_the_section_has_it(written, source):
    note = f"One of the special magic uuids for wise-fox is: {written}."
    repaired, fixes = exact_copies(note, QUESTION, provenance_of(note))
    assert repaired == NEEDLE and fixes == [(written, source)]


def test_exact_and_unrelated_values_are_left_as_written():
    # copied right: nothing to do
    assert exact_copies(NEEDLE, QUESTION, provenance_of(NEEDLE)) == (NEEDLE, [])
    # a made-up value is no near copy of the section's: grounded notes judge it, as before
    made_up = "One of the special magic uuids for wise-fox is: 11."
    assert exact_copies(made_up, QUESTION, provenance_of(made_up)) == (made_up, [])
    # a note about nothing the question asks is not touched, whatever its values
    filler = "The hills were quiet in 0c564d3c-9194-4e2b-a415-e330da39e."
    section = f"The hills were quiet in {UUID}."
    assert exact_copies(filler, QUESTION, provenance_of(filler, section)) == (filler, [])


def test_a_short_value_one_digit_off_is_another_value_not_a_miscopy():
    section = "The special magic number for wise-fox is 19999, said the clerk."
    note = "The special magic number for wise-fox is 19998."
    assert exact_copies(note, QUESTION, provenance_of(note, section)) == (note, [])


def scripted_reading(reply_at_needle: str) -> ScriptedBackend:
    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            memory = prompt.split("Memory:\n", 1)[1] if "Memory:\n" in prompt else prompt
            return f"\\boxed{{{UUID}}}" if UUID in memory else "\\boxed{none}"
        section = prompt.split("Section:", 1)[1]
        memory = prompt.split("Memory:\n", 1)[1].split("\n\nSection:", 1)[0]
        return reply_at_needle if "wise-fox" in section else memory

    return ScriptedBackend([reply] * 10)


async def test_with_grounded_notes_the_miscopied_needle_is_kept_exact_not_cut():
    """Stage grpo26b at niah_single_3 8K: the needle's UUID copied with its tail dropped, then
    cut by grounded notes as a value no section holds; the answer was lost. With exact
    copies the section's UUID goes into the memory and the answer is right."""
    tok = WordTokenizer()
    sections = ["Filler about kettles.", SECTION, "Last filler."]
    chunks = [Chunk(i, t, tok.count(t)) for i, t in enumerate(sections)]
    miscopy = "One of the special magic uuids for wise-fox is: 0c564d3c-9194-4e2b-a415-e330da39e."
    cut = await MemAgent(scripted_reading(miscopy), tok, MemAgentConfig(grounded_notes=True)).run(
        QUESTION, chunks
    )
    assert NOTES_UNGROUNDED in cut.steps[1].flags and cut.answer == "none"
    exact = await MemAgent(
        scripted_reading(miscopy), tok, MemAgentConfig(grounded_notes=True, exact_copies=True)
    ).run(QUESTION, chunks)
    assert COPY_REPAIRED in exact.steps[1].flags
    assert NOTES_UNGROUNDED not in exact.steps[1].flags
    assert exact.steps[1].memory == NEEDLE and exact.answer == UUID
    assert any("the section's written in its place" in note for note in exact.notes)


def answering(answer: str) -> ScriptedBackend:
    """Takes the needle in whole, then answers ``answer`` from the memory that holds it."""

    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            return f"\\boxed{{{answer}}}"
        section = prompt.split("Section:", 1)[1]
        memory = prompt.split("Memory:\n", 1)[1].split("\n\nSection:", 1)[0]
        return NEEDLE if "wise-fox" in section else memory

    return ScriptedBackend([reply] * 10)


async def test_an_answer_that_nearly_copies_the_memory_is_given_as_the_memory_has_it():
    """grpo26b's last niah_single_3 8K miss with exact copies: the UUID whole in the memory,
    its tail dropped in the boxed answer. The answer is repaired, the reply kept as written;
    off, the miscopy is the answer (the papers' reading)."""
    tok = WordTokenizer()
    sections = ["Filler about kettles.", SECTION, "Last filler."]
    chunks = [Chunk(i, t, tok.count(t)) for i, t in enumerate(sections)]
    miscopy = "0c564d3c-9194-4e2b-a415-e330da39e"
    plain = await MemAgent(answering(miscopy), tok, MemAgentConfig()).run(QUESTION, chunks)
    assert plain.answer == miscopy
    exact = await MemAgent(answering(miscopy), tok, MemAgentConfig(exact_copies=True)).run(
        QUESTION, chunks
    )
    final = exact.steps[-1]
    assert exact.answer == UUID and COPY_REPAIRED in final.flags
    assert miscopy in (final.reply or "") and UUID not in (final.reply or "")  # as written
    # the run gives (and the judge scores) the repaired answer
    assert exact.final_reply == f"\\boxed{{{UUID}}}"
    assert score_answer(exact.final_reply, [UUID], kind="ruler").match_all == 100.0
    assert score_answer(plain.final_reply, [UUID], kind="ruler").match_all == 0.0
    assert any("the memory's given" in note for note in exact.notes)


async def test_an_answer_not_near_any_value_of_the_memory_is_left_as_written():
    tok = WordTokenizer()
    chunks = [Chunk(0, SECTION, tok.count(SECTION))]
    for answer in ("11", "wise-fox", UUID):  # made up, no value, exact: nothing to repair
        run = await MemAgent(answering(answer), tok, MemAgentConfig(exact_copies=True)).run(
            QUESTION, chunks
        )
        assert run.answer == answer and COPY_REPAIRED not in run.steps[-1].flags
