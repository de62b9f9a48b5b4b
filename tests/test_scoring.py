"""Scoring (ALGORITHMS.md section 5). Every expected value below is worked out by hand."""

import json

import pytest

from longread.agents.answer import extract_all_boxed
from longread.eval.scoring import (
    SCORERS,
    Score,
    exact_match,
    f1,
    normalize_answer,
    score_answer,
    strict_match,
    string_match_all,
    string_match_part,
    sub_em,
    word_recall,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("U.S.A.", "usa"),  # punctuation is deleted, not spaced, so this equals "USA"
        ("  Hello,   World! ", "hello world"),
        ("An apple a day", "apple day"),
        ("theory anthem", "theory anthem"),  # articles only as whole words
        ("“Paris” — France", "paris france"),  # Unicode quotes and dashes count as punctuation
        ("snake_case", "snakecase"),
        ("", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("The Eiffel Tower", ["eiffel tower"], 1.0),
        ("U.S.A.", ["USA"], 1.0),
        ("PARIS", ["paris"], 1.0),
        ("Paris, France", ["Paris"], 0.0),
        ("NYC", ["New York City", "NYC"], 1.0),  # any alias
        ("the", ["a"], 0.0),  # both normalise to nothing: no match
        ("Paris", [], 0.0),
    ],
)
def test_exact_match(prediction, golds, expected):
    assert exact_match(prediction, golds) == expected


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("Paris", ["paris"], 1.0),
        # "paris france" vs "paris": P = 1/2, R = 1/1 -> 2PR/(P+R) = 2/3
        ("Paris France", ["Paris"], 2 / 3),
        # "big red dog" vs "red dog": P = 2/3, R = 2/2 -> (4/3)/(5/3) = 4/5
        ("the big red dog", ["a red dog"], 0.8),
        # repeated tokens count once each: "dog dog" vs "dog": P = 1/2, R = 1 -> 2/3
        ("dog dog", ["dog"], 2 / 3),
        # best alias: vs "new york city" P = R = 1/3 -> 1/3; vs "big apple" P = 2/3, R = 1 -> 4/5
        ("Big Apple city", ["New York City", "Big Apple"], 0.8),
        ("Berlin", ["Paris"], 0.0),
        ("", ["Paris"], 0.0),
        # yes/no/noanswer must match exactly, whichever side it is on
        ("yes it is", ["yes"], 0.0),
        ("yes", ["yes it is"], 0.0),
        ("no", ["yes"], 0.0),
        ("Yes.", ["yes"], 1.0),
        ("yes", ["yes it is", "Yes"], 1.0),
    ],
)
def test_f1(prediction, golds, expected):
    assert f1(prediction, golds) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("It is the Eiffel Tower in Paris", ["eiffel tower"], 1.0),
        ("Paris", ["Paris, France"], 0.0),  # the gold must be inside the prediction
        ("I don't know", ["no"], 1.0),  # the papers' substring test: "no" is in "know"
        ("Towering", ["tower"], 1.0),
        ("yes it is", ["yes"], 1.0),  # no yes/no rule for containment
        ("", ["Paris"], 0.0),  # an empty prediction never matches
        ("The", ["Paris"], 0.0),  # nor one that normalises to nothing
        ("Paris", ["", "the", "Paris"], 1.0),
        ("anything", ["", "The"], 0.0),  # empty gold aliases are ignored, not matched
    ],
)
def test_sub_em(prediction, golds, expected):
    assert sub_em(prediction, golds) == expected


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("I don't know", ["no"], 0.0),  # "no" is not a word of "i dont know"
        ("Towering", ["tower"], 0.0),
        ("It is the Eiffel Tower in Paris", ["eiffel tower"], 1.0),
    ],
)
def test_sub_em_whole_words_option(prediction, golds, expected):
    assert sub_em(prediction, golds, whole_words=True) == expected


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("New York", ["new york"], 1.0),
        ("NewYork", ["New York"], 1.0),
        ("new  york\n", ["New York"], 1.0),
        ("New York City", ["New York"], 0.0),
        ("U.S.A.", ["USA"], 0.0),  # strict keeps punctuation
        ("The Eiffel Tower", ["Eiffel Tower"], 0.0),  # and articles
        ("Paris", ["London", "paris"], 1.0),
        ("", [""], 0.0),
    ],
)
def test_strict_match(prediction, golds, expected):
    assert strict_match(prediction, golds) == expected


