"""Reading model replies: ``<think>`` stripping, ``\\boxed{...}`` answers, and memories.

One rule for each, shared by every agent, so one judge scores them all and no agent can lose
its memory in a way another would not.
"""

from __future__ import annotations

import re

from ..trace import (
    ANSWER_TRUNCATED,
    COPY_REPAIRED,
    MEMORY_KEPT,
    MEMORY_TRUNCATED,
    NO_BOXED_ANSWER,
    Step,
)

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_BOX_OPENERS = ("\\boxed{", "\\fbox{")


def strip_think(text: str) -> str:
    """Remove ``<think>...</think>`` blocks; an unclosed ``<think>`` drops everything after it,
    and a stray ``</think>`` (template opened the block) drops everything before it."""
    text = _THINK_BLOCK.sub("", text)
    if "</think>" in text.lower():
        text = text[text.lower().rindex("</think>") + len("</think>") :]
    if "<think>" in text.lower():
        text = text[: text.lower().index("<think>")]
    return text.strip()


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` with balanced braces, or None when there is none.

    Nested braces are kept (``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``); an unclosed box
    counts as no box, since its content may be cut mid-answer.
    """
    start = max(text.rfind(opener) for opener in _BOX_OPENERS)
    while start != -1:
        opener = next(o for o in _BOX_OPENERS if text.startswith(o, start))
        content = _balanced(text, start + len(opener))
        if content is not None:
            return content.strip()
        start = max(text.rfind(o, 0, start) for o in _BOX_OPENERS)
    return None


def _balanced(text: str, begin: int) -> str | None:
    """Text from ``begin`` up to the brace closing the one just before it, or None."""
    end = _box_content_end(text, begin)
    return None if end is None else text[begin:end]


def _box_content_end(text: str, begin: int) -> int | None:
    """Index of the brace closing the one just before ``begin``, or None if it never closes."""
    depth = 1
    for i in range(begin, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _next_box(text: str, pos: int) -> int | None:
    """Where the content of the first box opened at or after ``pos`` begins, or None."""
    starts = [i + len(o) for o in _BOX_OPENERS if (i := text.find(o, pos)) != -1]
    return min(starts, default=None)


def extract_all_boxed(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` (or ``\\fbox{...}``) in order, stripped, with
    balanced braces (``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``).

    Same reading as ``extract_boxed``, whose answer is the last item: an unclosed box is
    skipped, since its content may be cut mid-answer, though closed boxes inside it count; a box
    that holds boxes gives the inner ones, not itself.
    """
    boxes: list[str] = []
    pos = 0
    while (begin := _next_box(text, pos)) is not None:
        end = _box_content_end(text, begin)
        if end is None or any(o in text[begin:end] for o in _BOX_OPENERS):
            pos = begin  # unclosed, or a box of boxes: its closed inner boxes are the answers
            continue
        boxes.append(text[begin:end].strip())
        pos = end + 1
    return boxes


def read_answer(step: Step) -> Step:
    """Set the answer of a final call: its last \\boxed{} (else the whole reply, flagged
    ``no_boxed_answer``)."""
    reply = strip_think(step.reply)
    boxed = extract_boxed(reply)
    step.answer = boxed if boxed is not None else reply
    if boxed is None:
        step.flags.append(NO_BOXED_ANSWER)
    if step.truncated:
        step.flags.append(ANSWER_TRUNCATED)
    return step


def given_reply(step: Step) -> str:
    """The final reply as the run gives it (and the judge scores it): the model's reply, minus
    any <think>, with the answer as the agent read it. They differ only where ``--exact-copies``
    repaired a value the answer miscopied (flagged ``copy_repaired``); the step's own reply
    stays as the model wrote it."""
    reply = strip_think(step.reply)
    if COPY_REPAIRED not in step.flags or step.answer is None:
        return reply
    written = extract_boxed(reply)
    if written is None:  # no box: the whole reply was the answer
        return step.answer
    at = reply.rfind(written)  # the last box's content: nothing after it holds it again
    return reply[:at] + step.answer + reply[at + len(written) :]


def memory_text(step: Step) -> str:
    """A memory reply without its ``<think>`` blocks; flags ``memory_truncated`` when the
    reply hit the memory cap."""
    if step.truncated:
        step.flags.append(MEMORY_TRUNCATED)
    return strip_think(step.reply)


def keep_memory(step: Step, new_memory: str | None, previous: str) -> str:
    """Set the memory ``step`` leaves: ``new_memory``, or ``previous`` (flagged
    ``memory_kept``) when the reply held none. An empty reply, or one cut at the cap inside an
    unclosed ``<think>``, must not wipe what earlier steps kept."""
    if new_memory and new_memory.strip():
        step.memory = new_memory
    else:
        step.memory = previous
        step.flags.append(MEMORY_KEPT)
    return step.memory
