"""longread's advantages in verl's advantage step (verl 0.9.1: ``trainer/ppo/core_algos.py``,
``trainer/ppo/v1/trainer_base.py``, ``trainer/ppo/v1/utils.py``).

verl's v1 trainer computes advantages in ``PPOTrainer._compute_advantage``, which calls
``compute_advantage_for_multi_trajectories``: for ``grpo`` it takes each rollout's final row
and broadcasts its advantage to the rollout's other conversations (all MemAgent needs:
``algorithm.adv_estimator=grpo``). Any other estimator is called once over all rows with only
the rewards, the response masks and the question ids: it cannot tell which rollout or which
conversation a row is, and never sees step rewards or reread counts. So this module registers:

- ``longread_grpo``, ``longread_rememr1`` and ``longread_rea`` (``register_adv_est``):
  estimators that compute :func:`~longread.train.verl.row_advantages` (the CPU trainer's own
  credit function) from verl's rewards plus the batch's rows;
- ``longread_sync``, ``longread_colocate_async`` and ``longread_separate_async``
  (``register_trainer``): verl's three trainers, unchanged except that ``_compute_advantage``
  first reads every row's key and the loop's payload and hands them to the estimator for the
  length of verl's own advantage step (so KL-in-reward, rollout correction and the write-back
  stay verl's). Each behaves as the verl mode it wraps.

verl must import this module in every process (the trainer and the rollout workers are Ray
actors): set ``VERL_USE_EXTERNAL_MODULES=longread.train.verl.plugin``; ``import verl`` then
imports it. It imports the agent loop too, so ``longread_agent`` is registered everywhere.
Settings come from ``algorithm.longread`` (``+algorithm.longread.alpha=0.8``,
``+algorithm.longread.theta=0.9``, ``+algorithm.longread.std_normalise=true``,
``+algorithm.longread.credit_before_evidence=false``,
``+algorithm.longread.ungrounded_penalty=0.5``), the names of the CPU trainer's ``[reward]``
settings; absent, the papers' values apply (and no std division, and every conversation
credited).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ...errors import UsageError
from . import ESTIMATORS, verl_missing
from . import loop as _loop  # noqa: F401  (registers the agent loop in this process too)
from .sessions import DEFAULT_THETA, SessionRow, row_advantages, session_rows

try:
    import torch
    import transfer_queue as tq
    from verl.trainer.ppo.core_algos import register_adv_est
    from verl.trainer.ppo.v1 import (
        PPOTrainerColocateAsync,
        PPOTrainerSeparateAsync,
        PPOTrainerSync,
    )
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer, register_trainer
except ImportError as error:
    raise verl_missing(error) from None

TRAINERS = {"longread_sync": "sync", "longread_colocate_async": "colocate_async",
            "longread_separate_async": "separate_async"}  # fmt: skip

# The rows of the batch whose advantages verl is computing, in verl's row order.
_ROWS: ContextVar[list[SessionRow] | None] = ContextVar("longread_rows", default=None)


@contextmanager
def batch_rows(rows: Sequence[SessionRow]) -> Iterator[None]:
    """Within the block, the longread estimators read ``rows`` as the batch's rows."""
    token = _ROWS.set(list(rows))
    try:
        yield
    finally:
        _ROWS.reset(token)


