"""recipes/smollm2/needle_states.py: the counts the results notes quote on lost needles."""

import importlib.util
from pathlib import Path

import pytest

from longread.trace import Run, Step

SCRIPT = Path(__file__).parent.parent / "recipes" / "smollm2" / "needle_states.py"
spec = importlib.util.spec_from_file_location("needle_states", SCRIPT)
needle_states = importlib.util.module_from_spec(spec)
spec.loader.exec_module(needle_states)

UUID = "0c564d3c-9194-4e2b-a415-e330da39eecd"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (f"One of the special magic uuids for wise-fox is: {UUID}.", "written"),
        # the adapter's real miscopy on niah_single_3 (four characters dropped at the end)
        (
            "One of the special magic uuids for wise-fox is: 0c564d3c-9194-4e2b-a415-e330da39e.",
            "miscopied",
        ),
        ("The special magic number is 4720591.", "skipped"),  # another value entirely
        ("No previous memory", "skipped"),
    ],
)
def test_a_needle_copied_wrong_is_told_apart_from_one_never_written(reply, expected):
    assert needle_states.how_written(reply, UUID) == expected


def test_a_near_number_counts_as_a_miscopy():
    reply = "The special magic number is 472051."
    assert needle_states.how_written(reply, "4720519") == "miscopied"


def _update(notes: str, section: str, reply: str) -> Step:
    content = f"Question\n\nMemory:\n{notes}\n\nSection:\n{section}\n"
    return Step(kind="update", step=0, messages=[{"role": "user", "content": content}],
                reply=reply, finish_reason="stop", prompt_tokens=1, completion_tokens=1,
                seconds=0.0)  # fmt: skip


def test_the_needles_story_is_read_at_the_section_that_holds_it():
    needle = "The special magic number is 4720519."
    steps = [
        _update("No previous memory", "Filler about kettles.", "Kettles dream slowly."),
        _update("Kettles dream slowly.", f"More filler. {needle}", "Kettles dream slowly."),
        _update("Kettles dream slowly.", "Last filler.", "Kettles dream slowly."),
        Step(kind="final", step=3, messages=[], reply="\\boxed{kettles}", finish_reason="stop",
             prompt_tokens=1, completion_tokens=1, seconds=0.0),
    ]  # fmt: skip
    run = Run(agent="memagent", question="q", answer="kettles", final_reply="", boxed=True,
              steps=steps, seconds=0.0)  # fmt: skip
    states = needle_states.sample_states(run, "4720519")
    assert states == {
        "state": "notes with filler",
        "written": "skipped",
        "kept": False,
        "section": 1,
        "sections": 3,
    }


def test_notes_that_already_give_a_wrong_number_are_a_made_up_answer():
    notes = "The special magic number mentioned in the document is 11."
    assert needle_states.notes_state(notes, "4720519") == "notes with a made-up answer"
    assert needle_states.notes_state("No previous memory", "4720519") == "empty notes"
