"""Rollout collection for the CPU trainer: samples in a seeded order, every rollout of a step
through the agent itself, each group scored by the shared credit function, and the training
rows (one per conversation) that the update trains on.

Every rollout's sampling seed is a function of the run seed, the step, the group and the
rollout's index, so a resumed run samples exactly what an uninterrupted one would have.

State-reset episodes: a sample whose ``meta["memory"]`` holds notes starts its memagent
rollouts from them instead of from empty notes (a memory state sampled along a long
document, with the next one to three sections as its document), so a group of 8-16 rollouts
costs a few calls each and still trains the moment long documents go wrong at. A sample's
``meta["section_first"]`` (true or false) reads it in that order whatever the agent config
says, so one step can train states reached in both orders.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, pstdev
from typing import Any

from tqdm.auto import tqdm

from ..agents import make_agent, make_config
from ..agents.memagent import MemAgent
from ..data.evidence import evidence_sentences
from ..data.records import Sample
from ..errors import UsageError
from ..llm.base import LLMBackend
from ..text.tokenizer import Tokenizer
from ..trace import FORMAT_ERROR, NO_BOXED_ANSWER, Run
from .checkpoint import Position
from .config import TrainConfig
from .credit import GroupCredit, group_credit
from .engines import RolloutEngine
from .episodes import TrainingRow, training_rows


def reset_state_record(
    sample: Sample,
    state_id: str,
    kind: str,
    notes: str,
    sections: Sequence[str],
    section_first: bool = False,
) -> dict[str, Any]:
    """A state-reset episode as a data record (the module docstring): ``sample``'s question
    and answers, ``sections`` joined as its document, ``notes`` as the memory it starts from,
    ``kind`` naming where along the document the state was cut (e.g. "arrival": the needle's
    section is next). Recipes write these as JSONL; ``load_files`` reads them back."""
    meta = {**sample.meta, "memory": notes, "state": kind, "section_first": section_first}
    return {
        "id": state_id,
        "question": sample.question,
        "context": "\n\n".join(sections),
        "answers": sample.answers,
        "meta": meta,
    }


@dataclass
class Rollouts:
    """One step's rollouts: per group, the sample, its runs and its credit."""

    samples: list[Sample]
    runs: list[list[Run]]
    credit: list[GroupCredit]


class DataOrder:
    """A fresh seeded shuffle of the training set every epoch; ``take`` advances a Position."""

    def __init__(self, samples: Sequence[Sample], seed: int) -> None:
        if not samples:
            raise UsageError("no training samples")
        self.samples = list(samples)
        self.seed = seed

    def order(self, epoch: int) -> list[int]:
        indices = list(range(len(self.samples)))
        random.Random(f"{self.seed}:{epoch}").shuffle(indices)
        return indices

    def take(self, position: Position, count: int) -> list[Sample]:
        taken: list[Sample] = []
        while len(taken) < count:
            order = self.order(position.epoch)
            if position.index >= len(order):
                position.epoch, position.index = position.epoch + 1, 0
                continue
            taken.append(self.samples[order[position.index]])
            position.index += 1
        return taken


def agent_config(
    config: TrainConfig,
    *,
    seed: int | None,
    temperature: float | None = None,
    section_first: bool | None = None,
) -> Any:
    """The agent config of a rollout (the rollout sampling, ``seed``) or, with
    ``temperature``, of an evaluation (top-p off); ``section_first`` overrides the agent's
    reading order (memagent)."""
    agent = config.agent
    options = {
        "prompt_set": agent.prompt_set,
        "chunk_tokens": agent.chunk_tokens,
        "memory_tokens": agent.memory_tokens,
        "final_tokens": agent.final_tokens,
        "temperature": config.rollout.temperature if temperature is None else temperature,
        "top_p": config.rollout.top_p if temperature is None else 1.0,
        "seed": seed,
        **agent.options,
    }
    if section_first is not None:
        options["section_first"] = section_first
    return make_config(agent.name, **options)


def rollout_seed(seed: int, step: int, group: int, k: int) -> int:
    """The sampling seed of rollout ``k`` of group ``group`` at step ``step``."""
    return random.Random(f"{seed}:{step}:{group}:{k}").randrange(2**31)


def collect_rollouts(
    config: TrainConfig,
    engine: RolloutEngine,
    tokenizer: Tokenizer,
    samples: list[Sample],
    number: int,
    *,
    progress: bool = True,
    first_group: int = 0,
) -> Rollouts:
    """Every rollout of step ``number`` through the agent itself, scored per group;
    ``first_group`` numbers the groups after those already rolled out this step (refills),
    so every group of a step has its own seeds."""
    n = config.rollout.rollouts
    bar = tqdm(
        total=len(samples) * n, desc=f"step {number} rollouts", unit="run", leave=False,
        disable=not progress, dynamic_ncols=True,
    )  # fmt: skip
    try:
        flat = asyncio.run(
            _run_all(config, engine.open(), tokenizer, samples, number, bar, first_group)
        )
    finally:
        bar.close()
    runs = [flat[g * n : (g + 1) * n] for g in range(len(samples))]
    credit = [credit_of(config, s, group) for s, group in zip(samples, runs, strict=True)]
    return Rollouts(samples, runs, credit)