def estimate(
    method: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any] | None,
    config: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's estimator contract: (advantages, returns), both (rows, response length), the
    row's advantage on each of its response tokens. A rollout's outcome is its final row's
    summed token reward, as in verl's GRPO."""
    rows = _ROWS.get()
    if rows is None:
        raise UsageError(
            f"the longread_{method} advantage needs a longread trainer: set "
            f"trainer.v1.trainer_mode to one of {', '.join(TRAINERS)}"
        )
    uids = [str(u) for u in index] if index is not None else [r.uid for r in rows]
    if uids != [r.uid for r in rows]:
        raise RuntimeError("the advantage step's rows are not in the order of the batch's keys")
    section = (config.get("longread", None) if hasattr(config, "get") else None) or {}
    alpha = section.get("alpha")
    values = row_advantages(
        rows,
        token_level_rewards.sum(dim=-1).tolist(),
        method,
        alpha=None if alpha is None or alpha < 0 else float(alpha),  # -1: as the CPU config
        theta=float(section.get("theta", DEFAULT_THETA)),
        std_normalise=bool(section.get("std_normalise", False)),
        credit_before_evidence=bool(section.get("credit_before_evidence", True)),
        ungrounded_penalty=float(section.get("ungrounded_penalty", 0.0)),
    )
    scores = torch.tensor(values, dtype=token_level_rewards.dtype, device=response_mask.device)
    advantages = scores.unsqueeze(-1) * response_mask
    return advantages, advantages


@register_adv_est("longread_grpo")
def grpo_estimator(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any] | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO (ALGORITHMS.md section 7) through the CPU trainer's credit function: verl's own
    ``grpo`` gives the same values, except a question with one rollout (verl: its reward;
    longread: 0)."""
    return estimate("grpo", token_level_rewards, response_mask, index, config)


@register_adv_est("longread_rememr1")
def rememr1_estimator(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any] | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ReMemR1's per-step advantage (ALGORITHMS.md section 2) as a verl estimator."""
    return estimate("rememr1", token_level_rewards, response_mask, index, config)


@register_adv_est("longread_rea")
def rea_estimator(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any] | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """MemReread's ReA (ALGORITHMS.md section 3), mixed with its format term (alpha 0.05;
    the agent loop records it with ``step_rewards: rea``), as a verl estimator."""
    return estimate("rea", token_level_rewards, response_mask, index, config)


class LongreadTrainer(PPOTrainer):
    """What the three longread trainers add to verl's: the batch's rows for the estimators.

    verl's trainer stores ``trainer.v1.trainer_mode`` (here ``longread_sync``...) and compares
    it with "sync" to choose its replay buffer and config section; ``trainer_mode`` answers
    with the wrapped mode instead, so each longread trainer behaves as the mode it wraps.
    """

    base_mode = "sync"

    @property
    def trainer_mode(self) -> str:
        return self.base_mode

    @trainer_mode.setter
    def trainer_mode(self, name: str) -> None:
        """Ignored: the registered name selected this class; the mode is ``base_mode``."""

    def _compute_advantage(self, batch: Any, metrics: dict[str, Any]) -> Any:
        if self.config.algorithm.adv_estimator not in ESTIMATORS:
            return super()._compute_advantage(batch, metrics)
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"]
        )
        padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
        rows = session_rows(batch.keys, _plain_list(data.pop("extra_fields")), padding)
        with batch_rows(rows):
            return super()._compute_advantage(batch, metrics)


def _plain_list(values: Any) -> list[Any]:
    """A non-tensor column as a list: TransferQueue hands it back as a NonTensorStack, a
    tensordict LinkedList or a numpy array depending on its backend."""
    items = values.tolist() if hasattr(values, "tolist") else list(values)
    return [getattr(item, "data", item) for item in items]


@register_trainer("longread_sync")
class LongreadTrainerSync(LongreadTrainer, PPOTrainerSync):
    """verl's synchronous trainer with longread's advantages."""

    base_mode = "sync"


@register_trainer("longread_colocate_async")
class LongreadTrainerColocateAsync(LongreadTrainer, PPOTrainerColocateAsync):
    """verl's colocated asynchronous trainer with longread's advantages."""

    base_mode = "colocate_async"


@register_trainer("longread_separate_async")
class LongreadTrainerSeparateAsync(LongreadTrainer, PPOTrainerSeparateAsync):
    """verl's separate-GPU asynchronous trainer with longread's advantages."""

    base_mode = "separate_async"
