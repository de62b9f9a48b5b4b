"""Where a reply has fallen into a loop: its tail one short block repeated over and over.

A small model that loses the thread of a format often writes one block to the token cap
(``finally_finally_finally...``, ``<update><update>...``). ``LoopWatch`` finds the point where
such a loop is certain, so that generation can end there (``SamplingParams.loop_stop``) instead
of decoding to the cap. It reads bytes (UTF-8), so that the embedded model, which watches the
text token by token, and a server's reply, cut after it came back, end at the same byte.
"""

from __future__ import annotations

from .base import Completion

# A loop is a tail whose last LOOP_BYTES bytes each equal the byte one period earlier, for a
# period of 1-LOOP_PERIOD bytes: at least 160 bytes (about 40-60 tokens) written again, so a
# word or a tag said a few times in a row is not one.
LOOP_PERIOD = 64
LOOP_BYTES = 160


class LoopWatch:
    """Fed a reply's bytes as they come, says where a loop of it became certain."""

    def __init__(self) -> None:
        self._bytes = bytearray()
        # _runs[p - 1]: how many bytes in a row, ending at the last, equal the byte p before
        self._runs = [0] * LOOP_PERIOD
        self.end: int | None = None  # the length of the reply kept once a loop is found

    def feed(self, more: bytes) -> int | None:
        """Take the reply's next bytes; the length to keep (through the byte that made the
        loop certain) once one is found, else None."""
        if self.end is not None:
            return self.end
        data, runs = self._bytes, self._runs
        for byte in more:
            data.append(byte)
            last = len(data) - 1
            for period in range(1, min(LOOP_PERIOD, last) + 1):
                if data[last - period] == byte:
                    runs[period - 1] += 1
                    if runs[period - 1] >= LOOP_BYTES:
                        self.end = len(data)
                        return self.end
                else:
                    runs[period - 1] = 0
        return None


def loop_end(text: bytes) -> int | None:
    """The length of ``text`` to keep when it loops (as ``LoopWatch`` fed it), else None."""
    return LoopWatch().feed(text)


def cut_loop(text: str) -> str | None:
    """``text`` ended where its loop became certain, or None when it does not loop."""
    raw = text.encode("utf-8")
    end = loop_end(raw)
    return None if end is None else raw[:end].decode("utf-8", errors="ignore")


def stop_at_loop(completion: Completion) -> None:
    """A whole reply (a server's) ended as ``SamplingParams.loop_stop`` ends it on the
    embedded model: cut where its loop became certain, finish_reason "loop". Its token ids,
    if recorded, stay those sampled."""
    cut = cut_loop(completion.text)
    if cut is not None:
        completion.text, completion.finish_reason = cut, "loop"
