"""Training rows from agent runs: one row per conversation, the engine-neutral seam.

A rollout is one agent run; each of its conversations (steps) is its own training sequence,
with the prompt masked out and the loss on the completion tokens (ALGORITHMS.md section 7).
A row carries what verl and SkyRL consume (TRAINING.md): prompt ids, completion ids, loss mask,
the sampler's logprobs, the advantage, the group (question) id, the rollout id, the step index
and whether it is the final call. A supervised row (the warm start) has no advantage but a
``weight``: how much its tokens count in the likelihood. The ids are the ones the backend
sampled, taken from the step record: nothing is re-tokenised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..trace import Run


@dataclass(frozen=True)
class TrainingRow:
    """One conversation of one rollout, ready for a policy-gradient loss (``advantage``), or
    one supervised episode's conversation, ready for a weighted likelihood (``weight``)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    old_logprobs: list[float] | None  # the sampler's; trainers recompute them on their weights
    advantage: float
    group: str  # the question the rollout answered: advantages are relative within it
    rollout: str  # the run id
    step: int  # the conversation's index in the rollout
    is_final: bool
    weight: float = 1.0  # supervised rows: the tokens' weight in the NLL; RL ignores it

    @property
    def loss_mask(self) -> list[int]:
        """0 over the prompt, 1 over the completion: the loss is on sampled tokens only."""
        return [0] * len(self.prompt_ids) + [1] * len(self.completion_ids)


def training_rows(run: Run, advantages: Sequence[float], group: str) -> list[TrainingRow]:
    """One row per step of ``run``, step ``t`` weighted by ``advantages[t]`` (the outcome
    advantage broadcast to every conversation, or a per-step mix such as ReMemR1's).

    Raises ValueError when the run was not recorded with tokens (``record_tokens=True``):
    training on re-tokenised text would train on ids the model never sampled."""
    if len(advantages) != len(run.steps):
        raise ValueError(f"{len(advantages)} advantages for a run of {len(run.steps)} steps")
    rows = []
    for step, advantage in zip(run.steps, advantages, strict=True):
        tokens = step.tokens
        if tokens is None or tokens.prompt_ids is None:
            raise ValueError(
                f"step {step.step} of run {run.run_id} has no recorded prompt and completion "
                "ids; run the agent with record_tokens=True"
            )
        rows.append(
            TrainingRow(
                prompt_ids=tokens.prompt_ids,
                completion_ids=tokens.completion_ids,
                old_logprobs=tokens.logprobs,
                advantage=advantage,
                group=group,
                rollout=run.run_id,
                step=step.step,
                is_final=step.kind == "final" and step is run.steps[-1],
            )
        )
    return rows
