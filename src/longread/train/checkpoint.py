"""Checkpoints after every step: trainable weights, optimizer, scheduler, RNG, data position.

Each checkpoint is a folder ``checkpoints/step-NNNNNN`` written under a temporary name and
renamed when complete, so ``kill -9`` at any moment leaves the previous checkpoint intact and
never a half-written one that looks whole. Only trainable parameters are saved (the LoRA
matrices, or every weight for full fine-tuning); the frozen base is reloaded from its folder.

Everything saved is plain data (tensors, numbers, strings, lists, tuples, dicts): optimizer and
scheduler state dicts, RNG states. So every file loads with ``torch.load(weights_only=True)``,
and a checkpoint holding any other pickled object (which could run code when unpickled) is
refused.
"""

from __future__ import annotations

import json
import pickle
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import UsageError
from ..files import write_json

STEP_PREFIX = "step-"
PARTIAL = ".partial"


@dataclass
class Position:
    """Where training stands: the next step to run and where the data order is."""

    step: int = 0  # steps completed
    epoch: int = 0
    index: int = 0  # next sample of this epoch's order


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def save_checkpoint(
    folder: Path,
    position: Position,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    keep: int,
) -> Path:
    """Write the checkpoint of ``position.step`` and keep only the ``keep`` newest."""
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{STEP_PREFIX}{position.step:06d}"
    partial = folder / (final.name + PARTIAL)
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    torch.save(trainable_state(model), partial / "weights.pt")
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "python_rng": random.getstate(),
        },
        partial / "trainer.pt",
    )
    write_json(partial / "position.json", asdict(position))
    shutil.rmtree(final, ignore_errors=True)  # a step redone after a crash replaces its twin
    partial.rename(final)
    _prune(folder, keep)
    return final


def latest_checkpoint(folder: Path) -> Path | None:
    """The newest complete checkpoint in ``folder``, or None."""
    if not folder.is_dir():
        return None
    done = [
        p
        for p in folder.iterdir()
        if p.is_dir() and p.name.startswith(STEP_PREFIX) and not p.name.endswith(PARTIAL)
    ]
    return max(done, key=lambda p: p.name, default=None)


def load_checkpoint(
    path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
) -> Position:
    """Restore weights, optimizer, scheduler and RNG from ``path``; return its position."""
    weights = load_plain(path / "weights.pt")
    params = dict(model.named_parameters())
    missing = sorted(set(weights) ^ {n for n, p in params.items() if p.requires_grad})
    if missing:
        raise ValueError(f"{path} does not match the model's trainable parameters: {missing[:3]}")
    with torch.no_grad():
        for name, tensor in weights.items():
            params[name].copy_(tensor)
    state = load_plain(path / "trainer.pt")
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(state["python_rng"])
    return Position(**json.loads((path / "position.json").read_text()))


def load_plain(file: Path) -> Any:
    """``torch.load`` of a checkpoint file that may hold plain data only (``weights_only``):
    a file with any other pickled object is refused with a UsageError, never unpickled."""
    try:
        return torch.load(file, weights_only=True)
    except pickle.UnpicklingError:
        raise UsageError(
            f"{file} holds pickled objects that are not plain data (tensors, numbers, "
            "strings, lists, dicts); refusing to load it: it could run code"
        ) from None


def _prune(folder: Path, keep: int) -> None:
    steps = sorted(p for p in folder.iterdir() if p.name.startswith(STEP_PREFIX) and p.is_dir())
    complete = [p for p in steps if not p.name.endswith(PARTIAL)]
    for old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
