"""A training run's folder: the resolved config, checkpoints, metrics, evaluations and the
published adapter.

Layout: ``config.json`` (a resumed run must have the same one), ``checkpoints/step-NNNNNN``,
``metrics.jsonl`` (one line per step), ``eval.jsonl`` (one line per evaluation),
``metrics.png``, ``rollouts/step-NNNNNN.jsonl.gz`` (each GRPO step's rollouts), and for LoRA
``adapter.gguf`` (llama.cpp) and ``adapter/`` (peft).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import torch

from ..files import write_json
from . import checkpoint, metrics
from .checkpoint import Position
from .config import TrainConfig
from .runconfig import check_same_run, saved_config

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
EVAL_FILE = "eval.jsonl"
PLOT_FILE = "metrics.png"
ADAPTER_GGUF = "adapter.gguf"
CHECKPOINTS = "checkpoints"
ROLLOUTS = "rollouts"


class RunFolder:
    """The folder ``out`` of a run of ``config``."""

    def __init__(self, out: str | Path, config: TrainConfig) -> None:
        self.out = Path(out)
        self.config = config

    def open(self) -> None:
        """Create the folder and save the resolved config, or check it against the saved
        one (``run.steps`` excepted, so a finished run can be extended)."""
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / CONFIG_FILE
        if path.is_file():  # paths relative to the folder, data compared by content
            check_same_run(json.loads(path.read_text()), self.config, self.out)
        write_json(path, saved_config(self.config, self.out))

    def resume(self, model: Any, optimizer: Any, scheduler: Any) -> tuple[Position, Path | None]:
        """Restore the newest checkpoint into the model, optimizer and schedule (if any) and
        drop the metrics of steps after it; return the position and the checkpoint."""
        latest = checkpoint.latest_checkpoint(self.out / CHECKPOINTS)
        position = Position()
        if latest is not None:
            position = checkpoint.load_checkpoint(latest, model, optimizer, scheduler)
        metrics.keep_until(self.out / METRICS_FILE, position.step)
        return position, latest

    def save(self, position: Position, model: torch.nn.Module, optimizer: Any, scheduler: Any):
        """Checkpoint ``position.step`` and publish the adapter."""
        checkpoint.save_checkpoint(
            self.out / CHECKPOINTS, position, model, optimizer, scheduler,
            self.config.run.keep_checkpoints,
        )  # fmt: skip
        self.publish_adapter(model)

    def publish_adapter(self, model: Any) -> None:
        """The latest LoRA as users load it: ``adapter.gguf`` for llama.cpp (``--adapter``)
        and ``adapter/`` for peft. Nothing for full fine-tuning."""
        if not hasattr(model, "peft_config"):
            return
        from .export import export_lora_gguf, save_peft_adapter, trained_settings

        agent = trained_settings(self.config.agent)  # beside it: ask reads as it trained
        export_lora_gguf(model, self.out / ADAPTER_GGUF, trained_with=agent)
        save_peft_adapter(model, self.out / "adapter", self.config.model.path)

    def append_metrics(self, record: dict[str, Any]) -> None:
        metrics.append_line(self.out / METRICS_FILE, record)

    def save_rollouts(self, step: int, lines: list[dict[str, Any]]) -> Path:
        """Write step ``step``'s rollout lines (:func:`~longread.train.rollouts.rollout_lines`)
        as gzipped JSON lines, atomically: a step run again after a resume replaces them."""
        path = rollouts_path(self.out, step)
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with gzip.open(tmp, "wt", encoding="utf-8") as handle:
            handle.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        os.replace(tmp, path)
        return path

    def append_eval(self, step: int, result: dict[str, Any]) -> None:
        """Record an evaluation once: a resumed run may evaluate a step again."""
        done = {r["step"] for r in metrics.read_lines(self.out / EVAL_FILE)}
        if step not in done:
            metrics.append_line(self.out / EVAL_FILE, {"step": step, **result})

    def plot(self) -> None:
        metrics.plot(self.out / METRICS_FILE, self.out / EVAL_FILE, self.out / PLOT_FILE)


def rollouts_path(out: str | Path, step: int) -> Path:
    """Where the run in ``out`` keeps step ``step``'s rollouts."""
    return Path(out) / ROLLOUTS / f"step-{step:06d}.jsonl.gz"


def read_rollouts(out: str | Path, step: int) -> list[dict[str, Any]]:
    """Step ``step``'s saved rollout lines of the run in ``out``."""
    with gzip.open(rollouts_path(out, step), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]
