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
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path
from typing import Any

from ..errors import UsageError

MEMORY_ADAPTER_FILE = "smollm2-135m-memory.gguf"
MEMORY_ADAPTER_NAME = "memory"  # --adapter memory: the shipped adapter
DEFAULT_ON = True  # applied to the bundled model without being asked


def bundled_memory_adapter() -> Path | None:
    """The shipped adapter file, or None in a build that has none."""
    path = Path(str(importlib.resources.files("longread") / "adapters" / MEMORY_ADAPTER_FILE))
    return path if path.is_file() else None


def memory_adapter_provenance() -> dict[str, Any] | None:
    """The provenance record written next to the shipped adapter, or None."""
    adapter = bundled_memory_adapter()
    if adapter is None:
        return None
    record = adapter.with_suffix(".json")
    return json.loads(record.read_text(encoding="utf-8")) if record.is_file() else None


def memory_adapter_stage(sha256: str | None) -> str | None:
    """The recipe stage (``sft1k``, ``grpo``...) of the memory adapter with this content hash,
    shipped now or earlier (the provenance keeps the earlier ones under ``earlier``), so a run
    made with any of them says which; None for any other adapter."""
    provenance = memory_adapter_provenance()
    if not sha256 or provenance is None:
        return None
    shipped = [provenance, *provenance.get("earlier", [])]
    return next((record["stage"] for record in shipped if record["sha256"] == sha256), None)


def applied_adapter(
    gguf: str | Path | None, adapter: str | Path | None, base_model: bool
) -> Path | str | None:
    """The adapter the embedded backend applies: ``adapter`` when given (``"memory"``: the
    shipped one); else, with ``DEFAULT_ON``, the shipped one on the bundled model (``gguf``
    None) unless ``base_model``; else none."""
    if adapter and base_model:
        raise UsageError("--base-model runs the model without any adapter; drop --adapter")
    if adapter == MEMORY_ADAPTER_NAME:
        shipped = bundled_memory_adapter()
        if shipped is None:
            raise UsageError("this build of longread ships no memory adapter")
        return shipped
    if adapter:
        return adapter
    if DEFAULT_ON and gguf is None and not base_model:
        return bundled_memory_adapter()
    return None
