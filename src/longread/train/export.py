"""A trained LoRA written as a llama.cpp adapter GGUF, for the embedded backend (``--adapter``).

llama.cpp applies an adapter tensor pair to the base tensor of the same GGUF name: for a linear
layer ``W`` it adds ``scale * B (A x)`` with ``scale = adapter.lora.alpha / rank`` (the rank read
from the tensors' shape), exactly as peft does with its ``scaling``. Three conventions differ from
peft's state dict, all taken from llama.cpp's own ``convert_lora_to_gguf.py``:

- names are the base model's GGUF names, ``blk.0.attn_q.weight.lora_a`` / ``.lora_b``;
- the llama converter permutes the rows of q and k (llama.cpp's rotary embedding pairs
  neighbouring dimensions, Hugging Face's pairs the two halves of a head), so the rows of
  ``B`` for q and k, which are the output rows, are permuted the same way (``A`` is untouched);
- tied embeddings have no ``output`` tensor in the base GGUF, so an lm_head adapter has no
  tensor to attach to (we only support the seven linear projections of a block anyway).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..llm.trained_settings import ROLLOUT_OPTIONS, TrainedSettings, write_trained_settings
from .config import AgentSection, ModelSection

SUPPORTED_ARCHITECTURES = ("llama",)
# The Hugging Face module names a llama adapter may target, and their llama.cpp tensor names.
LLAMA_TARGETS = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_LAYER_PREFIX = "model.layers."


@dataclass
class _LoraPair:
    """One adapted projection in llama.cpp's terms: ``lora_a`` is (rank, n_in) and ``lora_b``
    (n_out, rank), already permuted and rescaled for llama.cpp."""

    name: str  # base tensor name, e.g. "blk.0.attn_q.weight"
    lora_a: np.ndarray
    lora_b: np.ndarray


def export_lora_gguf(
    peft_model: Any,
    path: str | Path,
    *,
    base_architecture: str = "llama",
    trained_with: TrainedSettings | None = None,
) -> Path:
    """Write the active LoRA adapter of ``peft_model`` (a ``peft.PeftModel`` over a
    ``LlamaForCausalLM``) as a llama.cpp adapter GGUF at ``path``; returns the path.

    ``trained_with``, the agent settings the adapter was trained with, goes into the JSON
    beside it (``adapter.gguf`` -> ``adapter.json``), where ``ask``, ``eval run`` and ``serve``
    read it; without it, a JSON an earlier export left there is removed.

    Any subset of the q, k, v, o, gate, up and down projections may be adapted, with any rank
    and alpha per module (``rank_pattern``, ``alpha_pattern``, rsLoRA): llama.cpp has a single
    ``alpha`` per file, so a module whose peft scaling differs from ``alpha / rank`` has the
    difference folded into its ``lora_b``. Tensors are float32. The file is written to a
    temporary name and renamed, so a kill never leaves half an adapter.

    Raises UsageError for what llama.cpp's LoRA cannot express: DoRA and other LoRA variants,
    LoRA biases, merged adapters, modules saved in full (``modules_to_save``), other targets
    (embeddings, lm_head), other architectures.
    """
    if base_architecture not in SUPPORTED_ARCHITECTURES:
        raise UsageError(
            f"cannot export a LoRA for architecture {base_architecture!r}; "
            f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    adapter = _active_adapter(peft_model)
    config = peft_model.peft_config[adapter]
    _check_config(config)
    base = peft_model.get_base_model()
    model_type = getattr(base.config, "model_type", None)
    if model_type != base_architecture:
        raise UsageError(
            f"the base model is {model_type!r}, not {base_architecture!r}: its tensor names "
            "and layout would not match the GGUF llama.cpp loads"
        )
    alpha = float(config.lora_alpha)
    tensors = _adapter_tensors(base, adapter, alpha)
    if not tensors:
        raise UsageError("the model has no LoRA layers to export")
    written = _write(Path(path), base_architecture, alpha, tensors)
    write_trained_settings(written, trained_with)
    return written


def save_peft_adapter(peft_model: Any, folder: str | Path, model_path: str) -> None:
    """peft's ``save_pretrained`` into ``folder``. For the bundled model (``model_path``
    ``"smollm2"``) the adapter's config and model card name the base model that way, not by
    the cache folder it was converted into, which is a path of this machine only."""
    if model_path != ModelSection.path:
        peft_model.save_pretrained(folder)
        return
    model = peft_model.get_base_model()
    base = model.config
    config = peft_model.peft_config[_active_adapter(peft_model)]
    # the model card's tag reads the model's own name_or_path, copied from its config at load
    before = base._name_or_path, config.base_model_name_or_path, model.name_or_path
    base._name_or_path = config.base_model_name_or_path = model.name_or_path = model_path
    try:
        peft_model.save_pretrained(folder)
    finally:
        base._name_or_path, config.base_model_name_or_path, model.name_or_path = before


def trained_settings(agent: AgentSection) -> TrainedSettings:
    """The settings a training config's ``[agent]`` reads with, as recorded beside its adapter."""
    return TrainedSettings(
        agent=agent.name,
        prompt_set=agent.prompt_set,
        chunk_tokens=agent.chunk_tokens,
        memory_tokens=agent.memory_tokens,
        final_tokens=agent.final_tokens,
        update_gate=bool(agent.options.get("update_gate", False)),
        exit_gate=bool(agent.options.get("exit_gate", False)),
        gate_instructions=bool(agent.options.get("gate_instructions", True)),
        exit_probe=bool(agent.options.get("exit_probe", False)),
        # a memory option (or rememr1's format stop) rolled out with is read with too:
        # inference as it was trained
        reads_with=tuple(o for o in ROLLOUT_OPTIONS if agent.options.get(o)),
    )