@pytest.mark.parametrize(
    ("prediction", "golds", "match_all", "match_part"),
    [
        ("The numbers are 123 and 456.", ["123", "456", "789"], 200 / 3, 100.0),
        ("123, 456 and 789", ["123", "456", "789"], 100.0, 100.0),
        ("nothing useful", ["123", "456"], 0.0, 0.0),
        ("The MAGIC key", ["magic KEY"], 100.0, 100.0),  # case-insensitive
        ("anything", [], 0.0, 0.0),
    ],
)
def test_ruler_string_match(prediction, golds, match_all, match_part):
    assert string_match_all(prediction, golds) == pytest.approx(match_all)
    assert string_match_part(prediction, golds) == match_part


@pytest.mark.parametrize(
    ("text", "golds", "expected"),
    [
        ("The tower in Paris is the Eiffel Tower.", ["Eiffel Tower"], 1.0),
        ("Gustave Eiffel built it", ["Eiffel Tower"], 0.5),  # 1 of {eiffel, tower}
        ("Paris", ["Eiffel Tower", "Paris, France"], 0.5),  # best alias: 1 of {paris, france}
        ("york", ["New York, New York"], 0.5),  # distinct words: 1 of {new, york}
        ("U.S.A. forces", ["USA"], 1.0),
        ("towering", ["tower"], 0.0),  # words, not substrings
        ("nothing here", ["Eiffel Tower"], 0.0),
        ("memory", ["the"], 0.0),  # no usable alias
    ],
)
def test_word_recall(text, golds, expected):
    assert word_recall(text, golds) == expected


def test_boxed_answer_scores_all_metrics():
    score = score_answer("So it is \\boxed{The Eiffel Tower}.", ["Eiffel Tower"])
    assert score == Score(
        prediction="The Eiffel Tower",
        boxed=True,
        null=False,
        em=1.0,
        f1=1.0,
        sub_em=1.0,
        strict=0.0,  # strict keeps the article: "theeiffeltower" != "eiffeltower"
        match_all=None,
        match_part=None,
    )


def test_last_box_after_thinking_is_the_answer():
    reply = "<think>maybe \\boxed{London}</think>First \\boxed{Rome}, no: \\boxed{Paris}."
    score = score_answer(reply, ["paris"])
    assert (score.prediction, score.em, score.strict) == ("Paris", 1.0, 1.0)


@pytest.mark.parametrize(
    ("reply", "prediction"),
    [
        ("\\boxed{\\text{Paris}}", "Paris"),
        ("\\boxed{\\textbf{\\text{New York}}}", "New York"),  # nested wrappers peel off
        ("\\boxed{\\text{New} \\text{York}}", "New York"),
        ("\\boxed{\\mathrm{ Paris }}", "Paris"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),  # other LaTeX is left alone
    ],
)
def test_latex_text_wrappers_are_stripped(reply, prediction):
    assert score_answer(reply, ["x"]).prediction == prediction


def test_text_wrapper_earns_the_strict_reward():
    score = score_answer("\\boxed{\\text{New York}}", ["new york"])
    assert (score.em, score.strict) == (1.0, 1.0)


def test_unboxed_reply_is_scored_leniently_on_its_whole_text():
    score = score_answer("The answer is Paris.", ["Paris"])
    assert score.prediction == "The answer is Paris."
    assert (score.boxed, score.null) == (False, False)
    assert score.em == 0.0
    # "answer is paris" vs "paris": P = 1/3, R = 1 -> (2/3)/(4/3) = 1/2
    assert score.f1 == pytest.approx(0.5)
    assert score.sub_em == 1.0
    assert score.strict == 0.0


def test_unboxed_exact_answer_still_gets_no_strict_reward():
    score = score_answer("Paris", ["Paris"])
    assert (score.boxed, score.em, score.strict) == (False, 1.0, 0.0)


@pytest.mark.parametrize(
    ("reply", "boxed"),
    [
        (None, False),  # failed run
        ("", False),
        ("   \n\t", False),
        ("<think>reasoned until the token cap", False),
        ("The answer is \\boxed{}", True),
        ("\\boxed{ \\text{} }", True),
    ],
)
@pytest.mark.parametrize("kind", ["qa", "ruler"])
def test_empty_output_is_a_null_scored_zero_everywhere(reply, boxed, kind):
    score = score_answer(reply, ["Paris"], kind=kind)
    assert (score.prediction, score.boxed, score.null) == (None, boxed, True)
    assert (score.em, score.f1, score.sub_em, score.strict) == (0.0, 0.0, 0.0, 0.0)
    expected_ruler = (0.0, 0.0) if kind == "ruler" else (None, None)
    assert (score.match_all, score.match_part) == expected_ruler


