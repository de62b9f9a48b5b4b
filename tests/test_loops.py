"""Where a reply falls into a loop (llm/loops.py): the cut the embedded model and servers share."""

import pytest

from longread.llm.base import Completion
from longread.llm.loops import LOOP_BYTES, LOOP_PERIOD, LoopWatch, cut_loop, loop_end, stop_at_loop


def test_a_block_written_again_and_again_is_cut_once_it_repeats_for_loop_bytes():
    head, block = b"<update>The locker", b"_finally"
    text = head + block * 40
    end = loop_end(text)
    # the first copy, then LOOP_BYTES bytes each equal to the byte one block earlier
    assert end == len(head) + len(block) + LOOP_BYTES
    assert text[:end].startswith(head + block * 5)


@pytest.mark.parametrize(
    "text",
    [
        "The special magic number for old-pond is 9605461. " * 3,  # a sentence said 3 times
        "No previous memory",
        "ha" * (LOOP_BYTES // 2),  # one byte short of a loop
        "".join(f"{i} " for i in range(200)),  # counting: every block differs
    ],
)
def test_text_that_does_not_loop_is_left_whole(text):
    assert cut_loop(text) is None


def test_a_block_longer_than_the_period_limit_is_not_a_loop():
    # a sentence written to the cap is left to the cap: the watch is for short blocks
    block = b"The special magic number for old-pond mentioned in the text is 9605461. "
    assert len(block) > LOOP_PERIOD
    assert loop_end(block * 10) is None


@pytest.mark.parametrize("step", [1, 3, 7, 64])
def test_bytes_fed_in_pieces_cut_where_the_whole_text_is_cut(step):
    # the embedded model feeds a token's bytes at a time; a server's reply comes whole
    text = ("<update>Warehouse Delta " + "</<update>" * 30).encode()
    watch = LoopWatch()
    ends = {watch.feed(text[i : i + step]) for i in range(0, len(text), step)} - {None}
    assert ends == {loop_end(text)}


def test_a_loop_of_multibyte_characters_is_cut_to_whole_characters():
    cut = cut_loop("Zürich " + "é" * 200)
    assert cut is not None and cut.startswith("Zürich é") and set(cut[7:]) == {"é"}


def test_a_server_reply_is_cut_and_says_it_stopped_on_a_loop():
    looping = Completion("<update>x" + "ab" * 200, "length", 10, 256, 0.1)
    stop_at_loop(looping)
    assert looping.finish_reason == "loop" and looping.text == cut_loop("<update>x" + "ab" * 200)
    plain = Completion("<update>Ann wrote it.</update>", "stop", 10, 8, 0.1)
    stop_at_loop(plain)
    assert (plain.text, plain.finish_reason) == ("<update>Ann wrote it.</update>", "stop")
