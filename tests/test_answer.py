import pytest

from longread.agents.answer import extract_boxed, strip_think


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is \\boxed{Paris}.", "Paris"),
        ("first \\boxed{1} then \\boxed{2}", "2"),  # the last box wins
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),  # nested braces kept
        ("\\boxed{ 4720519 }", "4720519"),
        ("\\fbox{yes}", "yes"),
        ("no box here", None),
        ("\\boxed{cut mid-answ", None),  # unclosed box is not an answer
        ("\\boxed{good} and \\boxed{unclosed", "good"),  # falls back to the last closed box
        ("\\boxed{}", ""),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>hmm</think>Memory: 42", "Memory: 42"),
        ("<think>a\nb</think>\nx<think>c</think>y", "xy"),
        ("reasoning the template opened</think>final", "final"),
        ("kept<think>never closed", "kept"),
        ("  plain  ", "plain"),
    ],
)
def test_strip_think(text, expected):
    assert strip_think(text) == expected
