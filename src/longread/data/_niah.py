"""RULER's needle-in-a-haystack tasks: "One of the special magic numbers for KEY is: VALUE."
sentences hidden in noise, essay text or other needles (RULER's synthetic.yaml settings).

Other wordings of the needle and its question exist for training data (a model taught only
RULER's sentence learns that sentence, not the skill): ``wording="ruler"`` is RULER's and the
default; the others are listed in :data:`WORDINGS`. ``"mixed"`` draws one per sample among the
first three (the wordings of the first adapter stages, kept so their data rebuilds the same),
``"varied"`` among all of :data:`WORDINGS`, ``"composed"`` puts a new one together per sample
from parts (:mod:`._composed`). :data:`HELDOUT_WORDINGS` are never drawn: they are the
unseen-wording evaluation, and no training set may name them."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ._composed import compose
from ._draft import Draft, Shared
from ._haystack import (
    NOISE_SENTENCES,
    insert_at,
    lines_of,
    noise_sentences,
    random_number,
    random_uuid,
    random_word_key,
)


@dataclass(frozen=True)
class NiahSpec:
    """One niah variant: its default haystack, key/value types and needle counts."""

    haystack: str  # "noise" | "essay" | "needles"
    key_type: str  # "words" | "uuids"
    value_type: str  # "numbers" | "uuids"
    keys: int = 1  # needles with distinct keys
    values: int = 1  # values per key
    queries: int = 1  # keys asked about


NIAH: dict[str, NiahSpec] = {
    "niah_single_1": NiahSpec("noise", "words", "numbers"),
    "niah_single_2": NiahSpec("essay", "words", "numbers"),
    "niah_single_3": NiahSpec("essay", "words", "uuids"),
    "niah_multikey_1": NiahSpec("essay", "words", "numbers", keys=4),
    "niah_multikey_2": NiahSpec("needles", "words", "numbers"),
    "niah_multikey_3": NiahSpec("needles", "uuids", "uuids"),
    "niah_multivalue": NiahSpec("essay", "words", "numbers", values=4),
    "niah_multiquery": NiahSpec("essay", "words", "numbers", keys=4, queries=4),
}
NIAH_TASKS = tuple(NIAH)


@dataclass(frozen=True)
class Wording:
    """How a needle is written and asked about; ``{key}`` is left out by key-less wordings."""

    needle: str  # fields: noun (singular), key, value
    question: str  # fields: noun (singular), key
    question_all: str  # several answers; fields: nouns (plural), keys
    keyed: bool = True  # False: the needle names no key, so only one gold needle is allowed


WORDINGS: dict[str, Wording] = {
    "ruler": Wording(
        "One of the special magic {nouns} for {key} is: {value}.",
        "What is the special magic {noun} for {key} mentioned in the provided text?",
        "What are all the special magic {nouns} for {keys} mentioned in the provided text?",
    ),
    # The wording of `make demo`'s document (longread.data.needle): no key.
    "plain": Wording(
        "The special magic {noun} is {value}.",
        "What is the special magic {noun} mentioned in the document?",
        "What are all the special magic {nouns} mentioned in the document?",
        keyed=False,
    ),
    "secret": Wording(
        "Remember this: the secret {noun} of {key} is {value}.",
        "What is the secret {noun} of {key}?",
        "What are all the secret {nouns} of {keys}?",
    ),
}
# The wider pool "varied" draws from (issue 26): other nouns, orders and verbs, keyed and
# key-less, so that notes hinge on what the question asks, not on one sentence's shape.
WORDINGS.update(
    {
        "code": Wording(
            "The access code for {key} is {value}.",
            "What is the access code for {key}?",
            "What are all the access codes for {keys}?",
        ),
        "given": Wording(
            "{key} was given the {noun} {value} by the committee.",
            "Which {noun} was {key} given by the committee?",
            "Which {nouns} were {keys} given by the committee?",
        ),
        "reverse": Wording(
            "{value} is the hidden {noun} that belongs to {key}.",
            "What hidden {noun} belongs to {key}?",
            "What hidden {nouns} belong to {keys}?",
        ),
        "label": Wording(
            "Lucky {noun} of {key}: {value}.",
            "What is the lucky {noun} of {key}?",
            "What are the lucky {nouns} of {keys}?",
        ),
        "record": Wording(
            "According to the records, {key} is registered under the {noun} {value}.",
            "Under which {noun} is {key} registered?",
            "Under which {nouns} are {keys} registered?",
        ),
        "password": Wording(
            "Keep this in mind: the password for the old gate is {value}.",
            "What is the password for the old gate?",
            "What are all the passwords for the old gate?",
            keyed=False,
        ),
        "winning": Wording(
            "The winning {noun} in this year's lottery was {value}.",
            "What was the winning {noun} in this year's lottery?",
            "What were the winning {nouns} in this year's lottery?",
            keyed=False,
        ),
    }
)
_FIRST_WORDINGS = ("ruler", "plain", "secret")  # what "mixed" draws from

# Held out of every training set (issue 26): the unseen-wording evaluation, in shapes no
# training wording has. Keyed: a possessive key, a clause between noun and value, "reads" for
# "is". Key-less: an imperative with a condition, the value mid-sentence, no "is" at all.
HELDOUT_WORDINGS: dict[str, Wording] = {
    # The first held-out wording, stage 2a's in-training check: never trained, but the shape
    # of the training wording "record" ("KEY is registered under the number V") with another
    # verb and noun, so a weaker test than the two below.
    "heldout-archive": Wording(
        "In the archive, {key} is catalogued under shelf {noun} {value}.",
        "Under which shelf {noun} is {key} catalogued in the archive?",
        "Under which shelf {nouns} are {keys} catalogued in the archive?",
    ),
    "heldout-ledger": Wording(
        "{key}'s shelf {noun}, which nobody else may know, reads {value} in the ledger.",
        "What does {key}'s shelf {noun} read in the ledger?",
        "What do the shelf {nouns} of {keys} read in the ledger?",
    ),
    "heldout-harbour": Wording(
        "Should the radio fail, dial {value} to reach the harbour master.",
        "Which number should be dialled to reach the harbour master if the radio fails?",
        "Which numbers should be dialled to reach the harbour master if the radio fails?",
        keyed=False,
    ),
    # Written at stop 54, after focused rereads were designed on the three above, to test
    # them on a wording they were not tuned on: a possessive key inside a purpose clause, the
    # value as the object of "turn ... to", a question that asks with "to what".
    "heldout-locker": Wording(
        "Whoever wants to open {key}'s locker must turn the dial to {value}.",
        "To what {noun} must the dial be turned to open {key}'s locker?",
        "To what {nouns} must the dials be turned to open the lockers of {keys}?",
    ),
    # Written at stop 55, before any run on it, after the reread's grounding and trigger were
    # fixed on the locker wording's misses: the key as the subject of a "when" clause that
    # opens the sentence, the value after "at", a verb ("stays") the question words
    # differently ("stay"), and a noun the question names that the needle does not.
    "heldout-greenhouse": Wording(
        "When {key} tends the greenhouse, the thermostat stays at {value}.",
        "At what {noun} does the thermostat stay when {key} tends the greenhouse?",
        "At what {nouns} do the thermostats stay when {keys} tend the greenhouse?",
    ),
    # Written at stop 56, before any run on it and before that stop's reread changes were
    # coded (they were designed on the greenhouse misses): the key as the subject of a
    # past-tense verb the question words in the present ("parked" / "park"), the value after
    # a noun the question names with another ("bay" / "bay number"), a closing time clause.
    "heldout-van": Wording(
        "{key} parked the van in bay {value} before the storm.",
        "In which bay {noun} did {key} park the van before the storm?",
        "In which bay {nouns} did {keys} park the vans before the storm?",
    ),
}
WORDING_CHOICES = (*WORDINGS, *HELDOUT_WORDINGS, "mixed", "varied", "composed")
KEYLESS_SHARE = 0.25  # of composed wordings, where the task has one needle

# RULER's 40 needle depths: whole percentages evenly spread over 0..100.
DEPTHS = tuple(round(i * 100 / 39) / 100 for i in range(40))
_DRAW: dict[str, Callable[[random.Random], str]] = {
    "words": random_word_key,
    "numbers": random_number,
    "uuids": random_uuid,
}


def niah_draft(task: str, shared: Shared, rng: random.Random) -> Draft:
    """A niah sample: gold needles at RULER depths, the question about the queried keys."""
    spec = NIAH[task]
    taken: set[str] = set()  # every gold key and value, so none is drawn twice
    keys = _distinct(_DRAW[spec.key_type], rng, spec.keys, taken)
    values = [_distinct(_DRAW[spec.value_type], rng, spec.values, taken) for _ in keys]
    pairs = [(k, v) for k, vs in zip(keys, values, strict=True) for v in vs]
    rng.shuffle(pairs)
    depths = sorted(rng.sample(DEPTHS, len(pairs)))
    queried = rng.sample(range(len(keys)), spec.queries)
    answers = [v for i in queried for v in values[i]]
    noun = spec.value_type
    kind = shared.haystack or spec.haystack
    fill_seed = rng.getrandbits(64) if kind == "needles" else None
    # Drawn last, so that RULER's wording leaves every earlier draw (and each sample) as it was.
    wording = _wording(shared.wording, spec, kind, rng)
    needles = [_needle(wording, noun, k, v) for k, v in pairs]
    if fill_seed is not None:
        fill = _NeedleFill(random.Random(fill_seed), spec, taken, wording)
        render = _needles_renderer(fill, needles, depths)
    else:
        render = _text_renderer(kind, shared, needles, depths)
    meta: dict[str, Any] = {"haystack": kind, "depths": depths, "keys": [keys[i] for i in queried]}
    if len(depths) == 1:
        meta["depth"] = depths[0]
    if shared.wording == "composed":
        meta["wording"], meta["needle_template"] = "composed", wording.needle
    elif shared.wording != "ruler":
        meta["wording"] = _name(wording)
    question = _question(wording, noun, [keys[i] for i in queried], len(answers))
    return Draft(question, answers, render, meta)


def _wording(choice: str, spec: NiahSpec, haystack: str, rng: random.Random) -> Wording:
    """The sample's wording: the one chosen, or for "mixed" one drawn among those that can
    state this task unambiguously (a key-less needle only where there is one needle)."""
    if choice == "ruler":
        return WORDINGS["ruler"]
    if choice == "composed":
        keyed = not _one_needle(spec, haystack) or rng.random() >= KEYLESS_SHARE
        return Wording(*compose(rng, spec.value_type, keyed), keyed=keyed)
    if choice in ("mixed", "varied"):
        pool = _FIRST_WORDINGS if choice == "mixed" else tuple(WORDINGS)
        usable = [WORDINGS[n] for n in pool if WORDINGS[n].keyed or _one_needle(spec, haystack)]
        return rng.choice(usable)
    every = {**WORDINGS, **HELDOUT_WORDINGS}
    if choice not in every:
        raise UsageError(f"unknown needle wording {choice!r}; expected one of {WORDING_CHOICES}")
    if not (every[choice].keyed or _one_needle(spec, haystack)):
        raise UsageError(f"wording {choice!r} names no key, so it needs a task with one needle")
    return every[choice]


def _one_needle(spec: NiahSpec, haystack: str) -> bool:
    return spec.keys == 1 and spec.values == 1 and haystack != "needles"


def _name(wording: Wording) -> str:
    return next(name for name, w in {**WORDINGS, **HELDOUT_WORDINGS}.items() if w == wording)


def _needle(wording: Wording, noun: str, key: str, value: str) -> str:
    return wording.needle.format(noun=noun[:-1], nouns=noun, key=key, value=value)


def _question(wording: Wording, noun: str, keys: list[str], n_answers: int) -> str:
    if n_answers == 1:  # RULER's singular wording for a single answer
        return wording.question.format(noun=noun[:-1], key=keys[0])
    query = keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + ", and " + keys[-1]
    return wording.question_all.format(nouns=noun, keys=query)


def _distinct(
    draw: Callable[[random.Random], str], rng: random.Random, n: int, taken: set[str]
) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        value = draw(rng)
        if value not in taken:
            taken.add(value)
            out.append(value)
    return out


def _text_renderer(
    kind: str, shared: Shared, needles: list[str], depths: list[float]
) -> Callable[[int], str]:
    """Noise (size = sentences; lines of RULER's noise, needles as lines), noise-paragraphs
    (the same lines, needles among them, four to a blank-line paragraph: `make demo`'s layout,
    longread.data.needle) or essay (size = words; needles as
    sentences between the essay's sentences)."""

    def render(size: int) -> str:
        if kind == "noise":
            units, sep = lines_of(noise_sentences(size)), "\n"
        elif kind == "noise-paragraphs":
            units = lines_of(noise_sentences(size))
            at = [(int(len(units) * d), text) for d, text in zip(depths, needles, strict=True)]
            return "\n\n".join(lines_of(insert_at(units, at), 4)) + "\n"
        else:
            units, sep = shared.essay.sentences(size), " "
        at = [(int(len(units) * d), text) for d, text in zip(depths, needles, strict=True)]
        return sep.join(insert_at(units, at))

    return render


class _NeedleFill:
    """Distractor needles for the needles haystack, drawn in a fixed order so that a larger
    haystack extends a smaller one; none reuses a gold key or value."""

    def __init__(
        self, rng: random.Random, spec: NiahSpec, taken: set[str], wording: Wording
    ) -> None:
        self._rng, self._spec, self._taken, self._wording = rng, spec, taken, wording
        self._lines: list[str] = []
        # Noise sentences that weigh about one needle: the size counts these, so a size
        # step adds a sentence and lengths fit finely even with long UUID needles.
        example = self._needle(self._key(), self._value())
        average = sum(map(len, NOISE_SENTENCES)) / len(NOISE_SENTENCES)
        self.per_needle = max(1, round(len(example) / average))

    def take(self, n: int) -> list[str]:
        while len(self._lines) < n:
            key, value = self._key(), self._value()
            if key not in self._taken and value not in self._taken:
                self._lines.append(self._needle(key, value))
        return self._lines[:n]

    def _needle(self, key: str, value: str) -> str:
        return _needle(self._wording, self._spec.value_type, key, value)

    def _key(self) -> str:
        return _DRAW[self._spec.key_type](self._rng)

    def _value(self) -> str:
        return _DRAW[self._spec.value_type](self._rng)


def _needles_renderer(
    fill: _NeedleFill, needles: list[str], depths: list[float]
) -> Callable[[int], str]:
    """Size = distractor needles x ``per_needle`` + trailing noise sentences."""

    def render(size: int) -> str:
        count, pad = divmod(size, fill.per_needle)
        lines = fill.take(count)
        at = [(int(count * d), text) for d, text in zip(depths, needles, strict=True)]
        lines = insert_at(lines, at)
        if pad:
            lines.append(" ".join(noise_sentences(pad)))
        return "\n".join(lines)

    return render
