"""The memory diff: what a rewrite kept, added and dropped, word by word."""

from __future__ import annotations

from longread.view.diff import word_diff


def ops(diff):
    return [(s.op, s.text) for s in diff.segments]


def test_inserted_and_deleted_words_are_marked():
    diff = word_diff(
        "Ada was a painter. She lived in Rome.", "Ada was a painter. She was born in Turin."
    )
    assert ops(diff) == [
        ("equal", "Ada was a painter. She "),
        ("delete", "lived "),
        ("insert", "was born "),
        ("equal", "in "),
        ("delete", "Rome."),
        ("insert", "Turin."),
    ]
    assert (diff.inserted, diff.deleted, diff.words) == (3, 2, 9)


def test_a_dropped_line_keeps_its_line_break_and_the_kept_line_stays_on_its_own():
    diff = word_diff("Fact 1 is Tom.\nFact 2 is Felix.", "Fact 2 is Felix.\nFact 3 is Kit.")
    assert ops(diff) == [
        ("delete", "Fact 1 is Tom.\n"),
        ("equal", "Fact 2 is Felix.\n"),
        ("insert", "Fact 3 is Kit."),
    ]


def test_whitespace_alone_is_no_change():
    diff = word_diff("one two\nthree", "one  two three\n")
    assert not diff.changed
    assert [s.op for s in diff.segments] == ["equal"]


def test_the_first_memory_is_all_insertions():
    diff = word_diff("", "The number is 4720519.")
    assert ops(diff) == [("insert", "The number is 4720519.")]
    assert diff.inserted == diff.words == 4


def test_a_long_repetitive_memory_shows_only_what_changed():
    # Small models repeat filler; with difflib's autojunk (on past 200 words) the frequent
    # words would be junk and the kept memory would show as rewritten.
    old = "The lesson of the mountain is simple. " * 60
    new = old.replace("mountain", "river", 1)
    diff = word_diff(old, new)
    assert (diff.inserted, diff.deleted) == (1, 1)
    assert ("delete", "mountain ") in ops(diff)
    assert ("insert", "river ") in ops(diff)
