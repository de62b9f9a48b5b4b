"""From one question's group of rollouts to an advantage per conversation: the one credit
function every engine calls.

The three estimators of ALGORITHMS.md: ``grpo`` (MemAgent: the outcome advantage broadcast to
every conversation), ``rememr1`` (the outcome advantage alpha-mixed with multi-level step rewards
grouped by step index) and ``rea`` (MemReread: ReA mixed with a small format term, alpha 0.05 as
the paper; alpha 0 is pure ReA). The reward is the strict judge, or a partial-credit option for
small models.

:func:`group_advantages` is the estimator over plain numbers (each rollout's outcome, its step
terms, its reread count); :func:`step_terms` is the per-conversation term an estimator mixes in,
computed from a run. The CPU trainer calls both through :func:`group_credit`; verl's agent loop
records :func:`step_terms` with each conversation and its advantage step hands the regrouped
batch to :func:`group_advantages` (``verl/sessions.py``), so one config means one advantage on
both engines.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import cast

from ..errors import UsageError
from ..trace import FORMAT_ERROR, NOTES_UNGROUNDED, Run
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
    exit_gate_reward,
    memory_recall_reward,
    outcome_reward,
    rememr1_step_rewards,
    reread_count,
    steps_before_evidence,
    unsupported_note_share,
)

ESTIMATORS = ("grpo", "rememr1", "rea")
# The paper's mix weight per estimator: ReMemR1's alpha weighs the outcome term (0.8);
# MemReread's weighs the step term (0.05); grpo mixes nothing.
DEFAULT_ALPHA = {"grpo": 0.0, "rememr1": 0.8, "rea": 0.05}
DEFAULT_THETA = 0.9  # ReA: a rollout is correct when its reward is above theta
# The agents each estimator can train: ReMemR1's step rewards follow one memory chain (update
# and final calls), which MemReread's decide and integrate calls break; ReA ranks rollouts by
# their rereads, which only MemReread makes. GRPO needs nothing from the agent.
ESTIMATOR_AGENTS: dict[str, tuple[str, ...] | None] = {
    "grpo": None,
    "rememr1": ("memagent", "rememr1"),
    "rea": ("memreread",),
}
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
    theta: float = DEFAULT_THETA,
    evidence: Sequence[str] = (),
    early_exit_penalty: float = 0.0,
    skip_bonus: float = 0.0,
    unsupported_penalty: float = 0.0,
    document: str = "",
    credit_before_evidence: bool = True,
    ungrounded_penalty: float = 0.0,
) -> GroupCredit:
    """Score a group and give each conversation of each rollout its advantage
    (:func:`group_advantages`). ``alpha`` None is the paper's (:data:`DEFAULT_ALPHA`).
    ``early_exit_penalty`` and ``skip_bonus`` add the exit gate's terms
    (:func:`~longread.train.rewards.exit_gate_reward`) to each reward, judged against the
    sample's ``evidence`` sentences; ``unsupported_penalty`` subtracts that weight times the
    share of updates whose notes hold a number ``document`` (the sample's text and question)
    never states (:func:`~longread.train.rewards.unsupported_note_share`).
    ``credit_before_evidence`` False gives no advantage to the steps before the first evidence
    sentence was shown (:func:`~longread.train.rewards.steps_before_evidence`): the outcome
    then never credits or blames what a rollout wrote at filler sections, such as a claim made
    up before the needle, or the "No previous memory" that was right there (True: the papers'
    broadcast to every conversation). ``ungrounded_penalty`` adds a per-turn term
    (:func:`ungrounded_terms`): an update whose notes were cut as ungrounded loses that weight
    against the group's other updates at the same step, one that wrote none gains it; a
    group whose outcomes tie still teaches when its updates differ there."""
    check_estimator(estimator)
    reward_fn = reward_function(reward, kind, recall_weight)
    correct = [outcome_reward(run, golds, kind=kind) for run in runs]
    rewards = [
        reward_fn(run, golds)
        + exit_gate_term(run, evidence, c, early_exit_penalty, skip_bonus)
        - unsupported_term(run, document, golds, unsupported_penalty)
        for run, c in zip(runs, correct, strict=True)
    ]
    steps = [step_terms(run, golds, estimator) for run in runs]
    terms = None if any(s is None for s in steps) else [s or [] for s in steps]
    rereads = [reread_count(run) for run in runs]
    advantages = group_advantages(
        estimator,
        rewards,
        [len(run.steps) for run in runs],
        step_terms=terms,
        rereads=rereads,
        alpha=alpha,
        theta=theta,
        std_normalise=std_normalise,
    )
    if not credit_before_evidence:
        advantages = no_credit_before_evidence(runs, advantages, evidence)
    degenerate = group_is_degenerate(rewards)
    if ungrounded_penalty:
        turns = ungrounded_terms(ungrounded_flags(runs), ungrounded_penalty)
        advantages = with_terms(advantages, turns)
        degenerate = degenerate and not any(t for row in turns for t in row)
    if estimator == "rememr1":
        degenerate = degenerate and group_is_degenerate([sum(s) for s in terms or []])
    elif estimator == "rea":
        degenerate = degenerate and len(set(rereads)) <= 1
    return GroupCredit(rewards, correct, advantages, degenerate)


def no_credit_before_evidence(
    runs: Sequence[Run], advantages: Sequence[Sequence[float]], evidence: Sequence[str]
) -> list[list[float]]:
    """``advantages`` (``[rollout][step]``) with 0 for each run's steps before the first
    evidence sentence was shown (:func:`~longread.train.rewards.steps_before_evidence`)."""
    return masked_before(advantages, [steps_before_evidence(run, evidence) for run in runs])


def masked_before(
    advantages: Sequence[Sequence[float]], before: Sequence[int]
) -> list[list[float]]:
    """``advantages`` with 0 for rollout i's first ``before[i]`` steps (the CPU trainer's and
    verl's advantage steps both mask this way)."""
    return [[0.0] * n + list(row[n:]) for row, n in zip(advantages, before, strict=True)]


def ungrounded_flags(runs: Sequence[Run]) -> list[list[bool]]:
    """``[rollout][step]``: whether grounded notes cut a note from that step's memory."""
    return [[NOTES_UNGROUNDED in step.flags for step in run.steps] for run in runs]


def ungrounded_terms(flagged: Sequence[Sequence[bool]], penalty: float) -> list[list[float]]:
    """``[rollout][step]``: ``-penalty`` x (1 for a step flagged ``notes_ungrounded``, else 0,
    minus the share of the group's rollouts flagged at that step index), as ReMemR1's step
    term is centred (:func:`~longread.train.advantages.centred_step_terms`): the updates
    that made a claim the sections do not hold are pushed down against those that did not,
    and a step every rollout got alike adds nothing."""
    as_floats = [[float(flag) for flag in row] for row in flagged]
    return [[-penalty * c for c in row] for row in centred_step_terms(as_floats)]


def with_terms(
    advantages: Sequence[Sequence[float]], terms: Sequence[Sequence[float]]
) -> list[list[float]]:
    """``advantages + terms``, step by step."""
    return [
        [a + t for a, t in zip(row, extra, strict=True)]
        for row, extra in zip(advantages, terms, strict=True)
    ]


def exit_gate_term(
    run: Run,
    evidence: Sequence[str],
    correct: float,
    early_exit_penalty: float = 0.0,
    skip_bonus: float = 0.0,
) -> float:
    """The exit gate's reward terms for one rollout (GRU-Mem; 0 when both weights are 0, the
    papers' MemAgent reward): what this trainer and verl's agent loop both add."""
    if not (early_exit_penalty or skip_bonus):
        return 0.0
    return exit_gate_reward(
        run, evidence, correct, early_penalty=early_exit_penalty, skip_bonus=skip_bonus
    )


def unsupported_term(run: Run, document: str, golds: Sequence[str], penalty: float) -> float:
    """``penalty`` x the share of the run's updates whose notes hold a number ``document`` and
    the gold answers never state (0 when ``penalty`` is 0, the papers' reward)."""
    return penalty * unsupported_note_share(run, document, golds) if penalty else 0.0


def check_estimator(estimator: str) -> None:
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {', '.join(ESTIMATORS)}")


def needs_step_terms(estimator: str, alpha: float | None = None) -> bool:
    """Whether ``estimator`` with ``alpha`` mixes in a step term (:func:`step_terms`)."""
    weight = DEFAULT_ALPHA[estimator] if alpha is None else alpha
    return estimator == "rememr1" or (estimator == "rea" and weight > 0.0)


def step_terms(run: Run, golds: Sequence[str], estimator: str) -> list[float] | None:
    """The per-conversation term ``estimator`` mixes into its advantage, one per step of
    ``run``: ReMemR1's r_t (:func:`rememr1_step_rewards`) for ``rememr1``, MemReread's format
    term for ``rea`` (1.0 for a call that followed its format, else 0.0: its decide and
    integrate calls have no memory chain, so ReMemR1's gains do not apply); None for ``grpo``.
    """
    check_estimator(estimator)
    if estimator == "rememr1":
        return [r.total for r in rememr1_step_rewards(run, golds)]
    if estimator == "rea":
        return [float(FORMAT_ERROR not in step.flags) for step in run.steps]
    return None


def group_advantages(
    estimator: str,
    outcomes: Sequence[float],
    lengths: Sequence[int],
    *,
    step_terms: Sequence[Sequence[float]] | None = None,
    rereads: Sequence[int] | None = None,
    alpha: float | None = None,
    theta: float = DEFAULT_THETA,
    std_normalise: bool = False,
) -> list[list[float]]:
    """The advantage of every conversation of a group: ``[rollout][step]``.

    ``outcomes[i]``: rollout i's reward; ``lengths[i]``: its conversations; ``step_terms[i]``
    (:func:`step_terms`, one per conversation) where the estimator mixes them in
    (:func:`needs_step_terms`); ``rereads[i]``: its reread count (``rea``). ``alpha`` None is
    the paper's weight; ``std_normalise`` applies to ``grpo``. Raises ValueError when an input
    the estimator needs is missing or does not match the lengths.
    """
    check_estimator(estimator)
    weight = DEFAULT_ALPHA[estimator] if alpha is None else alpha
    if len(lengths) != len(outcomes):
        raise ValueError(f"{len(outcomes)} outcomes but {len(lengths)} rollouts")
    steps: list[list[float]] = []
    if needs_step_terms(estimator, alpha):
        if step_terms is None or [len(s) for s in step_terms] != list(lengths):
            raise ValueError(f"{estimator} needs a step term for every conversation")
        steps = [list(s) for s in step_terms]
    if estimator == "grpo":
        outcome = grpo_advantages(outcomes, std_normalise=std_normalise)
        return [broadcast(a, n) for a, n in zip(outcome, lengths, strict=True)]
    if estimator == "rememr1":
        return rememr1_advantages(outcomes, steps, weight)
    if rereads is None or len(rereads) != len(outcomes):
        raise ValueError("rea needs each rollout's reread count")
    rea = rea_advantages(outcomes, rereads, theta)
    if weight == 0.0:  # pure ReA
        return [broadcast(a, n) for a, n in zip(rea, lengths, strict=True)]
    return mix_rea(rea, centred_step_terms(steps), weight)
