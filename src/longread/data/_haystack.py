"""Haystack material for the synthetic builders: word lists, RULER's noise, an essay-like
sentence stream, and the random values needles carry. Built in, so nothing is downloaded."""

from __future__ import annotations

import itertools
import random
import re
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import UsageError
from .needle import NOISE

# RULER's repeated haystack, one sentence per unit so lengths can be fitted finely.
NOISE_SENTENCES = tuple(s.strip() + "." for s in NOISE.split(".") if s.strip())


def _words(text: str) -> list[str]:
    return text.split()


# Plain English words (no digits, so the 7-digit values stay unambiguous in any haystack).
NOUNS = _words("""
    acorn anchor apple arch arrow attic autumn badge bakery balcony banner barn basket beach
    beacon bell bench berry blanket boat bottle boulder bracelet branch bridge brook bucket
    cabin cactus camera canal candle canyon carpet castle cave cellar chair chapel cherry
    chimney circle cliff clock cloud coast comet compass copper cottage crater creek crown
    cushion dawn desert diary dolphin door dragon drum eagle echo engine feather fence ferry
    field flag flame forest fountain fox garden gate glacier globe harbor harvest hammer hat
    hawk helmet hill hive horizon island ivory jacket jungle kettle key kite ladder lagoon
    lake lamp lantern leaf letter library lighthouse lily magnet maple marble market meadow
    mirror mill mountain museum needle nest ocean orchard otter owl paddle palace parrot path
    pebble pencil pepper piano pillow pine planet pocket pond portrait puzzle quarry quilt
    rabbit raft rainbow raven reef ribbon river road rocket roof saddle sail salmon satchel
    scarf shadow shell shelter ship shore signal silver sketch sled snail spade sparrow spire
    spring square stable staircase statue stone storm stream summit sunset swan table tent
    thistle thunder tiger timber tower trail train treasure tulip tunnel turtle umbrella
    valley vase velvet village violin voyage wagon walnut waterfall wave wheel whistle willow
    window winter wolf workshop yard
""")
ADJECTIVES = _words("""
    able amber ancient angry bitter black blue bold brave breezy bright brisk broad calm
    careful cheerful clever cold cozy crimson curious damp dark dusty eager early elegant
    empty faint fancy fierce fluffy fragile frozen gentle giant golden graceful grand green
    grumpy happy heavy hidden hollow humble icy jolly kind large lazy little lively lonely
    loud lucky marvelous mellow merry mighty misty modest narrow neat nervous noble odd old
    orange patient plain polite proud purple quick quiet rapid rare restless rich rough round
    royal rusty sandy scarlet secret shiny short silent silly simple sleepy slow small smooth
    soft solid sour spare steady steep sticky stormy strange strong sunny sweet swift tall
    tender thin tidy tiny tired tough tranquil velvet violet vivid warm weary wild wise
    wooden young zealous
""")
VERBS = _words("""
    admire answer arrange borrow build carry chase climb collect cover dance decide deliver
    describe discover draw dream drift explore fetch fold follow gather guard guide hide
    hurry imagine invent juggle jump kick knit laugh lift listen march measure mend notice
    offer open paint plant polish promise pull push question reach read remember repair rest
    return ride roll sail search share shout sing sketch sleep slide smile sort spin stack
    study swim teach throw travel trust visit wander watch whisper wonder write
""")
ADVERBS = _words("""
    boldly briskly calmly carefully cheerfully eagerly gently gladly happily honestly
    kindly lazily loudly merrily neatly patiently politely proudly quickly quietly rarely
    slowly softly steadily swiftly tenderly warmly wisely
""")
NAMES = _words("""
    Ada Alice Amos Bea Boris Carla Dmitri Edith Elena Felix Greta Hugo Ines Ivan Jonas Kira
    Lena Marco Nadia Omar Petra Quinn Rosa Silas Tomas Una Vera Walter Yara Zeno
""")

_ESSAY_TEMPLATES = (
    "The {adj} {noun} stood beside the {noun} for most of the {season}.",
    "{name} said that every {noun} should {verb} {adv} before the {noun} is {adj}.",
    "Nobody knew why the {noun} near the {adj} {noun} would {verb} at dusk.",
    "When the {noun} is {adj}, we {verb} the {noun} and wait.",
    "It is hard to {verb} a {adj} {noun} without a {noun}.",
    "Why would a {adj} {noun} ever {verb} a {noun}?",
    "In the {season}, {name} liked to {verb} {adv} along the {noun}.",
    "Most people {verb} the {noun} long before they {verb} the {noun}.",
    "A {adj} {noun}, a {adj} {noun}, and a {noun} were all we had.",
    "{name} and {name} tried to {verb} the {adj} {noun} {adv}.",
    "The lesson of the {noun} is simple: {verb} {adv}, and the {noun} will follow.",
    "There was once a {noun} so {adj} that no {noun} could {verb} it.",
    "If you {verb} the {noun} {adv}, the {noun} becomes {adj}.",
    "Some say the {adj} {noun} is only a {noun} that learned to {verb}.",
    "I remember how the {noun} looked on that {adj} morning.",
    "What matters is not the {noun} but how {adv} you {verb} it.",
)
_SEASONS = ("spring", "summer", "autumn", "winter")
_SLOT = re.compile(r"\{(\w+)\}")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_A_VOWEL = re.compile(r"\b([Aa]) (?=[aeiou])")


