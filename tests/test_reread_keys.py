"""Reading rules that know the question's key (``question_keys``): in a document holding
needles for several keys, another key's needle shares the question's frame ("special magic
number", 3 of its 4 terms) but does not restate it. The scripted reader does what the shipped
adapter did in stop 57's ``bench/multi_question.py --traces``: shown another key's needle for
the question about dune, it copies it, and at dune's own section it writes dune's key with the
number its memory already holds."""

from __future__ import annotations

import re
from collections.abc import Sequence

from longread.agents.memagent import NO_MEMORY, MemAgent, MemAgentConfig
from longread.citations.focus import Restating, focus_sentences, key_terms, lost_notes, restates
from longread.llm.base import Message
from longread.trace import FOCUSED_REREAD, NOTES_RESTORED, NOTES_UNGROUNDED

from .scripted import ScriptedBackend, WordTokenizer
from .test_focused_reread import chunks_of

QUESTION = "What is the special magic number for dune mentioned in the document?"
DUNE = "The special magic number for dune is 4720519."
BIRCH = "The special magic number for birch is 8056020."
AMBER = "The special magic number for amber is 3141592."
FILLER = "The grass is green. The sky is blue. The sun is yellow."
NEEDLE = re.compile(r"The special magic number for (\w+) is (\d+)\.")


def test_the_key_is_what_sets_the_questions_needle_apart_from_other_keys_needles():
    document = [f"{FILLER} {BIRCH}", f"{DUNE} {FILLER}", f"{AMBER} {FILLER}"]
    assert key_terms(document, QUESTION) == {"dune"}
    # one needle in the document, or none for this key: nothing to tell apart, no key
    assert key_terms([FILLER, DUNE, FILLER], QUESTION) == frozenset()
    assert key_terms([BIRCH, AMBER], QUESTION) == frozenset()
    assert key_terms([FILLER], QUESTION) == frozenset()


def test_another_keys_needle_does_not_restate_the_question_once_the_key_is_known():
    key = frozenset({"dune"})
    assert restates(BIRCH, Restating(QUESTION))  # stop 57's rule: 3 of 4 terms
    assert not restates(BIRCH, Restating(QUESTION, key=key))
    assert restates(DUNE, Restating(QUESTION, key=key))
    assert focus_sentences(f"{FILLER} {BIRCH}", QUESTION) == [BIRCH]
    assert focus_sentences(f"{FILLER} {BIRCH}", QUESTION, key=key) == []
    assert focus_sentences(f"{BIRCH} {DUNE}", QUESTION, key=key) == [DUNE]
    # an update dropping amber's needle gave up nothing about dune
    assert lost_notes(AMBER, NO_MEMORY, Restating(QUESTION))
    assert not lost_notes(AMBER, NO_MEMORY, Restating(QUESTION, key=key))
    assert lost_notes(DUNE, NO_MEMORY, Restating(QUESTION, key=key))


def update_parts(prompt: str) -> tuple[str, str]:
    """The section and the memory an update prompt shows, in either order."""
    if prompt.index("Section:") < prompt.index("Problem:"):  # section-first
        section = prompt.split("Section:\n", 1)[1].split("\n\nProblem:", 1)[0]
        return section, prompt.split("sections before this one):\n", 1)[1].split("\n\n")[0]
    section = prompt.split("Section:\n", 1)[1].split("\n\nUpdate the memory", 1)[0]
    return section, prompt.split("Memory:\n", 1)[1].split("\n\nSection:", 1)[0]


def confusing_reader(calls: int) -> ScriptedBackend:
    """Copies the needles it is shown alone; at a section holding dune's needle, writes dune's
    key with the number its memory holds, if any (the adapter's confusion), else copies the
    needle; elsewhere keeps its memory, or writes that it found nothing. Answers the number
    its memory holds."""

    def update(section: str, memory: str) -> str:
        shown = NEEDLE.findall(section)
        if shown and not NEEDLE.sub("", section).strip():  # a focused reread's sentences
            return section.strip()
        if ("dune", "4720519") in shown:
            held = NEEDLE.search(memory)
            return f"The special magic number for dune is {held[2]}." if held else DUNE
        return memory if memory != NO_MEMORY else "Nothing about the question here."

    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            held = NEEDLE.search(prompt)
            return f"\\boxed{{{held[2] if held else 0}}}"
        return update(*update_parts(prompt))

    return ScriptedBackend([reply] * calls)