async def _run_all(
    config: TrainConfig,
    backend: LLMBackend,
    tokenizer: Tokenizer,
    samples: list[Sample],
    number: int,
    bar: Any,
    first_group: int,
) -> list[Run]:
    """The step's rollouts, concurrently, group by group then rollout by rollout; the backend
    is closed afterwards (an engine opens a fresh one per step; closing the policy's own
    backend is a no-op)."""

    async def one(sample: Sample, group: int, k: int) -> Run:
        seed = rollout_seed(config.run.seed, number, group, k)
        order = sample.meta.get("section_first")
        if order is not None and config.agent.name != "memagent":
            raise UsageError(f"sample {sample.id} names a reading order: memagent only")
        options = agent_config(config, seed=seed, section_first=order)
        agent = make_agent(config.agent.name, backend, tokenizer, options, record_tokens=True)
        start = sample.meta.get("memory")
        if start:  # a state-reset episode (module docstring)
            if not isinstance(agent, MemAgent) or config.reward.estimator == "rememr1":
                # rememr1's step rewards measure the first update against empty notes
                raise UsageError(
                    f"sample {sample.id} starts from notes: memagent with the grpo estimator only"
                )
            agent.start_memory = str(start)
        run = await agent.run(sample.question, sample.context, sample_id=sample.id)
        bar.update(1)
        return run

    jobs = [
        one(s, first_group + g, k)
        for g, s in enumerate(samples)
        for k in range(config.rollout.rollouts)
    ]
    try:
        return list(await asyncio.gather(*jobs))
    finally:
        await backend.aclose()


def merge(first: Rollouts, more: Rollouts) -> Rollouts:
    """One step's rollouts and a refill's, in the order they ran."""
    return Rollouts(
        first.samples + more.samples, first.runs + more.runs, first.credit + more.credit
    )


def credit_of(config: TrainConfig, sample: Sample, runs: list[Run]) -> GroupCredit:
    """The credit step: one group's rewards and advantages, as ``config.reward`` says."""
    reward = config.reward
    gated = bool(reward.early_exit_penalty or reward.skip_bonus)
    watched = gated or not reward.credit_before_evidence
    return group_credit(
        runs,
        sample.answers,
        kind=sample.meta.get("kind", "qa"),
        reward=reward.reward,
        estimator=reward.estimator,
        std_normalise=reward.std_normalise,
        alpha=None if reward.alpha < 0 else reward.alpha,
        recall_weight=reward.recall_weight,
        evidence=evidence_sentences(sample) if watched else (),
        early_exit_penalty=reward.early_exit_penalty,
        skip_bonus=reward.skip_bonus,
        unsupported_penalty=reward.unsupported_penalty,
        document=f"{sample.context}\n{sample.question}" if reward.unsupported_penalty else "",
        credit_before_evidence=reward.credit_before_evidence,
        ungrounded_penalty=reward.ungrounded_penalty,
    )


def rollout_rows(config: TrainConfig, rollouts: Rollouts) -> tuple[list[TrainingRow], int]:
    """The step's training rows and the number of degenerate groups dropped (kept with
    ``reward.keep_degenerate``)."""
    rows: list[TrainingRow] = []
    dropped = 0
    for sample, runs, credit in zip(rollouts.samples, rollouts.runs, rollouts.credit, strict=True):
        if credit.degenerate and not config.reward.keep_degenerate:
            dropped += 1
            continue
        for run, advantages in zip(runs, credit.advantages, strict=True):
            rows.extend(training_rows(run, advantages, sample.id))
    return rows, dropped


def reward_record(credit: Sequence[GroupCredit]) -> dict[str, Any]:
    """The mean reward, its mean spread within groups (GRPO learns only from that spread: a
    group whose rollouts all score alike adds nothing however high its mean), accuracy, and
    each group's accuracy in the order of the step's ``samples`` (which kinds of state it
    learns on)."""
    return {
        "reward": fmean(r for c in credit for r in c.rewards),
        "reward_group_std": fmean(pstdev(c.rewards) for c in credit),
        "accuracy": fmean(r for c in credit for r in c.correct),
        "group_accuracy": [fmean(c.correct) for c in credit],
    }


def rollout_lines(rollouts: Rollouts) -> list[dict[str, Any]]:
    """One JSON-ready line per rollout of the step, in the order they ran: its group and
    sample, reward, the judge's verdict, advantages, whether the group was dropped as
    degenerate, and the run (its steps without token ids, which only the update reads)."""
    lines = []
    for group, (sample, runs, credit) in enumerate(
        zip(rollouts.samples, rollouts.runs, rollouts.credit, strict=True)
    ):
        for k, run in enumerate(runs):
            trace = run.to_dict()
            for step in trace["steps"]:
                step.pop("tokens", None)
            lines.append({
                "group": group, "k": k, "sample_id": sample.id,
                "reward": credit.rewards[k], "correct": credit.correct[k],
                "advantages": credit.advantages[k], "degenerate": credit.degenerate,
                "run": trace,
            })  # fmt: skip
    return lines


def rollout_record(rollouts: Rollouts) -> dict[str, Any]:
    """What the step's metrics say about its rollouts: reward (`reward_record`), memory
    length, format errors, tokens."""
    runs = [run for group in rollouts.runs for run in group]
    updates = [s for run in runs for s in run.steps if s.kind == "update"]
    calls = [s for run in runs for s in run.steps]
    return {
        **reward_record(rollouts.credit),
        "memory_tokens": fmean(s.completion_tokens for s in updates) if updates else None,
        "format_error_rate": fmean(FORMAT_ERROR in s.flags for s in calls),
        "no_boxed_answer_rate": fmean(
            any(NO_BOXED_ANSWER in s.flags for s in run.steps) for run in runs
        ),
        "groups": len(rollouts.credit),
        "generated_tokens": sum(s.completion_tokens for s in calls),
        "prompt_tokens": sum(s.prompt_tokens for s in calls),
    }
