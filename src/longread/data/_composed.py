"""Composed needle wordings for training data (issue 26): one wording per sample, put together
from parts (an opening, a describing word, a name for the value, a sentence shape, a question
form), so that no sentence shape recurs often enough to be learnt in place of the skill:
copy into the notes whatever the section says about what the question asks.

Keyed wordings name the key; key-less ones name a place instead ("the north vault"), so the
question still points at one sentence. The parts keep clear of the held-out wordings'
features (``_niah.HELDOUT_WORDINGS``): no possessive key, no "reads", no non-restrictive
clause set off by commas between noun and value, no conditional instruction ("should X
fail, dial V"), and none of their nouns (shelf, ledger, archive, catalogue, harbour, radio, locker,
greenhouse, thermostat, van, bay).
``tests/test_builders.py`` checks the words.
"""

from __future__ import annotations

import random

OPENINGS = ("", "", "", "Note: ", "Remember this: ", "For the record, ", "Important: ",
            "As agreed, ", "By the way, ", "Please note that ")  # fmt: skip
DESCRIBING = ("special", "secret", "hidden", "private", "assigned", "reserved", "personal",
              "official", "backup", "lucky", "current", "emergency")  # fmt: skip
# Names for the value by value type, singular and plural.
THINGS = {
    "numbers": (("number", "numbers"), ("code", "codes"), ("PIN", "PINs"),
                ("access number", "access numbers"), ("ID number", "ID numbers")),
    "uuids": (("identifier", "identifiers"), ("token", "tokens"), ("serial", "serials"),
              ("reference", "references")),
}  # fmt: skip
# Sentence shapes; {thing} is "describing name", {Thing} the same capitalised.
SHAPES = (
    "The {thing} of {key} is {value}.",
    "For {key}, the {thing} is {value}.",
    "{value} is the {thing} of {key}.",
    "The {thing} assigned to {key} is {value}.",
    "{Thing} for {key}: {value}.",
    "{key} uses {value} as the {thing}.",
    "{key} was issued the {thing} {value}.",
    "We recorded {value} as the {thing} of {key}.",
    "The {thing} that belongs to {key} is {value}.",
    "{key} has the {thing} {value}.",
    "The {thing} for {key} was set to {value}.",
)
QUESTIONS = (
    ("What is the {thing} of {key}?", "What are all the {things} of {keys}?"),
    ("Which {thing} belongs to {key}?", "Which {things} belong to {keys}?"),
    ("What {thing} does {key} have?", "What {things} do {keys} have?"),
    ("Find the {thing} of {key}.", "Find all the {things} of {keys}."),
)
PLACES = ("the north vault", "the staff lounge", "the server room", "the back office",
          "the garden shed", "the old observatory", "the east wing", "the boat house",
          "the wine cellar", "the print shop")  # fmt: skip


def compose(rng: random.Random, value_type: str, keyed: bool) -> tuple[str, str, str]:
    """The needle, question and several-answer question templates of one composed wording,
    with ``{key}``/``{keys}`` and ``{value}`` left to fill (a key-less one has its place
    written in and no ``{key}``)."""
    thing, things = rng.choice(THINGS[value_type])
    describing = rng.choice(DESCRIBING)
    thing, things = f"{describing} {thing}", f"{describing} {things}"
    shape = rng.choice(SHAPES)
    question, question_all = rng.choice(QUESTIONS)
    key = "{key}" if keyed else rng.choice(PLACES)
    keys = "{keys}" if keyed else key
    opening = rng.choice(OPENINGS)
    if shape.startswith("{Thing}"):  # a label ("Lucky code for K: V."), not a sentence
        opening = ""
    needle = _sentence(opening, _fill(shape, thing, things, key))
    return (
        needle,
        _capital(_fill(question, thing, things, key)),
        _capital(_fill(question_all, thing, things, keys, plural_key="{keys}")),
    )


def _fill(template: str, thing: str, things: str, key: str, plural_key: str = "{key}") -> str:
    text = template.replace("{Thing}", _capital(thing)).replace("{things}", things)
    return text.replace("{thing}", thing).replace(plural_key, key)


def _sentence(opening: str, body: str) -> str:
    """The opening before the body, which goes on in lower case after it (every shape starts
    with a common word, a key or a value)."""
    if opening:
        body = body[0].lower() + body[1:]
    return _capital(opening + body)


def _capital(text: str) -> str:
    return text[0].upper() + text[1:] if text and not text.startswith("{") else text
