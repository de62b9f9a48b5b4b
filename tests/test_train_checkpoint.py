"""Checkpoints hold plain data only and load with ``torch.load(weights_only=True)``."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")  # the 'train' extra; `make install` always installs it

from longread.errors import UsageError  # noqa: E402
from longread.train.checkpoint import (  # noqa: E402
    Position,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)


class Payload:
    """An arbitrary class: unpickling it runs this module's code (here, harmlessly)."""

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (print, ("unpickled and ran",))


def trained(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer, object]:
    """A small model after two AdamW steps (so the optimizer holds state) and its schedule."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    model[0].weight.requires_grad_(False)  # a frozen weight is not saved
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: min(1.0, (k + 1) / 3))
    for _ in range(2):
        model(torch.randn(5, 3)).sum().backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    return model, optimizer, scheduler


def test_a_checkpoint_round_trips_through_weights_only_loading(tmp_path: Path) -> None:
    model, optimizer, scheduler = trained(0)
    random.seed(11)
    torch.manual_seed(12)
    folder = save_checkpoint(
        tmp_path / "checkpoints", Position(step=2, epoch=1, index=3), model, optimizer,
        scheduler, keep=2,
    )  # fmt: skip
    expected_python, expected_torch = random.random(), torch.rand(1)
    for name in ("weights.pt", "trainer.pt"):  # every file is plain data
        torch.load(folder / name, weights_only=True)

    other, other_optimizer, other_scheduler = trained(1)
    random.seed(99)
    position = load_checkpoint(
        latest_checkpoint(tmp_path / "checkpoints"), other, other_optimizer, other_scheduler
    )
    assert position == Position(step=2, epoch=1, index=3)
    for (name, mine), theirs in zip(model.named_parameters(), other.parameters(), strict=True):
        assert torch.equal(mine, theirs) or name == "0.weight"  # trainable ones restored
    assert not torch.equal(model[0].weight, other[0].weight)  # the frozen one is not saved
    state, restored = optimizer.state_dict(), other_optimizer.state_dict()
    assert state["param_groups"] == restored["param_groups"]
    for key, values in state["state"].items():
        assert all(torch.equal(v, restored["state"][key][k]) for k, v in values.items())
    assert other_scheduler.state_dict() == scheduler.state_dict()
    # The RNG states continue where the saved ones stood.
    assert random.random() == expected_python
    assert torch.equal(torch.rand(1), expected_torch)


def test_a_checkpoint_holding_a_pickled_object_is_refused(tmp_path: Path, capsys) -> None:
    model, optimizer, scheduler = trained(0)
    folder = save_checkpoint(tmp_path, Position(step=1), model, optimizer, scheduler, keep=2)
    state = torch.load(folder / "trainer.pt", weights_only=True)
    torch.save({**state, "extra": Payload()}, folder / "trainer.pt")
    with pytest.raises(UsageError, match=r"trainer\.pt holds pickled objects that are not plain"):
        load_checkpoint(folder, model, optimizer, scheduler)
    torch.save({"weight": Payload()}, folder / "weights.pt")
    with pytest.raises(UsageError, match=r"weights\.pt holds pickled objects"):
        load_checkpoint(folder, model, optimizer, scheduler)
    assert "unpickled and ran" not in capsys.readouterr().out  # never unpickled
