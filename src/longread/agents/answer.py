"""Reading answers out of model replies: ``<think>`` stripping and ``\\boxed{...}`` extraction."""

from __future__ import annotations

import re

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
    depth = 1
    for i in range(begin, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[begin:i]
    return None
