"""From one question's group of rollouts to an advantage per conversation.

The three estimators of ALGORITHMS.md: ``grpo`` (MemAgent: the outcome advantage broadcast to
every conversation), ``rememr1`` (the outcome advantage alpha-mixed with multi-level step rewards
grouped by step index) and ``rea`` (MemReread: ReA mixed with a small step term). The reward is
the strict judge, or a partial-credit option for small models.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import cast

from ..errors import UsageError
from ..trace import FORMAT_ERROR, Run
from .advantages import (
    broadcast,
    centred_step_terms,
    group_is_degenerate,
    grpo_advantages,
    mix_rea,
    rea_advantages,
    rememr1_advantages,
)
from .rewards import (
    RewardFn,
    contained_reward,
    memory_recall_reward,
    outcome_reward,
    rememr1_step_rewards,
    reread_count,
)

ESTIMATORS = ("grpo", "rememr1", "rea")
REWARDS = ("strict", "contained", "strict+recall")


@dataclass(frozen=True)
class GroupCredit:
    """Rewards and per-conversation advantages of one group, and whether it teaches nothing."""

    rewards: list[float]
    correct: list[float]  # the strict judge's verdict, whatever the reward: what accuracy counts
    advantages: list[list[float]]  # [rollout][step]
    degenerate: bool  # every rollout got the same reward (and, for ReA, rereads)


def reward_function(name: str, kind: str, recall_weight: float = 0.5) -> RewardFn:
    """The reward ``name`` for samples of ``kind`` ("qa" or "ruler").

    ``strict``: the evaluation's judge. ``contained``: MemReread's reference reward.
    ``module:function``: a user's reward (see :func:`imported_reward`).
    ``strict+recall``: strict plus ``recall_weight`` times the word recall of the gold answer
    in the final memory (partial credit that separates rollouts a tiny model all gets wrong).
    """
    strict = partial(outcome_reward, kind=kind)
    if name == "strict":
        return strict
    if name == "contained":
        return contained_reward
    if name == "strict+recall":
        return lambda run, golds: (
            strict(run, golds) + recall_weight * memory_recall_reward(run, golds)
        )
    if ":" in name:
        return imported_reward(name)
    raise ValueError(
        f"unknown reward {name!r}; choose one of {', '.join(REWARDS)} or module:function"
    )


def imported_reward(spec: str) -> RewardFn:
    """A user's reward function named ``package.module:function``: called with the run and
    the gold answers, it returns a float (as the built-in rewards do)."""
    module_name, _, attribute = spec.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot import reward {spec!r}: {exc}") from None
    if not callable(function):
        raise UsageError(f"reward {spec!r} is not a function")
    return cast(RewardFn, function)


def group_credit(
    runs: Sequence[Run],
    golds: Sequence[str],
    *,
    kind: str = "qa",
    reward: str = "strict",
    estimator: str = "grpo",
    std_normalise: bool = False,
    alpha: float | None = None,
    recall_weight: float = 0.5,
    theta: float = 0.9,
) -> GroupCredit:
    """Score a group and give each conversation of each rollout its advantage.

    ``alpha`` defaults to the paper's: 0.8 for ``rememr1`` (weight of the outcome term), 0.05
    for ``rea`` (weight of the step term)."""
    reward_fn = reward_function(reward, kind, recall_weight)
    rewards = [reward_fn(run, golds) for run in runs]
    correct = [outcome_reward(run, golds, kind=kind) for run in runs]
    degenerate = group_is_degenerate(rewards)
    if estimator == "grpo":
        outcome = grpo_advantages(rewards, std_normalise=std_normalise)
        advantages = [broadcast(a, len(run.steps)) for a, run in zip(outcome, runs, strict=True)]
    elif estimator == "rememr1":
        steps = [[r.total for r in rememr1_step_rewards(run, golds)] for run in runs]
        advantages = rememr1_advantages(rewards, steps, 0.8 if alpha is None else alpha)
        degenerate = degenerate and group_is_degenerate([sum(s) for s in steps])
    elif estimator == "rea":
        rereads = [reread_count(run) for run in runs]
        rea = rea_advantages(rewards, rereads, theta)
        steps = centred_step_terms([_format_terms(run) for run in runs])
        advantages = mix_rea(rea, steps, 0.05 if alpha is None else alpha)
        degenerate = degenerate and len(set(rereads)) <= 1
    else:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {', '.join(ESTIMATORS)}")
    return GroupCredit(rewards, correct, advantages, degenerate)


def _format_terms(run: Run) -> list[float]:
    """MemReread's small step term: 1.0 for a call that followed its format, else 0.0. Its
    decide and integrate calls have no memory chain, so ReMemR1's gains do not apply."""
    return [float(FORMAT_ERROR not in step.flags) for step in run.steps]
