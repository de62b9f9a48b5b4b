"""The memory adapter shipped for the embedded model, and when it applies.

``longread/adapters/`` holds a llama.cpp LoRA adapter trained (``recipes/smollm2/``) to make the
embedded SmolLM2-135M keep notes the way the memory agents ask: the fact that answers the
question, not the document's filler. Its provenance (recipe, data, seeds, commit, training
time, measured effect) is the JSON file beside it.

The bundled model gets it by default (``DEFAULT_ON``): it keeps the needles the model as
released loses (see README and docs/results.md). ``--base-model`` (``base_model=True``) runs the
model as released; ``--adapter memory`` (``adapter="memory"``) names it explicitly. It applies
only to the bundled model and only when no other adapter is given: a LoRA is tied to the base
weights it was trained on.

An agent may ship an adapter of its own (``smollm2-135m-<agent>.gguf``): that agent then gets
it in place of the shared one, by default and for ``--adapter memory``. The other agents keep
the shared one. An own adapter whose record names ``calls`` (MemReread's: ``["decide",
"integrate"]``) applies to those calls only (``bundled_call_adapters``); the agent's other
calls keep the shared one.

An adapter trained for the update gate (``smollm2-135m-update-gate.gguf``: its updates may
reply ``<keep/>``) takes the shared one's place for the agents that read memagent's updates
with the shared one when ``--update-gate on`` is given and no other adapter is: the shared
adapter never learnt the tag, so with it the gate would only add a sentence to the prompt. It
takes only the shared one's place: MemReread's own adapter learnt a root pass that keeps a
chain's bridge, which the gate's adapter (trained from the shared one) loses (stop 81: reversed
chains 6 of 20 with MemReread's own, 0 of 20 with the gate's), so MemReread keeps its own.
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path
from typing import Any

from ..errors import UsageError

MEMORY_ADAPTER_FILE = "smollm2-135m-memory.gguf"
GATE_ADAPTER_FILE = "smollm2-135m-update-gate.gguf"
# the agents whose updates are memagent's, where a <keep/> reply is read (agents/gates.py)
GATE_AGENTS = ("memagent", "memreread")
MEMORY_ADAPTER_NAME = "memory"  # --adapter memory: the shipped adapter
DEFAULT_ON = True  # applied to the bundled model without being asked


def adapters_folder() -> Path:
    """Where the package keeps its shipped adapters."""
    return Path(str(importlib.resources.files("longread") / "adapters"))


def agent_adapter_file(agent: str) -> str:
    """The file name of an agent's own adapter (``smollm2-135m-memreread.gguf``)."""
    return f"smollm2-135m-{agent}.gguf"


def bundled_memory_adapter(agent: str | None = None) -> Path | None:
    """The shipped adapter file ``agent`` reads with: its own where one ships for all its
    calls, else the shared one; None in a build that has none."""
    own = _own_adapter(agent)
    if own is not None and not _calls_of(own):
        return own
    path = adapters_folder() / MEMORY_ADAPTER_FILE
    return path if path.is_file() else None


def bundled_gate_adapter(agent: str | None) -> Path | None:
    """The shipped adapter trained for the update gate, for ``agent``'s updates; None for an
    agent whose updates are not memagent's, for one that ships an adapter of its own for all
    its calls (the gate's was trained from the shared one and takes only its place), or in a
    build that ships none."""
    path = adapters_folder() / GATE_ADAPTER_FILE
    reads_shared = bundled_memory_adapter(agent) == adapters_folder() / MEMORY_ADAPTER_FILE
    return path if agent in GATE_AGENTS and reads_shared and path.is_file() else None


def bundled_call_adapters(agent: str | None) -> dict[str, Path]:
    """The kinds of call (``"decide"``...) of ``agent`` that its own shipped adapter takes,
    when that adapter is for some calls only; {} otherwise."""
    own = _own_adapter(agent)
    return dict.fromkeys(_calls_of(own), own) if own is not None else {}