def _adapter_tensors(base: Any, adapter: str, alpha: float) -> list[_LoraPair]:
    """The LoRA pairs of ``base`` (the model under peft), in llama.cpp's names and layout, for
    a file whose ``adapter.lora.alpha`` is ``alpha``."""
    from peft.tuners.lora import LoraLayer

    n_head = int(base.config.num_attention_heads)
    n_head_kv = int(getattr(base.config, "num_key_value_heads", None) or n_head)
    found = []
    for module_name, module in base.named_modules():
        if not isinstance(module, LoraLayer) or adapter not in module.r:
            continue
        block, target = _split_name(module_name)
        _check_layer(module_name, module, adapter)
        a, b = _weight(module.lora_A[adapter]), _weight(module.lora_B[adapter])
        rank = a.shape[0]
        # llama.cpp scales by alpha / rank; peft by its own per-module scaling.
        factor = float(module.scaling[adapter]) / (alpha / rank)
        if not math.isclose(factor, 1.0, rel_tol=1e-6):
            b = b * np.float32(factor)
        if target == "attn_q":
            b = llama_qk_permute(b, n_head)
        elif target == "attn_k":
            b = llama_qk_permute(b, n_head_kv)
        name = f"blk.{block}.{target}.weight"
        found.append(_LoraPair(name, np.ascontiguousarray(a), np.ascontiguousarray(b)))
    return found


def llama_qk_permute(rows: np.ndarray, n_head: int) -> np.ndarray:
    """Reorder the output rows of a q or k projection from Hugging Face's rotary layout (each
    head's first half of dimensions paired with its second half) to llama.cpp's (neighbouring
    dimensions paired): within each head, row ``j * half + i`` moves to ``2 * i + j``. For k,
    ``n_head`` is the number of key/value heads."""
    n_out = rows.shape[0]
    half = n_out // n_head // 2
    if n_head * 2 * half != n_out:
        raise ValueError(f"{n_out} rows do not split into {n_head} heads of even size")
    per_head = rows.reshape(n_head, 2, half, *rows.shape[1:])
    return per_head.swapaxes(1, 2).reshape(rows.shape)