def test_ruler_kind_adds_string_match():
    score = score_answer("\\boxed{123, 456}", ["123", "456", "789"], kind="ruler")
    assert score.prediction == "123, 456"
    assert score.match_all == pytest.approx(200 / 3)  # 2 of 3 needles
    assert score.match_part == 100.0
    # all three needles are required: "789" is missing, so no EM, sub-EM or strict credit
    assert (score.em, score.sub_em, score.strict) == (0.0, 0.0, 0.0)
    # "123 456" vs all needles "123 456 789": P = 2/2, R = 2/3 -> (4/3)/(5/3) = 4/5
    assert score.f1 == pytest.approx(0.8)


def test_ruler_kind_without_box_matches_the_whole_text():
    score = score_answer("The numbers are 123 and 789.", ["123", "456", "789"], kind="ruler")
    assert (score.boxed, score.match_part) == (False, 100.0)
    assert score.match_all == pytest.approx(200 / 3)


@pytest.mark.parametrize(
    ("text", "boxes"),
    [
        ("", []),
        ("no box here", []),
        ("\\boxed{a} then \\boxed{ b }", ["a", "b"]),
        ("\\boxed{\\frac{1}{2}} and \\fbox{c}", ["\\frac{1}{2}", "c"]),  # braces balance
        ("\\boxed{\\text{New York}}", ["\\text{New York}"]),  # raw: LaTeX is peeled later
        ("\\boxed{a} \\boxed{b", ["a"]),  # an unclosed box may be cut: skipped
        ("\\boxed{x \\boxed{y}", ["y"]),  # but a closed box inside it still counts
        ("\\boxed{\\boxed{a}, \\boxed{b}}", ["a", "b"]),  # a box of boxes gives the inner ones
    ],
)
def test_extract_all_boxed(text, boxes):
    assert extract_all_boxed(text) == boxes


MULTIVALUE = ["1234567", "2345678", "3456789", "4567890"]  # niah_multivalue: 4 needles


def test_ruler_multivalue_answer_over_several_boxes_gets_full_credit():
    reply = "\\boxed{1234567}\n\\boxed{2345678}\n\\boxed{3456789}\n\\boxed{4567890}"
    score = score_answer(reply, MULTIVALUE, kind="ruler")
    assert (score.prediction, score.boxed, score.null) == ("4567890", True, False)  # last box
    assert (score.match_all, score.match_part) == (100.0, 100.0)  # 4 of 4 needles
    assert (score.em, score.f1, score.sub_em, score.strict) == (1.0, 1.0, 1.0, 1.0)


def test_ruler_two_of_four_values_gets_half():
    reply = "The first is \\boxed{1234567}, then \\boxed{2345678}."
    score = score_answer(reply, MULTIVALUE, kind="ruler")
    assert (score.match_all, score.match_part) == (50.0, 100.0)  # 2 of 4 needles
    assert (score.em, score.sub_em, score.strict) == (0.0, 0.0, 0.0)
    # "1234567 2345678" vs the 4 needles: P = 2/2, R = 2/4 -> 1/(3/2) = 2/3
    assert score.f1 == pytest.approx(2 / 3)


def test_ruler_one_boxed_needle_of_four_is_not_a_match():
    score = score_answer("\\boxed{1234567}", MULTIVALUE, kind="ruler")
    assert (score.match_all, score.match_part) == (25.0, 100.0)  # 1 of 4 needles
    assert (score.em, score.sub_em, score.strict) == (0.0, 0.0, 0.0)
    # "1234567" vs the 4 needles: P = 1, R = 1/4 -> (1/2)/(5/4) = 2/5
    assert score.f1 == pytest.approx(0.4)


def test_ruler_values_in_the_text_but_one_in_the_box():
    reply = "They are 1234567, 2345678, 3456789 and 4567890. \\boxed{1234567}"
    score = score_answer(reply, MULTIVALUE, kind="ruler")
    assert (score.match_all, score.match_part) == (100.0, 100.0)  # RULER reads the whole output
    assert (score.em, score.sub_em, score.strict) == (0.0, 0.0, 0.0)  # the box holds one needle


def test_ruler_unboxed_multivalue_answer():
    reply = "The special magic numbers are 1234567, 2345678, 3456789 and 4567890."
    score = score_answer(reply, MULTIVALUE, kind="ruler")
    assert (score.boxed, score.match_all, score.match_part) == (False, 100.0, 100.0)
    assert score.sub_em == 1.0  # every needle is in the normalised text
    # parts "the special magic numbers are 1234567", "2345678", "3456789 and 4567890" != needles
    assert (score.em, score.strict) == (0.0, 0.0)