def _names_an_agent(adapter: str | Path) -> bool:
    """Whether ``adapter`` is ``memory:AGENT``; UsageError for an agent longread lacks."""
    name, colon, owner = str(adapter).partition(":")
    if name != MEMORY_ADAPTER_NAME or not colon:
        return False
    from ..agents.registry import AGENTS

    if owner not in AGENTS:
        raise UsageError(
            f"--adapter {adapter}: no agent {owner!r}; choose one of {', '.join(AGENTS)}"
        )
    return True


def _own_adapter(agent: str | None) -> Path | None:
    if agent is None:
        return None
    own = adapters_folder() / agent_adapter_file(agent)
    return own if own.is_file() else None


def _calls_of(adapter: Path) -> list[str]:
    record = adapter.with_suffix(".json")
    if not record.is_file():
        return []
    return list(json.loads(record.read_text(encoding="utf-8")).get("calls") or [])


def is_bundled(adapter: str | Path) -> bool:
    """Whether ``adapter`` is one of the package's shipped adapter files."""
    return Path(adapter).resolve().parent == adapters_folder().resolve()


def memory_adapter_provenance(agent: str | None = None) -> dict[str, Any] | None:
    """The provenance record written next to the shipped adapter ``agent`` reads with for
    all its calls (``bundled_memory_adapter``), or None."""
    adapter = bundled_memory_adapter(agent)
    if adapter is None:
        return None
    record = adapter.with_suffix(".json")
    return json.loads(record.read_text(encoding="utf-8")) if record.is_file() else None


def shipped_provenances() -> list[dict[str, Any]]:
    """The provenance of every adapter shipped now: the shared one first, then each agent's."""
    folder = adapters_folder()
    shared = folder / MEMORY_ADAPTER_FILE
    files = sorted(folder.glob("smollm2-135m-*.json"), key=lambda f: f.stem != shared.stem)
    return [json.loads(f.read_text(encoding="utf-8")) for f in files]


def memory_adapter_stage(sha256: str | None) -> str | None:
    """The recipe stage (``sft1k``, ``grpo``...) of the shipped adapter with this content
    hash, shared or an agent's own, shipped now or earlier (the provenance keeps the earlier
    ones under ``earlier``), so a run made with any of them says which; None for any other
    adapter."""
    if not sha256:
        return None
    for provenance in shipped_provenances():
        for record in (provenance, *provenance.get("earlier", [])):
            if record["sha256"] == sha256:
                return str(record["stage"])
    return None


def applied_adapter(
    gguf: str | Path | None,
    adapter: str | Path | None,
    base_model: bool,
    agent: str | None = None,
    update_gate: bool = False,
) -> Path | str | None:
    """The adapter the embedded backend applies: ``adapter`` when given (``"memory"``: the
    shipped one ``agent`` reads with; ``"memory:AGENT"``: the one AGENT reads with); else,
    with ``DEFAULT_ON``, the shipped one on the bundled model (``gguf`` None) unless
    ``base_model``; else none. With ``update_gate`` the shipped one is the update gate's
    (``bundled_gate_adapter``) where one ships for ``agent``."""
    if adapter and base_model:
        raise UsageError("--base-model runs the model without any adapter; drop --adapter")
    if adapter and _names_an_agent(adapter):
        # "memory:memagent": the adapter that agent reads with, for another agent's calls
        return _shipped(bundled_memory_adapter(str(adapter).partition(":")[2]))
    if adapter == MEMORY_ADAPTER_NAME or (not adapter and DEFAULT_ON and gguf is None):
        if base_model:
            return None
        gate = bundled_gate_adapter(agent) if update_gate else None
        return gate or _shipped(bundled_memory_adapter(agent), asked=bool(adapter))
    return adapter or None


def _shipped(path: Path | None, asked: bool = True) -> Path | None:
    """``path``; a UsageError where it is None though ``asked`` for by name (``--adapter
    memory``): a build without a shipped adapter says so, not runs without one."""
    if path is None and asked:
        raise UsageError("this build of longread ships no memory adapter")
    return path
