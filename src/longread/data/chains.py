"""Two-hop chains, reversed (issue 28): a task a forward memory cannot do by keeping only
what the question names.

The target fact comes first ("The door code of Warehouse Delta is 4720519."), the bridge
that ties the question's item to that place comes later ("The amber parcel was sent to
Warehouse Delta."), and the question names only the item ("What is the door code of the
place the amber parcel was sent to?"). When the fact goes by, nothing says it matters: a
memory that keeps only what the question names drops it. A reader that asks the sub-question
("What is the door code of Warehouse Delta?") and rereads, or recalls its earlier notes, finds
it. Distractor chains (other items, places and codes, the same kind of code, in either order)
sit in the same document, so keeping every code is no shortcut either.

``order="forward"`` puts the bridge first: the control a forward memory can do. The wording
is drawn per sample from training templates, or with ``wording="heldout"`` from templates no
training set uses (the unseen-wording evaluation). Lengths are fitted like RULER's tasks
(``ruler.fit_draft``), in the same haystacks.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ..errors import UsageError
from ..text.tokenizer import Tokenizer
from ._draft import Draft, Shared
from ._haystack import random_number
from ._niah import _text_renderer
from .records import Sample
from .ruler import fit_draft, make_shared

ORDERS = ("reversed", "forward")
# The distractor chains' order: "same" as the sample's own chain; "mixed" draws each one's
# (the sets of stops 59-61). Mixed reversed samples have a shortcut: the asked chain's fact
# always lies in the first half, a distractor's only half the time, so the document's first
# code is the answer in about 47% of them (E[1/(1+Bin(3, 0.5))] with 3 distractors), and a
# reader that keeps the first code it sees, never reading a bridge, scores that.
DISTRACTOR_ORDERS = ("same", "mixed")
CHAIN_WORDINGS = ("train", "heldout")
COLOURS = ("amber", "crimson", "teal", "ivory", "olive", "violet", "silver", "copper",
           "scarlet", "indigo", "golden", "jade", "maroon", "cobalt")  # fmt: skip
OBJECTS = ("parcel", "crate", "envelope", "suitcase", "package", "trunk", "box", "satchel",
           "canister", "folio")  # fmt: skip
PLACE_KINDS = ("Warehouse", "Depot", "Hangar", "Station", "Annex", "Terminal", "Outpost",
               "Dock", "Vault", "Yard")  # fmt: skip
PLACE_NAMES = ("Alpha", "Bravo", "Delta", "Echo", "Kilo", "Lima", "Oscar", "Sierra", "Tango",
               "Victor", "Zulu", "Juliet", "Quebec", "Romeo")  # fmt: skip
ATTRIBUTES = ("door code", "gate code", "alarm code", "access code")

# {place}, {attribute}, {value}; {item} is "colour object" (the article is the template's).
FACTS = {
    "train": (
        "The {attribute} of {place} is {value}.",
        "For {place}, the {attribute} was set to {value}.",
        "Staff at {place} use {value} as the {attribute}.",
        "We noted that the {attribute} for {place} is {value}.",
        "{place} has the {attribute} {value}.",
    ),
    "heldout": (
        "Anyone arriving at {place} keys in {value}, the {attribute} posted by the entrance.",
        "Since the spring refit, {value} has served as the {attribute} at {place}.",
    ),
}
BRIDGES = {
    "train": (
        "The {item} was sent to {place}.",
        "We shipped the {item} to {place} on Monday.",
        "The {item} ended up at {place}.",
        "Records show that the {item} went to {place}.",
        "A courier took the {item} to {place}.",
    ),
    "heldout": (
        "{place} took delivery of the {item} after a long delay.",
        "Nobody expected the {item} to be stored at {place}, but that is where it stayed.",
    ),
}
QUESTIONS = {
    "train": (
        "What is the {attribute} of the place the {item} was sent to?",
        "The {item} went to one place. What is the {attribute} of that place?",
        "Which {attribute} belongs to the place where the {item} ended up?",
    ),
    "heldout": ("What {attribute} would you need to enter the place now holding the {item}?",),
}
SUB_QUESTION = "What is the {attribute} of {place}?"  # the hop a rereading reader asks


def build_chains(
    length_tokens: int,
    n: int,
    seed: int,
    tokenizer: Tokenizer,
    haystack: str | None = None,
    order: str = "reversed",
    wording: str = "train",
    distractors: int = 3,
    distractor_order: str = "same",
) -> list[Sample]:
    """``n`` two-hop chain samples at ``length_tokens`` (context + question tokens), in
    ``haystack`` (noise, noise-paragraphs, essay (the default) or a text file), each with
    ``distractors`` other chains beside its own, in ``distractor_order``
    (``DISTRACTOR_ORDERS``)."""
    if order not in ORDERS:
        raise UsageError(f"unknown chain order {order!r}; expected one of {', '.join(ORDERS)}")
    if wording not in CHAIN_WORDINGS:
        raise UsageError(f"unknown chain wording {wording!r}; expected train or heldout")
    if not 0 <= distractors <= 8:
        raise UsageError("distractors: between 0 and 8 other chains")
    if distractor_order not in DISTRACTOR_ORDERS:
        raise UsageError(f"unknown distractor order {distractor_order!r}; expected same or mixed")
    if haystack == "needles":
        raise UsageError("chains take a noise, noise-paragraphs or essay haystack, not needles")
    task = f"chains_{order}"
    shared = make_shared(task, length_tokens, seed, haystack or "essay")
    samples: list[Sample] = []
    hint: int | None = None
    for i in range(n):
        rng = random.Random(f"chains:{order}:{seed}:{i}")
        draft = chain_draft(shared, rng, order, wording, distractors, distractor_order == "mixed")
        sample, hint = fit_draft(draft, task, i, shared, tokenizer, hint, dataset="chains")
        samples.append(sample)
    return samples


def chain_draft(
    shared: Shared, rng: random.Random, order: str, wording: str, distractors: int,
    mixed: bool = False,
) -> Draft:  # fmt: skip
    """One sample: its own chain (fact and bridge at their depths) and the distractors', in
    its order, or each in an order of its own when ``mixed``."""
    attribute = rng.choice(ATTRIBUTES)
    items = _distinct(rng, lambda: f"{rng.choice(COLOURS)} {rng.choice(OBJECTS)}", 1 + distractors)
    places = _distinct(
        rng, lambda: f"{rng.choice(PLACE_KINDS)} {rng.choice(PLACE_NAMES)}", 1 + distractors
    )
    values = _distinct(rng, lambda: random_number(rng), 1 + distractors)
    sentences: list[str] = []
    depths: list[float] = []
    chains = list(zip(items, places, values, strict=True))
    for k, (item, place, value) in enumerate(chains):
        fact = rng.choice(FACTS[wording]).format(attribute=attribute, place=place, value=value)
        bridge = rng.choice(BRIDGES[wording]).format(item=item, place=place)
        reverse = rng.random() < 0.5 if k > 0 and mixed else order == "reversed"
        first, second = _depths(rng)
        sentences += [fact, bridge]
        depths += [first, second] if reverse else [second, first]  # the fact's, the bridge's
    evidence, own = sentences[:2], depths[:2]
    kind = shared.haystack or "essay"
    question = rng.choice(QUESTIONS[wording]).format(attribute=attribute, item=items[0])
    meta = {
        "haystack": kind,
        "order": order,
        "wording": wording,
        "item": items[0],
        "attribute": attribute,  # the kind of code every chain of the sample states
        "bridge_entity": places[0],
        "evidence": evidence,  # the fact, then the bridge
        "fact_depth": own[0],
        "bridge_depth": own[1],
        "sub_question": SUB_QUESTION.format(attribute=attribute, place=places[0]),
        "distractors": distractors,
    }
    if distractors and not mixed:
        # Reports tell the orders apart: with mixed orders a reversed sample's first code is
        # the answer about half the time, a shortcut the same order does not give. Mixed sets
        # (every set before stop 62, the training sets among them) carry no key, so their
        # files, and the data hashes of the training runs made on them, stay as they were.
        meta["distractor_order"] = "same"
    return Draft(question, [values[0]], _text_renderer(kind, shared, sentences, depths), meta)


def _depths(rng: random.Random) -> tuple[float, float]:
    """Where a chain's first and second sentence go: far apart, the first in the first half."""
    first = rng.uniform(0.05, 0.45)
    return first, rng.uniform(first + 0.3, 0.95)


def _distinct(rng: random.Random, draw: Callable[[], str], count: int) -> list[str]:
    out: list[str] = []
    while len(out) < count:
        value = draw()
        if value not in out:
            out.append(value)
    return out
