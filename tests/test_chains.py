"""Reversed two-hop chains (issue 28): the fact before the bridge that makes it matter."""

from __future__ import annotations

import re

import pytest

from longread.data.chains import (
    ATTRIBUTES,
    BRIDGES,
    COLOURS,
    FACTS,
    OBJECTS,
    PLACE_KINDS,
    QUESTIONS,
    build_chains,
)
from longread.data.records import Sample
from longread.errors import UsageError

from .text_helpers import RegexTokenizer

PLACE = re.compile(rf"\b(?:{'|'.join(PLACE_KINDS)}) [A-Z][a-z]+\b")


def test_a_reversed_chain_states_the_fact_before_the_bridge_and_asks_only_about_the_item():
    """A forward memory that keeps what the question names has nothing to go on when the fact
    goes by: the question names neither the place nor the code."""
    for sample in build_chains(3000, 6, 0, RegexTokenizer()):
        fact, bridge = sample.meta["evidence"]
        place, (code,) = sample.meta["bridge_entity"], sample.answers
        assert sample.context.index(fact) < sample.context.index(bridge)
        assert code in fact and place in fact and place in bridge
        assert sample.meta["item"] in bridge and sample.meta["item"] in sample.question
        assert place not in sample.question and code not in sample.question
        # the hop a rereading reader asks names the place, and it is answered by the fact
        assert place in sample.meta["sub_question"] and "{" not in sample.meta["sub_question"]
        assert sample.meta["fact_depth"] < sample.meta["bridge_depth"]


def test_forward_order_is_the_control_with_the_bridge_first():
    for sample in build_chains(3000, 4, 0, RegexTokenizer(), order="forward"):
        fact, bridge = sample.meta["evidence"]
        assert sample.context.index(bridge) < sample.context.index(fact)
        assert sample.id.startswith("chains_forward-3000-")


def test_distractor_chains_name_other_places_with_codes_of_the_same_kind():
    """Keeping every code is no shortcut: each distractor place has a code of the kind asked."""
    for distractors in (0, 3):
        for sample in build_chains(3000, 3, 1, RegexTokenizer(), distractors=distractors):
            places = set(PLACE.findall(sample.context))
            assert len(places) == 1 + distractors
            codes = set(re.findall(r"\b\d{7}\b", sample.context))
            assert sample.answers[0] in codes and len(codes) == 1 + distractors


def _first_code_is_the_answer(sample: Sample) -> bool:
    return re.findall(r"\b\d{7}\b", sample.context)[0] == sample.answers[0]


def _sentence_at(text: str, index: int) -> str:
    return text[text.rfind(".", 0, index) + 1 : text.find(".", index)]


def test_distractor_chains_follow_the_sample_order_so_the_first_code_is_no_shortcut():
    """In a reversed sample every chain states its fact (the place's code) before its bridge,
    so the asked fact is not early more often than the others and keeping the first code
    seen answers about a quarter of them. With mixed orders (the sets of stops 59-61) the
    asked fact is always early, a distractor's half the time: about half are answered so."""
    same = build_chains(3000, 40, 3, RegexTokenizer())
    for sample in same:
        for place in set(PLACE.findall(sample.context)):
            first_mention = _sentence_at(sample.context, sample.context.index(place))
            assert re.search(r"\b\d{7}\b", first_mention), (sample.id, place)
    mixed = build_chains(3000, 40, 3, RegexTokenizer(), distractor_order="mixed")
    first_same = sum(map(_first_code_is_the_answer, same))
    first_mixed = sum(map(_first_code_is_the_answer, mixed))
    assert first_same <= 40 // 3 < first_mixed


def test_the_two_distractor_orders_never_share_a_report_table():
    """A result on the easier mixed set must not pool with one on the same-order set."""
    from longread.eval.runner import dataset_label

    (same,) = build_chains(2000, 1, 3, RegexTokenizer())
    (mixed,) = build_chains(2000, 1, 3, RegexTokenizer(), distractor_order="mixed")
    (alone,) = build_chains(2000, 1, 3, RegexTokenizer(), distractors=0)
    assert (
        dataset_label(same.meta) == "chains/chains_reversed (wording train, distractor_order same)"
    )
    # mixed sets keep the label of every set made before the option, all of them mixed
    assert dataset_label(mixed.meta) == "chains/chains_reversed (wording train)"
    # with no other chain there is no order to tell apart
    assert dataset_label(alone.meta) == "chains/chains_reversed (wording train)"


def test_held_out_templates_never_appear_in_training_samples_and_back():
    """The unseen-wording evaluation is unseen only if no training sample uses its sentences."""
    train = build_chains(2000, 20, 2, RegexTokenizer())
    held = build_chains(2000, 20, 2, RegexTokenizer(), wording="heldout")
    for samples, other in ((train, "heldout"), (held, "train")):
        for sample in samples:
            for template in (*FACTS[other], *BRIDGES[other], *QUESTIONS[other]):
                pattern = template_pattern(template)
                assert not pattern.search(sample.context)
                assert not pattern.search(sample.question)


def template_pattern(template: str) -> re.Pattern[str]:
    """A template as a pattern over the values its fields can take, e.g. "The {item} was sent
    to {place}." matches "The amber parcel was sent to Dock Zulu." (in any case)."""
    fields = {
        "attribute": "|".join(ATTRIBUTES),
        "place": PLACE.pattern,
        "value": r"\d{7}",
        "item": rf"(?:{'|'.join(COLOURS)}) (?:{'|'.join(OBJECTS)})",
    }
    parts = re.split(r"\{(\w+)\}", template)
    regex = "".join(
        f"(?:{fields[part]})" if i % 2 else re.escape(part) for i, part in enumerate(parts)
    )
    return re.compile(regex, re.IGNORECASE)


def test_template_pattern_finds_the_sentences_it_describes():
    (sample,) = build_chains(2000, 1, 3, RegexTokenizer())
    fact, bridge = sample.meta["evidence"]
    assert any(template_pattern(t).fullmatch(fact) for t in FACTS["train"])
    assert any(template_pattern(t).fullmatch(bridge) for t in BRIDGES["train"])


def test_sets_are_fitted_to_length_and_rebuilt_the_same_for_a_seed():
    first = build_chains(4000, 3, 5, RegexTokenizer(), haystack="noise")
    again = build_chains(4000, 3, 5, RegexTokenizer(), haystack="noise")
    other = build_chains(4000, 3, 6, RegexTokenizer(), haystack="noise")
    assert [s.context for s in first] == [s.context for s in again]
    assert [s.answers for s in first] != [s.answers for s in other]
    assert all(0.99 * 4000 <= s.meta["tokens"] <= 4000 for s in first)
    assert {s.meta["dataset"] for s in first} == {"chains"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"order": "sideways"}, "unknown chain order"),
        ({"wording": "fancy"}, "unknown chain wording"),
        ({"haystack": "needles"}, "not needles"),
        ({"distractors": 9}, "between 0 and 8"),
        ({"distractor_order": "shuffled"}, "unknown distractor order"),
    ],
)
def test_chain_refusals(kwargs, message):
    with pytest.raises(UsageError, match=message):
        build_chains(2000, 1, 0, RegexTokenizer(), **kwargs)
