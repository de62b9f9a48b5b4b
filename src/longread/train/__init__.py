"""Training the memory agents (ALGORITHMS.md sections 2, 3 and 7): rollouts are the agents' own
runs with token records; rewards and advantages are pure functions over them; every
conversation becomes one training row.

The pure parts are imported here, the group credit every engine shares among them
(``credit``). The torch parts (``loss``, ``policy``, ``trainer`` with its ``rollouts``,
``update`` and ``run_folder``, ``session``, ``export``) need the ``train`` extra and are
imported from their modules, so the rest stays light; ``verl`` holds the adapter for verl's GPU
trainer."""

from .advantages import (
    broadcast,
    centred_step_terms,
    group_is_degenerate,
    grpo_advantages,
    mix_rea,
    rea_advantages,
    rememr1_advantages,
)
from .credit import GroupCredit, group_advantages, group_credit, step_terms
from .episodes import TrainingRow, training_rows
from .rewards import (
    StepReward,
    contained_reward,
    group_rewards,
    memory_recall_reward,
    outcome_reward,
    rememr1_step_rewards,
    reread_count,
)

__all__ = [
    "GroupCredit",
    "StepReward",
    "TrainingRow",
    "broadcast",
    "centred_step_terms",
    "contained_reward",
    "group_advantages",
    "group_credit",
    "group_is_degenerate",
    "group_rewards",
    "grpo_advantages",
    "memory_recall_reward",
    "mix_rea",
    "outcome_reward",
    "rea_advantages",
    "rememr1_advantages",
    "rememr1_step_rewards",
    "reread_count",
    "step_terms",
    "training_rows",
]