def test_ruler_unboxed_value_earns_ruler_credit_despite_a_box_elsewhere():
    reply = "The special magic number is 7654321.\n\\boxed{see above}"
    score = score_answer(reply, ["7654321"], kind="ruler")
    assert score.prediction == "see above"
    assert (score.match_all, score.match_part) == (100.0, 100.0)
    # single needle: the QA metrics still judge the last box only, as for QA
    assert (score.em, score.f1, score.sub_em, score.strict) == (0.0, 0.0, 0.0, 0.0)


def test_ruler_values_in_thinking_do_not_count():
    reply = "<think>\\boxed{1234567} \\boxed{2345678}</think>So: \\boxed{1234567}"
    score = score_answer(reply, ["1234567", "2345678"], kind="ruler")
    assert (score.match_all, score.match_part) == (50.0, 100.0)
    assert (score.em, score.sub_em, score.strict) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("reply", "golds", "em", "sub_em", "strict"),
    [
        # one box, parts split at commas, in any order; a list's trailing "and" is dropped
        ("\\boxed{4567890, 3456789, 2345678, and 1234567}", MULTIVALUE, 1.0, 1.0, 1.0),
        ("\\boxed{1234567; 2345678\n3456789, 4567890}", MULTIVALUE, 1.0, 1.0, 1.0),
        # boxes may hold lists too; a value given twice is still one value
        ("\\boxed{11} \\boxed{22, 11}", ["11", "22"], 1.0, 1.0, 1.0),
        ("\\boxed{\\text{Apple}, BANANA}", ["apple", "banana"], 1.0, 1.0, 1.0),
        # an extra value: sub-EM still holds, EM and strict need the set of needles exactly
        ("\\boxed{11, 22, 33}", ["11", "22"], 0.0, 1.0, 0.0),
        # strict keeps punctuation, EM normalises it away
        ("\\boxed{USA, UK}", ["U.S.A.", "U.K."], 1.0, 1.0, 0.0),
        # without a box the reply's parts are judged leniently; strict needs a box
        ("11, 22", ["11", "22"], 1.0, 1.0, 0.0),
        # both values, but in one part: contained, not equal
        ("\\boxed{11 and 22}", ["11", "22"], 0.0, 1.0, 0.0),
    ],
)
def test_ruler_all_needles_rule(reply, golds, em, sub_em, strict):
    score = score_answer(reply, golds, kind="ruler")
    assert (score.em, score.sub_em, score.strict) == (em, sub_em, strict)


@pytest.mark.parametrize(
    ("reply", "golds", "expected"),
    [
        # (em, f1, sub_em, strict, match_all, match_part), as the QA scorer gives for one alias
        ("\\boxed{The Eiffel Tower}", ["Eiffel Tower"], (1.0, 1.0, 1.0, 0.0, 100.0, 100.0)),
        # "7654321 is key" vs "7654321": P = 1/3, R = 1 -> (2/3)/(4/3) = 1/2
        ("\\boxed{7654321 is the key}", ["7654321"], (0.0, 0.5, 1.0, 0.0, 100.0, 100.0)),
        ("\\boxed{7654321}", ["7654321"], (1.0, 1.0, 1.0, 1.0, 100.0, 100.0)),
        ("\\boxed{1234567}", ["7654321"], (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)),
        # the same needle listed twice is one needle
        ("\\boxed{11}", ["11", "11"], (1.0, 1.0, 1.0, 1.0, 100.0, 100.0)),
    ],
)
def test_ruler_single_needle_keeps_the_qa_metrics(reply, golds, expected):
    score = score_answer(reply, golds, kind="ruler")
    got = (score.em, score.f1, score.sub_em, score.strict, score.match_all, score.match_part)
    assert got == pytest.approx(expected)


def test_score_to_dict_is_json_ready():
    data = score_answer("\\boxed{Paris}", ["Paris"]).to_dict()
    assert data == {
        "prediction": "Paris",
        "boxed": True,
        "null": False,
        "em": 1.0,
        "f1": 1.0,
        "sub_em": 1.0,
        "strict": 1.0,
        "match_all": None,
        "match_part": None,
    }
    assert json.loads(json.dumps(data)) == data


def test_scorers_table_is_what_score_answer_uses():
    assert set(SCORERS) == {"qa", "ruler"}
    reply, golds = "\\boxed{123}", ["123", "456"]
    assert SCORERS["ruler"](reply, golds) == score_answer(reply, golds, kind="ruler")
    assert SCORERS["qa"](reply, golds) == score_answer(reply, golds)


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="unknown scoring kind 'mcq'"):
        score_answer("\\boxed{A}", ["A"], kind="mcq")


def test_empty_gold_list_is_rejected():
    with pytest.raises(ValueError, match="empty list of gold answers"):
        score_answer("\\boxed{A}", [])