def essay_sentence(rng: random.Random) -> str:
    """One essay-like sentence from a random template with random words in its slots."""
    pools = {
        "adj": ADJECTIVES,
        "noun": NOUNS,
        "verb": VERBS,
        "adv": ADVERBS,
        "name": NAMES,
        "season": _SEASONS,
    }
    template = rng.choice(_ESSAY_TEMPLATES)
    sentence = _SLOT.sub(lambda m: rng.choice(pools[m.group(1)]), template)
    return _A_VOWEL.sub(r"\1n ", sentence)


class WordStream:
    """The words of an essay haystack, produced on demand: a text file read once and cycled
    (RULER uses long essays; cycling keeps any length reachable), or generated sentences."""

    def __init__(self, words: Iterator[str]) -> None:
        self._source = words
        self._words: list[str] = []

    @classmethod
    def generated(cls, seed: int) -> WordStream:
        """Essay-like sentences from a seeded template generator."""
        rng = random.Random(f"essay:{seed}")
        sentences = (essay_sentence(rng) for _ in itertools.count())
        return cls(word for sentence in sentences for word in sentence.split())

    @classmethod
    def from_file(cls, path: str | Path) -> WordStream:
        """The whitespace-separated words of a UTF-8 text file, repeated as often as needed."""
        try:
            words = Path(path).read_text(encoding="utf-8").split()
        except OSError as exc:
            raise UsageError(f"cannot read haystack file {path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise UsageError(f"haystack file {path} is not UTF-8 text") from exc
        if not words:
            raise UsageError(f"haystack file {path} has no words")
        return cls(itertools.cycle(words))

    def take(self, n: int) -> list[str]:
        """The first ``n`` words (the same prefix whatever ``n``)."""
        if n > len(self._words):
            self._words.extend(itertools.islice(self._source, n - len(self._words)))
        return self._words[:n]

    def sentences(self, n_words: int) -> list[str]:
        """The first ``n_words`` words split into sentences at sentence-ending punctuation."""
        text = " ".join(self.take(n_words))
        return [s for s in _SENTENCE_END.split(text) if s]


class LazyShuffle:
    """A seeded random permutation of ``range(n)``, drawn only as far as it is read (a lazy
    Fisher-Yates shuffle): item ``i`` depends on the seed alone, however far one reads."""

    def __init__(self, n: int, rng: random.Random) -> None:
        self.n = n
        self._rng = rng
        self._swaps: dict[int, int] = {}
        self._drawn: list[int] = []

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(i)
        while len(self._drawn) <= i:
            k = len(self._drawn)
            j = self._rng.randrange(k, self.n)
            self._drawn.append(self._swaps.get(j, j))
            self._swaps[j] = self._swaps.pop(k, k)
        return self._drawn[i]


def noise_sentences(n: int) -> list[str]:
    """The first ``n`` sentences of RULER's noise, repeated."""
    return [NOISE_SENTENCES[i % len(NOISE_SENTENCES)] for i in range(n)]


def lines_of(sentences: Sequence[str], per_line: int = len(NOISE_SENTENCES)) -> list[str]:
    """Sentences grouped into lines; with noise each full line is RULER's noise paragraph."""
    return [" ".join(sentences[i : i + per_line]) for i in range(0, len(sentences), per_line)]


def insert_at(units: Sequence[str], items: Sequence[tuple[int, str]]) -> list[str]:
    """``units`` with each ``(position, text)`` placed before ``units[position]`` (at the end
    for ``len(units)``); items sharing a position keep their given order."""
    out: list[str] = []
    pending = sorted(items, key=lambda item: item[0])
    j = 0
    for pos, unit in enumerate(units):
        while j < len(pending) and pending[j][0] <= pos:
            out.append(pending[j][1])
            j += 1
        out.append(unit)
    out.extend(text for _, text in pending[j:])
    return out


def random_number(rng: random.Random) -> str:
    """A random 7-digit number, as RULER's needles carry."""
    return str(rng.randint(1_000_000, 9_999_999))


def random_uuid(rng: random.Random) -> str:
    """A random version-4 UUID drawn from ``rng`` (reproducible, unlike ``uuid.uuid4``)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def random_word_key(rng: random.Random) -> str:
    """An ``adjective-noun`` key, RULER's "words" needle keys."""
    return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"