def _weight(linear: Any) -> np.ndarray:
    """A LoRA factor's weight as float32 numpy, (out, in) like torch's."""
    return np.asarray(linear.weight.detach().to("cpu").float().numpy())


def _active_adapter(peft_model: Any) -> str:
    if not hasattr(peft_model, "peft_config") or not hasattr(peft_model, "get_base_model"):
        raise UsageError("export_lora_gguf takes a peft model (peft.get_peft_model(...))")
    active = list(getattr(peft_model, "active_adapters", None) or [peft_model.active_adapter])
    if len(active) != 1:
        raise UsageError(f"several adapters are active ({active}); activate one to export it")
    return str(active[0])


def _check_config(config: Any) -> None:
    from peft import PeftType

    if config.peft_type != PeftType.LORA:
        raise UsageError(f"only LoRA adapters can be exported, not {config.peft_type}")
    unsupported = {
        "use_dora": "DoRA",
        "modules_to_save": "modules saved in full (modules_to_save)",
        "layer_replication": "layer replication",
        "trainable_token_indices": "trainable tokens",
        "target_parameters": "LoRA on parameters (target_parameters)",
        "lora_bias": "LoRA biases",
        "alora_invocation_tokens": "activated LoRA (aLoRA)",
    }
    for key, what in unsupported.items():
        if getattr(config, key, None):
            raise UsageError(f"llama.cpp adapters cannot express {what}; train without it")
    if not config.lora_alpha or config.lora_alpha <= 0:
        # llama.cpp reads alpha 0 as "no scaling" where peft's scaling would be 0.
        raise UsageError(f"lora_alpha must be positive to export, not {config.lora_alpha}")


def _check_layer(name: str, module: Any, adapter: str) -> None:
    from peft.tuners.lora import Linear

    if not isinstance(module, Linear) or adapter not in module.lora_A:
        raise UsageError(f"{name}: only LoRA on linear layers can be exported")
    if getattr(module, "merged", False):
        raise UsageError(f"{name}: the adapter is merged into the weights; unmerge it first")
    variant = getattr(module, "lora_variant", {}).get(adapter)
    if module.use_dora.get(adapter) or variant is not None:
        kind = "DoRA" if module.use_dora.get(adapter) else type(variant).__name__
        raise UsageError(f"{name}: llama.cpp adapters cannot express {kind}")
    if module.lora_bias.get(adapter):
        raise UsageError(f"{name}: llama.cpp adapters cannot express LoRA biases")


def _split_name(module_name: str) -> tuple[int, str]:
    """``model.layers.3.self_attn.q_proj`` -> (3, "attn_q"); UsageError for anything else."""
    if module_name.startswith(_LAYER_PREFIX):
        block, _, rest = module_name[len(_LAYER_PREFIX) :].partition(".")
        if block.isdigit() and rest in LLAMA_TARGETS:
            return int(block), LLAMA_TARGETS[rest]
    short = sorted({t.rsplit(".", 1)[1] for t in LLAMA_TARGETS})
    raise UsageError(
        f"cannot export a LoRA on {module_name!r}: llama.cpp adapters here cover the block "
        f"projections {', '.join(short)} (not embeddings or lm_head)"
    )


def _write(path: Path, architecture: str, alpha: float, tensors: list[_LoraPair]) -> Path:
    import gguf

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
    writer = gguf.GGUFWriter(partial, arch=architecture)
    try:
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
        for t in tensors:
            writer.add_tensor(f"{t.name}.lora_a", t.lora_a.astype(np.float32))
            writer.add_tensor(f"{t.name}.lora_b", t.lora_b.astype(np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial, path)
    except BaseException:
        writer.close()
        partial.unlink(missing_ok=True)
        raise
    return path
