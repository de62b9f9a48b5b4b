"""memagent's text-controlled gates (issue 29; GRU-Mem and InfMem read less this way).

With ``update_gate`` an update reply may be exactly ``<keep/>``: the section adds nothing,
the memory stays as it is and is not written out again (a reply of a few tokens instead of
the whole memory). With ``exit_gate`` a reply may end with ``<exit/>``: the memory answers
the problem, so reading stops after this section and the answer comes from the memory.

Parsing is strict: ``<keep/>`` counts only as the whole reply, ``<exit/>`` only at its end;
a gate tag anywhere else is removed from the memory and the step is flagged
``format_error``. With both gates off (the papers' behaviour) replies are read as before and
no tag means anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_KEEP = re.compile(r"^\s*<\s*keep\s*/\s*>\s*$", re.IGNORECASE)
_EXIT_AT_END = re.compile(r"<\s*exit\s*/\s*>\s*$", re.IGNORECASE)
_GATE_TAG = re.compile(r"<\s*/?\s*(?:keep|exit)\s*/?\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class GateReply:
    """What a gated update reply says."""

    memory: str | None  # the new memory; None: keep the old one (<keep/>)
    exit: bool  # the reply ended with <exit/>
    misplaced: bool  # a gate tag stood where no gate reads it (removed from the memory)


def read_gates(reply: str, update_gate: bool, exit_gate: bool) -> GateReply:
    """Read ``reply`` (``<think>`` already stripped) under the gates that are on."""
    exit_ = bool(exit_gate and _EXIT_AT_END.search(reply))
    if exit_:
        reply = _EXIT_AT_END.sub("", reply)
    if update_gate and _KEEP.match(reply):
        return GateReply(None, exit_, False)
    misplaced = bool(_GATE_TAG.search(reply))
    if misplaced:
        reply = _GATE_TAG.sub("", reply)
    return GateReply(reply.strip(), exit_, misplaced)
