"""Finding the chunk a memory update read: the trace keeps the prompt, not the chunk alone.

The prompt was rendered from a ``string.Template`` whose literal text surrounds the fields
(question, memory, chunk...). Matching the prompt against the templates longread ships (and
the run's own prompt folder) gives the chunk exactly. Traces written with older wording fall
back to the one thing every update prompt has kept: the chunk follows a ``Section:`` line and
is followed by the closing instruction, one paragraph.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template

from ..agents.prompts import PROMPT_SETS, load_prompt
from ..errors import UsageError

# The prompt files of the call that reads a chunk, by agent (memreread reads with MemAgent's;
# the section-first order, --section-first, has a file of its own).
_MEMAGENT_UPDATE = ("memagent_update", "memagent_update_section_first")
UPDATE_PROMPTS: dict[str, tuple[str, ...]] = {
    "memagent": _MEMAGENT_UPDATE,
    "memreread": _MEMAGENT_UPDATE,
    "rememr1": ("rememr1_step",),
}
_SECTION = "Section:\n"


@dataclass(frozen=True)
class FoundChunk:
    text: str
    exact: bool  # False: located by the Section: heuristic, not by a known template


def find_chunk(
    prompt: str, agent: str, prompt_dir: str | None, previous_memory: str | None
) -> FoundChunk | None:
    """The chunk inside ``prompt`` (an update call's last user message), or None."""
    prompt = without_gates(prompt, prompt_dir)
    for name in UPDATE_PROMPTS.get(agent, ()):
        for template in _templates(name, prompt_dir):
            fields = match_template(template, prompt)
            if fields is not None and "chunk" in fields:
                return FoundChunk(fields["chunk"], exact=True)
    text = _after_section(prompt, previous_memory)
    return None if text is None else FoundChunk(text, exact=False)


def without_gates(prompt: str, prompt_dir: str | None) -> str:
    """``prompt`` as its template rendered it, before the gate sentences (agents/gates.py) that
    runs with ``--update-gate``/``--exit-gate`` add at its end, one paragraph each."""
    for name in ("memagent_update_gate", "memagent_exit_gate"):
        for template in _templates(name, prompt_dir):
            block = "\n\n" + template.template.rstrip("\n")
            at = prompt.rfind(block)
            if at >= 0:
                return prompt[:at] + "\n"
    return prompt


def match_template(template: Template, text: str) -> dict[str, str] | None:
    """The fields that rendered ``text`` from ``template``, or None when it does not fit.

    Each field ends at the first occurrence of the literal after it (the last field runs to
    the template's closing literal), so the match is linear in the text: a regex with one
    lazy group per field can backtrack for minutes on a long prompt that does not fit."""
    parts = list(_parts(template))
    fields: dict[str, str] = {}
    position = 0
    for index, (literal, field) in enumerate(parts):
        if not text.startswith(literal, position):
            return None
        position += len(literal)
        if field is None:
            return fields if position == len(text) else None
        following = parts[index + 1][0]
        last = index + 2 == len(parts) and parts[-1][1] is None
        end = len(text) - len(following) if last else text.find(following, position)
        if end < position or (last and not text.endswith(following)):
            return None
        value = text[position:end]
        if fields.setdefault(field, value) != value:  # a field used twice must repeat
            return None
        position = end
    return fields


def _parts(template: Template) -> Iterator[tuple[str, str | None]]:
    """(literal, field after it) pairs; the last pair's field is None."""
    literal, position = "", 0
    for match in template.pattern.finditer(template.template):
        literal += template.template[position : match.start()]
        position = match.end()
        if match.group("escaped") is not None:
            literal += template.delimiter
            continue
        field = match.group("named") or match.group("braced")
        if field is None:  # an invalid placeholder is literal text to substitute()
            literal += match.group(0)
            continue
        yield literal, field
        literal = ""
    yield literal + template.template[position:], None


def _templates(name: str, prompt_dir: str | None) -> list[Template]:
    """The run's own prompt file first (when its folder is still there), then the bundled."""
    own = []
    if prompt_dir and Path(prompt_dir).is_dir():
        with contextlib.suppress(UsageError):  # the folder lacks it: a bundled one may fit
            own.append(load_prompt(name, prompt_dir))
    return [*own, *_bundled(name)]


@cache
def _bundled(name: str) -> tuple[Template, ...]:
    return tuple(load_prompt(name, None, prompt_set) for prompt_set in PROMPT_SETS)


def _after_section(prompt: str, previous_memory: str | None) -> str | None:
    """The text after the first ``Section:`` line that follows the old memory, up to the
    last paragraph (the instruction)."""
    found = prompt.find(previous_memory) if previous_memory else -1
    start = found + len(previous_memory) if previous_memory and found >= 0 else 0
    section = prompt.find(_SECTION, start)
    if section < 0:
        return None
    begin = section + len(_SECTION)
    end = prompt.rfind("\n\n", begin)
    return prompt[begin:end] if end > begin else None
