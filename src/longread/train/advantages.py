"""Group advantages for multi-conversation RL (ALGORITHMS.md sections 2, 3 and 7).

Every function takes one group: the n rollouts of one question, in a fixed order, and returns
advantages in the same order. A rollout is a list of conversations (steps); what it returns per
rollout is either one advantage (given to every step with :func:`broadcast`) or one per step.
Pure Python: groups are small (n = 4 to 16) and this runs once per training step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _sample_std(values: Sequence[float]) -> float:
    """Standard deviation with Bessel's correction (n - 1), as TRL's and verl's GRPO use."""
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def group_is_degenerate(rewards: Sequence[float]) -> bool:
    """True when every rollout of the group got the same reward (or the group has fewer than
    two), so its GRPO outcome advantage is zero for all (TRAINING.md, "Pitfalls").

    The trainer drops or keeps such groups by option, and counts them either way. (ReA can still
    give a degenerate group non-zero advantages when the reread counts differ.)
    """
    return len(set(rewards)) <= 1


def grpo_advantages(
    rewards: Sequence[float], *, std_normalise: bool = False, eps: float = 1e-6
) -> list[float]:
    """GRPO outcome advantages (ALGORITHMS.md section 7): each reward minus the group mean,
    divided by ``(std + eps)`` when ``std_normalise`` (std with n - 1, as TRL and verl).

    A group of one has advantage 0 (its reward is its mean; its std is undefined). An empty
    group gives an empty list.
    """
    if not rewards:
        return []
    mean = _mean(rewards)
    centred = [r - mean for r in rewards]
    if not std_normalise or len(rewards) < 2:
        return centred
    std = _sample_std(rewards)
    if std == 0.0:  # all equal: every centred reward is 0 already; eps may be 0
        return centred
    return [c / (std + eps) for c in centred]


def broadcast(advantage: float, n_steps: int) -> list[float]:
    """The rollout's advantage for each of its ``n_steps`` conversations (ALGORITHMS.md
    section 7: the outcome advantage is given to every conversation of the trajectory)."""
    if n_steps < 0:
        raise ValueError(f"n_steps must be 0 or more, not {n_steps}")
    return [advantage] * n_steps


def centred_step_terms(step_rewards: Sequence[Sequence[float]]) -> list[list[float]]:
    """``r_{i,t}`` minus the mean of ``r_{.,t}`` over the group's rollouts that have a step t
    (ALGORITHMS.md section 2): steps are grouped by index, so a longer rollout's extra steps
    are compared only with the rollouts that reached them (alone: 0). No std division."""
    longest = max((len(r) for r in step_rewards), default=0)
    means = [_mean([r[t] for r in step_rewards if len(r) > t]) for t in range(longest)]
    return [[r_t - means[t] for t, r_t in enumerate(r)] for r in step_rewards]


def rememr1_advantages(
    outcomes: Sequence[float], step_rewards: Sequence[Sequence[float]], alpha: float = 0.8
) -> list[list[float]]:
    """ReMemR1's per-step advantages (ALGORITHMS.md section 2)::

        A_{i,t} = alpha * (R_i - mean_j R_j) + (1 - alpha) * (r_{i,t} - mean_{j: t < len_j} r_{j,t})

    ``outcomes[i]`` is rollout i's outcome reward R_i, ``step_rewards[i][t]`` its step reward
    r_t (``StepReward.total``). No std division. The weights are applied as written: the
    reference implementation doubled the step term by accident.
    """
    if len(outcomes) != len(step_rewards):
        raise ValueError(
            f"{len(outcomes)} outcomes but {len(step_rewards)} rollouts of step rewards"
        )
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], not {alpha}")
    outcome_terms = grpo_advantages(outcomes)
    return [
        [alpha * a + (1 - alpha) * s for s in steps]
        for a, steps in zip(outcome_terms, centred_step_terms(step_rewards), strict=True)
    ]


def _z_scores(values: Sequence[float]) -> list[float]:
    """(v - mean) / std with the population std; all 0 when the values are all equal, so a
    group of ties gets no push either way instead of NaN."""
    mean = _mean(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    if std == 0.0:
        return [0.0] * len(values)
    return [(v - mean) / std for v in values]


def _softmax(values: Sequence[float]) -> list[float]:
    top = max(values)  # shifted by the max so exp never overflows
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def rea_advantages(
    rewards: Sequence[float], rereads: Sequence[int], theta: float = 0.9
) -> list[float]:
    """MemReread's ReA advantages, one per rollout (ALGORITHMS.md section 3). A rollout is
    correct when its reward is above ``theta``; k_i is its reread count.

    - all correct: z-score of -k over the group (fewer rereads is better);
    - all wrong: z-score of +k (more rereads is better: it encourages exploring);
    - mixed: a correct rollout gets ``exp(-k_i) / sum_{j correct} exp(-k_j)`` (positive), a
      wrong one ``-exp(-k_i) / sum_{j wrong} exp(-k_j)`` (negative).

    z-scores use the population std and are 0 when all k are equal (no NaN). Empty group: [].
    """
    if len(rewards) != len(rereads):
        raise ValueError(f"{len(rewards)} rewards but {len(rereads)} reread counts")
    if not rewards:
        return []
    correct = [r > theta for r in rewards]
    if all(correct):
        return _z_scores([-k for k in rereads])
    if not any(correct):
        return _z_scores([float(k) for k in rereads])
    right = iter(_softmax([-k for k, ok in zip(rereads, correct, strict=True) if ok]))
    wrong = iter(_softmax([-k for k, ok in zip(rereads, correct, strict=True) if not ok]))
    return [next(right) if ok else -next(wrong) for ok in correct]


def mix_rea(
    rea: Sequence[float], step_terms: Sequence[Sequence[float]], alpha: float = 0.05
) -> list[list[float]]:
    """ReA mixed with a small step term (ALGORITHMS.md section 3, alpha = 0.05)::

        A_{i,t} = (1 - alpha) * rea_i + alpha * step_terms[i][t]

    A convex mix, like ReMemR1's, so the scale of ReA is kept; here alpha weighs the step term.
    ``step_terms`` are per-step terms already centred within the group, e.g.
    :func:`centred_step_terms` of the step rewards; one list per rollout.
    """
    if len(rea) != len(step_terms):
        raise ValueError(f"{len(rea)} ReA advantages but {len(step_terms)} rollouts of steps")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], not {alpha}")
    return [
        [(1 - alpha) * a + alpha * s for s in steps]
        for a, steps in zip(rea, step_terms, strict=True)
    ]
