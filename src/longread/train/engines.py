"""Where rollouts are sampled: the policy itself, or llama.cpp with the policy's adapter.

``transformers`` (default) samples with the trained fp32 weights: exactly on-policy, but one
sequence at a time at about 13 tokens/s on this CPU. ``llamacpp`` exports the current LoRA as a
llama.cpp adapter before every step and samples with the embedded engine (55-85 tokens/s),
the way GPU trainers hand generation to vLLM: the sampled ids are carried to the loss as they
are, and the old logprobs are recomputed by the trainer (the gap between the two is logged as
``sampler_logprob_gap``). It needs LoRA and a base GGUF of the same weights (for 'smollm2', the
bundled file converted to F16).

Both sample the one spec of ``llm.base.SamplingParams``: the rollout section's temperature and
top-p over the full distribution (``TRAINING_SAMPLING``: no top-k, no min-p, no penalties), so
"temperature 1.0" is the same distribution on either engine (tests/test_sampler_agreement.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..errors import UsageError
from ..llm.base import LLMBackend
from .config import TrainConfig
from .policy import Policy, PolicyBackend


class RolloutEngine(Protocol):
    def open(self) -> LLMBackend:
        """A backend sampling with the current weights."""
        ...


class PolicyEngine:
    """Rollouts on the policy's own weights."""

    def __init__(self, backend: PolicyBackend) -> None:
        self.backend = backend

    def open(self) -> LLMBackend:
        return self.backend


class LlamaCppEngine:
    """Rollouts on llama.cpp: the base GGUF plus the current LoRA, exported each step."""

    def __init__(self, policy: Policy, base_gguf: str | None, folder: Path, window: int) -> None:
        self.policy = policy
        self.base_gguf = base_gguf
        self.adapter = folder / "rollout-adapter.gguf"
        self.window = window

    def open(self) -> LLMBackend:
        from ..llm.llamacpp import LlamaCppBackend
        from .export import export_lora_gguf

        self.adapter.parent.mkdir(parents=True, exist_ok=True)
        export_lora_gguf(self.policy.model, self.adapter)
        quant = None if self.base_gguf else "f16"  # the bundled Q4_1 values, exactly, in F16
        return LlamaCppBackend(
            self.base_gguf,
            quant=quant,
            n_ctx=self.window,
            adapter=self.adapter,
            # A LoRA not trained yet (lora_B all zero) moves nothing by design; once it has
            # learnt anything, an adapter llama.cpp dropped would make every rollout off-policy.
            check_adapter=lora_moves_anything(self.policy.model),
        )


def lora_moves_anything(model: Any) -> bool:
    """True when some LoRA ``B`` matrix of ``model`` (a peft model) holds a non-zero value:
    only then does the adapter change the model's outputs."""
    return any(
        bool(parameter.detach().abs().max() > 0)
        for name, parameter in model.named_parameters()
        if "lora_B" in name
    )


def make_engine(config: TrainConfig, backend: PolicyBackend, out: Path) -> RolloutEngine:
    """The engine ``config.rollout.engine`` names, checked against the rest of the config."""
    engine = config.rollout.engine
    if engine == "transformers":
        return PolicyEngine(backend)
    if not config.model.lora:
        raise UsageError("rollout.engine = 'llamacpp' needs model.lora = true (it loads a LoRA)")
    base = config.rollout.base_gguf or None
    if base is None and config.model.path != "smollm2":
        raise UsageError("rollout.engine = 'llamacpp' needs rollout.base_gguf for this model")
    return LlamaCppEngine(backend.policy, base, out, backend.context_window)
