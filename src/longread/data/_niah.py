"""RULER's needle-in-a-haystack tasks: "One of the special magic numbers for KEY is: VALUE."
sentences hidden in noise, essay text or other needles (RULER's synthetic.yaml settings)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    needles = [_needle(noun, k, v) for k, v in pairs]
    kind = shared.haystack or spec.haystack
    if kind == "needles":
        fill = _NeedleFill(random.Random(rng.getrandbits(64)), spec, taken)
        render = _needles_renderer(fill, needles, depths)
    else:
        render = _text_renderer(kind, shared, needles, depths)
    meta: dict[str, Any] = {"haystack": kind, "depths": depths, "keys": [keys[i] for i in queried]}
    if len(depths) == 1:
        meta["depth"] = depths[0]
    return Draft(_question(noun, [keys[i] for i in queried], len(answers)), answers, render, meta)


def _needle(noun: str, key: str, value: str) -> str:
    return f"One of the special magic {noun} for {key} is: {value}."


def _question(noun: str, keys: list[str], n_answers: int) -> str:
    query = keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + ", and " + keys[-1]
    if n_answers == 1:  # RULER's singular wording for a single answer
        return f"What is the special magic {noun[:-1]} for {query} mentioned in the provided text?"
    return f"What are all the special magic {noun} for {query} mentioned in the provided text?"


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
    """Noise (size = sentences; lines of RULER's noise, needles as lines) or essay (size =
    words; needles as sentences between the essay's sentences)."""

    def render(size: int) -> str:
        if kind == "noise":
            units, sep = lines_of(noise_sentences(size)), "\n"
        else:
            units, sep = shared.essay.sentences(size), " "
        at = [(int(len(units) * d), text) for d, text in zip(depths, needles, strict=True)]
        return sep.join(insert_at(units, at))

    return render


class _NeedleFill:
    """Distractor needles for the needles haystack, drawn in a fixed order so that a larger
    haystack extends a smaller one; none reuses a gold key or value."""

    def __init__(self, rng: random.Random, spec: NiahSpec, taken: set[str]) -> None:
        self._rng, self._spec, self._taken = rng, spec, taken
        self._lines: list[str] = []
        # Noise sentences that weigh about one needle: the size counts these, so a size
        # step adds a sentence and lengths fit finely even with long UUID needles.
        example = _needle(spec.value_type, self._key(), self._value())
        average = sum(map(len, NOISE_SENTENCES)) / len(NOISE_SENTENCES)
        self.per_needle = max(1, round(len(example) / average))

    def take(self, n: int) -> list[str]:
        while len(self._lines) < n:
            key, value = self._key(), self._value()
            if key not in self._taken and value not in self._taken:
                self._lines.append(_needle(self._spec.value_type, key, value))
        return self._lines[:n]

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