DOCUMENT = (f"{FILLER} {BIRCH}", FILLER, f"{FILLER} {DUNE}", f"{AMBER} {FILLER}")


async def test_a_reread_never_shows_another_keys_needle_to_the_question():
    chunks = chunks_of(*DOCUMENT)
    stop57 = MemAgentConfig(focused_reread=True, question_keys=False)
    confused = await MemAgent(confusing_reader(12), WordTokenizer(), stop57).run(QUESTION, chunks)
    # birch's needle, reread at the first section, is written under dune's key at the third
    assert confused.answer == "8056020"
    assert confused.steps[1].memory == BIRCH and FOCUSED_REREAD in confused.steps[1].flags
    backend = confusing_reader(12)
    config = MemAgentConfig(focused_reread=True)
    run = await MemAgent(backend, WordTokenizer(), config).run(QUESTION, chunks)
    assert run.answer == "4720519"
    # no reread before dune's section: no sentence there holds the key
    assert [s.chunk_index for s in run.steps if FOCUSED_REREAD in s.flags] == []
    assert len(backend.requests) == len(DOCUMENT) + 1
    # and amber's section, whose update kept dune's needle, needed nothing
    assert not any(NOTES_RESTORED in s.flags for s in run.steps)


async def test_each_question_read_section_first_gets_its_own_key():
    """``run_many`` reads the document once for every question (chunk-major), each with the
    key the document gives it: birch's question is not held to dune's key."""
    chunks = chunks_of(*DOCUMENT)
    birch = QUESTION.replace("dune", "birch")
    config = MemAgentConfig(focused_reread=True, section_first=True)
    backend = confusing_reader(24)
    runs = await MemAgent(backend, WordTokenizer(), config).run_many([QUESTION, birch], chunks)
    assert runs[0].answer == "4720519"
    # birch's question: its needle's section got a focused reread, shown birch's needle alone
    reread = [s for s in runs[1].steps if FOCUSED_REREAD in s.flags]
    assert [s.chunk_index for s in reread] == [0] and reread[0].memory == BIRCH
    assert runs[1].answer == "8056020"


def relabelling_reader(calls: int) -> ScriptedBackend:
    """Writes the first needle it meets under dune's key (the shipped adapter's note at
    birch's needle in stop 57's bench: "The special magic number for dune mentioned in the
    document is 8056020."), then keeps its memory; answers the number its memory holds."""

    def update(section: str, memory: str) -> str:
        if re.search(r"is \d+\.", memory):
            return memory
        met = NEEDLE.search(section)
        if met is None:
            return memory
        return f"The special magic number for dune mentioned in the document is {met[2]}."

    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            held = re.search(r"is (\d+)\.", prompt)
            return f"\\boxed{{{held[1] if held else 0}}}"
        return update(*update_parts(prompt))

    return ScriptedBackend([reply] * calls)


async def test_a_note_naming_the_key_is_grounded_only_by_a_sentence_naming_it():
    chunks = chunks_of(*DOCUMENT)
    stop57 = MemAgentConfig(grounded_notes=True, question_keys=False)
    kept = await MemAgent(relabelling_reader(6), WordTokenizer(), stop57).run(QUESTION, chunks)
    assert kept.answer == "8056020"  # every word but the key is in birch's sentence
    config = MemAgentConfig(grounded_notes=True)
    run = await MemAgent(relabelling_reader(6), WordTokenizer(), config).run(QUESTION, chunks)
    assert run.answer == "4720519"
    assert NOTES_UNGROUNDED in run.steps[0].flags and run.steps[0].memory == NO_MEMORY
    assert "4720519" in (run.steps[2].memory or "")
    # a note traced to the key's own needle is held
    assert not any(NOTES_UNGROUNDED in s.flags for s in run.steps[1:])
