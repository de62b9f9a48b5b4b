"""The agent settings a LoRA adapter was trained with, kept in a JSON file beside it.

An adapter learns to read the way its training read: the prompt set, the chunk size, the memory
cap and the final-answer budget. Read another way (5,000-token chunks where it saw 1,000) it
meets inputs it never saw. So every adapter the trainer exports gets ``<name>.json`` beside
``<name>.gguf`` holding these settings under ``trained_with``, and the shipped memory adapter's
provenance JSON holds them too; ``ask``, ``eval run`` and ``serve`` use them where no flag says
otherwise (``cli/options.py``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import UsageError

TRAINED_WITH = "trained_with"  # the key of the settings in the JSON beside the adapter
# Options an adapter ships to read with, though it was not trained with them: the results
# sets measured the stage better (or as good and faster) with them (recipes/smollm2/ship.py
# --reads-with). Kept apart from ``trained_with``, which says only how training read.
READS_WITH = "reads_with"
# The memory options: how the notes are kept (a stage that rolled out with them records them).
MEMORY_OPTIONS = ("grounded_notes", "focused_notes", "exact_copies", "focused_reread")
# ... and the exit probe (issue 29): the shared adapter's updates with the agent's probe
# adapter's yes/no calls after them, on by default since no results set lost a sample to it.
# ... and rememr1's format stop: where a step's reply ends, not how its notes are kept.
# A stage that rolled out with one of these records it to be read with (train/export.py).
ROLLOUT_OPTIONS = (*MEMORY_OPTIONS, "format_stop")
# ... and rememr1's loop stop, which leaves every reply reading as it did (an inference saving,
# never rolled out).
# ... and rememr1's format grammar: constrained decoding, chosen when an adapter ships.
READING_OPTIONS = (*ROLLOUT_OPTIONS, "exit_probe", "loop_stop", "format_grammar")
# The least final-answer cap a run reads with. The shipped stages trained with 32-token answers
# (numbers and names), but a UUID in \boxed{} is 38 SmolLM2 tokens: read with 32, every
# niah_single_3 answer was cut (sft29q: 0 of 20 at 2K, the full UUID in its notes).
FINAL_TOKENS_READ_MIN = 64
# TrainedSettings' fields and their JSON types.
_TYPES = {
    "agent": str,
    "prompt_set": str,
    "chunk_tokens": int,
    "memory_tokens": int,
    "final_tokens": int,
}
# The text-controlled gates (issue 29) and their default: recorded only when a stage trained
# with another value, so every adapter exported before them reads as it did.
_GATES = {
    "update_gate": False,
    "exit_gate": False,
    "gate_instructions": True,
    "exit_probe": False,
}


@dataclass(frozen=True)
class TrainedSettings:
    """How the agent read while its adapter was trained."""

    agent: str  # the agent whose calls trained it (memagent)
    prompt_set: str
    chunk_tokens: int
    memory_tokens: int
    final_tokens: int
    update_gate: bool = False
    exit_gate: bool = False
    gate_instructions: bool = True  # off: the update prompt never named the gates' tags
    exit_probe: bool = False  # a yes/no probe after each change of memory may stop reading
    reads_with: tuple[str, ...] = ()  # READING_OPTIONS on by default, chosen when it shipped

    @property
    def trained_to_exit(self) -> bool:
        """Whether it was trained to stop reading (the exit gate or the exit probe): its exits
        then read grounded by default (``cli/options.py`` ``grounds_its_exits``)."""
        return self.exit_gate or self.exit_probe

    def options(self) -> dict[str, Any]:
        """The settings as agent options (``make_config`` keywords), the agent's name left out;
        a gate setting only when it differs from every agent's default; the reading options it
        shipped with, on."""
        trained = {k: v for k, v in self.to_dict().items() if k != "agent"}
        return {**trained, **dict.fromkeys(self.reads_with, True)}

    def reading_options(self) -> dict[str, Any]:
        """``options`` as a run reads with them: the final answer's cap at least
        ``FINAL_TOKENS_READ_MIN``. The cap only ends generation, so raising it changes no
        prompt, while an answer longer than the trained cap would be cut."""
        return {**self.options(), "final_tokens": max(self.final_tokens, FINAL_TOKENS_READ_MIN)}

    def to_dict(self) -> dict[str, Any]:
        """The ``trained_with`` record: every setting, and the gate settings that differ from
        the default (``reads_with`` is recorded apart)."""
        return {
            k: v
            for k, v in asdict(self).items()
            if k != READS_WITH and (k not in _GATES or v != _GATES[k])
        }

    @classmethod
    def from_record(cls, record: dict[str, Any], where: str) -> TrainedSettings:
        """Read ``trained_with`` and ``reads_with`` from an adapter's JSON record; a UsageError
        naming ``where`` when either is malformed."""
        settings = cls.from_dict(record[TRAINED_WITH], where)
        reads_with = record.get(READS_WITH, [])
        if not isinstance(reads_with, list) or any(o not in READING_OPTIONS for o in reads_with):
            raise UsageError(
                f"{where}: {READS_WITH} must be a list of reading options among "
                f"{', '.join(READING_OPTIONS)}"
            )
        return replace(settings, reads_with=tuple(o for o in READING_OPTIONS if o in reads_with))

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> TrainedSettings:
        """Read ``trained_with``; a UsageError naming ``where`` when it is malformed."""
        if not isinstance(raw, dict):
            raise UsageError(f"{where}: {TRAINED_WITH} must be an object of agent settings")
        for name, kind in _TYPES.items():
            value = raw.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise UsageError(f"{where}: {TRAINED_WITH}.{name} must be a {kind.__name__}")
        for gate in _GATES:
            if not isinstance(raw.get(gate, False), bool):
                raise UsageError(f"{where}: {TRAINED_WITH}.{gate} must be true or false")
        gates = {gate: raw[gate] for gate in _GATES if gate in raw}
        return cls(**{name: raw[name] for name in _TYPES}, **gates)


def settings_file(adapter: str | Path) -> Path:
    """The JSON beside an adapter GGUF: ``adapter.gguf`` -> ``adapter.json``."""
    return Path(adapter).with_suffix(".json")


def read_trained_settings(adapter: str | Path) -> TrainedSettings | None:
    """The settings ``adapter`` was trained with, or None when no JSON beside it records them
    (an adapter from elsewhere, or exported before they were recorded)."""
    file = settings_file(adapter)
    if not file.is_file():
        return None
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read the adapter's settings in {file}: {exc}") from None
    if not isinstance(raw, dict) or TRAINED_WITH not in raw:
        return None
    return TrainedSettings.from_record(raw, str(file))


def write_trained_settings(adapter: str | Path, settings: TrainedSettings | None) -> None:
    """Write ``settings`` beside ``adapter`` (to a temporary name, then renamed); None removes
    a JSON left there by an earlier export, which would describe another adapter."""
    file = settings_file(adapter)
    if settings is None:
        file.unlink(missing_ok=True)
        return
    record: dict[str, Any] = {"adapter": Path(adapter).name, TRAINED_WITH: settings.to_dict()}
    if settings.reads_with:
        record[READS_WITH] = list(settings.reads_with)
    partial = file.with_name(f"{file.name}.partial-{os.getpid()}")
    partial.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, file)
