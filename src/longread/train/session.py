"""Everything `longread train` sets up around the trainer: the policy, data and evaluation."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

import torch

from ..agents import make_agent
from ..data.loaders import data_files, load_files
from ..data.records import Sample
from ..errors import UsageError
from ..llm import compute_thread
from ..text.tokenizers import HFTokenizer
from .checkpoint import Position
from .config import ModelSection, TrainConfig
from .policy import Policy
from .trainer import Trainer

log = logging.getLogger(__name__)
BUNDLED = "smollm2"


def load_policy(section: ModelSection, seed: int) -> Policy:
    """The model named by ``section`` in fp32, wrapped with a LoRA adapter when asked. The
    adapter's initial weights come from ``seed``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = _model_folder(section.path)
    model: Any
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot load a model from {folder}: {exc}") from None
    if section.lora and section.adapter:
        from peft import PeftModel

        try:
            model = PeftModel.from_pretrained(model, section.adapter, is_trainable=True)
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot load the adapter {section.adapter}: {exc}") from None
    elif section.lora:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(seed)
        model = get_peft_model(
            model,
            LoraConfig(
                r=section.lora_rank,
                lora_alpha=section.lora_alpha,  # type: ignore[arg-type]  # peft takes floats
                lora_dropout=section.lora_dropout,
                target_modules=list(section.lora_targets),
                task_type="CAUSAL_LM",
            ),
        )
    return Policy(model, tokenizer, name=Path(folder).name)


def _model_folder(path: str) -> Path:
    if path == BUNDLED:
        from .smollm2 import smollm2_hf_folder

        return smollm2_hf_folder()
    folder = Path(path)
    if not folder.is_dir():
        raise UsageError(f"model.path {path} is not a model folder (or 'smollm2')")
    return folder


def policy_tokenizer(policy: Policy) -> HFTokenizer:
    """The longread tokenizer over the policy's own vocabulary: chunks are counted in the
    tokens the policy reads."""
    return HFTokenizer(policy.tokenizer.backend_tokenizer, name=f"hf:{policy.name}")


def load_data(paths: Sequence[str], what: str) -> list[Sample]:
    """Samples from files and folders (the formats `eval run` reads)."""
    files: list[Path] = []
    for path in paths:
        p = Path(path)
        if not p.exists():
            raise UsageError(f"{what} data {path} does not exist")
        files.extend(data_files(p) if p.is_dir() else [p])
    samples = load_files(files)
    if not samples:
        raise UsageError(f"no samples in the {what} data ({', '.join(paths)})")
    # Checked here, not when the first evaluation or group needs it, hours into a run.
    twice = next((id for id, n in Counter(s.id for s in samples).items() if n > 1), None)
    if twice is not None:
        raise UsageError(f"sample id {twice!r} occurs twice in the {what} data; ids must be unique")
    return samples


class HeldOutEvaluation:
    """Runs the held-out set through the eval runner and judge, greedy, into
    ``out/eval/step-NNNNNN`` (a normal eval run folder: `eval report` reads it)."""

    def __init__(self, trainer: Trainer, samples: Sequence[Sample], out: Path) -> None:
        self.trainer = trainer
        self.samples = list(samples)
        self.out = out

    def __call__(self, step: int) -> dict[str, Any]:
        from ..eval.runner import run_eval
        from ..eval.store import RunStore, data_identity

        folder = self.out / "eval" / f"step-{step:06d}"
        config = self.trainer.greedy_config()
        # The rollout engine's backend: with llamacpp, the exported adapter users will deploy.
        backend = self.trainer.engine.open()
        tokenizer = self.trainer.tokenizer
        name = self.trainer.config.agent.name
        run_config = {
            "agent": name,
            "agent_config": dataclasses.asdict(config),
            "record_tokens": False,
            "data": [str(Path(p).resolve()) for p in self.trainer.config.data.eval],
            **data_identity(self.samples),
            "backend": {
                "backend": self.trainer.config.rollout.engine,
                "model": self.trainer.policy.name,
            },
            "training": {"folder": str(self.out.resolve()), "step": step},
        }
        with RunStore(folder, writer=True) as store:
            store.save_config(run_config)
            try:
                summary = asyncio.run(
                    run_eval(
                        self.samples,
                        lambda report: make_agent(name, backend, tokenizer, config, report),
                        store,
                        concurrency=1,
                        progress=self.trainer.progress,
                    )
                )
            finally:
                if backend is not self.trainer.backend:
                    asyncio.run(backend.aclose())
            results = [r for r in store.results() if r.sample_id in {s.id for s in self.samples}]
        strict = [float(r.score.get("strict") or 0.0) for r in results]
        return {
            "accuracy": fmean(strict) if strict else 0.0,
            "headline": summary.accuracy,
            "samples": len(results),
            "folder": str(folder.relative_to(self.out)),
        }


def train(
    config: TrainConfig,
    out: str | Path,
    *,
    stop_after: int | None = None,
    progress: bool = True,
) -> Position:
    """Train as ``config`` says into ``out``, resuming from its newest checkpoint. Settings
    that cannot do what they say (:meth:`TrainConfig.warnings`) are warned about on stderr
    first."""
    for warning in config.warnings():
        print(f"longread: warning: {warning}", file=sys.stderr)
    if config.run.threads > 0:
        # OpenMP's thread count is per thread: set it where torch computes (compute_thread).
        compute_thread.call(torch.set_num_threads, config.run.threads)
    train_samples = load_data(config.data.train, "training")
    held_out = load_data(config.data.eval, "held-out") if config.data.eval else []
    if config.data.eval_limit > 0:
        held_out = held_out[: config.data.eval_limit]
    policy = load_policy(config.model, config.run.seed)
    reference = None
    if config.optim.kl_coef > 0 and not config.model.lora:
        reference = load_policy(dataclasses.replace(config.model, lora=False), 0).model.eval()
    trainer = Trainer(
        config, policy, policy_tokenizer(policy), train_samples, out,
        progress=progress, reference=reference,
    )  # fmt: skip
    if held_out:
        trainer.evaluate = HeldOutEvaluation(trainer, held_out, Path(out))
    return trainer.run(stop_after=stop_after)
