"""The CPU trainer: multi-conversation GRPO over the real agents (ALGORITHMS.md section 7).

One step: take ``questions`` samples; roll each out ``rollouts`` times with the agent on the
policy itself (temperature 1.0); score every rollout and give each of its conversations an
advantage (``rollouts``: the shared credit function); recompute the old logprobs; token-mean
clipped-surrogate updates, one optimizer step per minibatch and epoch, accumulated over
micro-batches (``update``); checkpoint, log and evaluate every K steps (``run_folder``).

Everything a step does is a function of the checkpoint it starts from and the seeds (rollout
sampling is seeded per call), so a run killed at any point and started again with the same
command continues exactly as if it had never stopped.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from statistics import fmean
from typing import Any

import torch
from tqdm.auto import tqdm

from ..agents import make_agent
from ..data.records import Sample
from ..errors import UsageError
from ..llm import compute_thread
from ..text.tokenizer import Tokenizer
from .checkpoint import Position
from .config import TrainConfig
from .engines import make_engine
from .episodes import TrainingRow
from .oracle import oracle_rows
from .policy import Policy, PolicyBackend
from .rollouts import (
    DataOrder,
    Rollouts,
    agent_config,
    collect_rollouts,
    merge,
    rollout_lines,
    rollout_record,
    rollout_rows,
)
from .run_folder import (
    ADAPTER_GGUF,
    CONFIG_FILE,
    EVAL_FILE,
    METRICS_FILE,
    PLOT_FILE,
    RunFolder,
)
from .update import Updater, UpdateStats, sampler_gap

__all__ = [
    "ADAPTER_GGUF",
    "CONFIG_FILE",
    "EVAL_FILE",
    "METRICS_FILE",
    "PLOT_FILE",
    "Trainer",
]


class Trainer:
    """Trains ``policy`` with ``config``, checkpointing into ``out``.

    ``tokenizer`` is the longread tokenizer the agents chunk with (the policy's own);
    ``evaluate`` (optional) runs the held-out set and returns its accuracy record;
    ``reference`` is the frozen reference model of a full fine-tuning run with a KL term."""

    def __init__(
        self,
        config: TrainConfig,
        policy: Policy,
        tokenizer: Tokenizer,
        train: Sequence[Sample],
        out: str | Path,
        *,
        evaluate: Callable[[int], dict[str, Any] | None] | None = None,
        progress: bool = True,
        reference: torch.nn.Module | None = None,
    ) -> None:
        self.config = config
        self.policy = policy
        self.tokenizer = tokenizer
        self.data = DataOrder(train, config.run.seed)
        self.folder = RunFolder(out, config)
        self.out = self.folder.out
        self.evaluate = evaluate
        self.progress = progress
        self.backend = PolicyBackend(
            policy, seed=config.run.seed, context_window=config.model.context_window or None
        )
        self.engine = make_engine(config, self.backend, self.out)
        pad = policy.tokenizer.pad_token_id
        pad_id = int(pad if pad is not None else policy.tokenizer.eos_token_id)
        optim = config.optim
        sft = config.run.objective == "sft"
        self.updater = Updater(
            policy.model, optim, pad_id, reference=reference,
            steps_per_update=1 if sft else optim.epochs * optim.minibatches,
        )  # fmt: skip
        self.last_rows: list[TrainingRow] = []
        self.last_old_logprobs: list[list[float]] = []

    # -- the run ---------------------------------------------------------------------------

    def run(self, stop_after: int | None = None) -> Position:
        """Train until ``run.steps`` (resuming from the newest checkpoint); ``stop_after``
        ends this session after that many steps (a later call resumes)."""
        self.folder.open()
        position = self._resume()
        if position.step and self._eval_due(position.step):
            self._evaluate(position.step)  # resumes an evaluation a kill interrupted
        total = self.config.run.steps
        bar = tqdm(
            total=total, initial=position.step, desc="train", unit="step",
            disable=not self.progress, dynamic_ncols=True,
        )  # fmt: skip
        ran = 0
        try:
            while position.step < total and (stop_after is None or ran < stop_after):
                record = self.step(position)
                bar.update(1)
                bar.set_postfix(_postfix(record))
                ran += 1
        finally:
            bar.close()
        return position

    def step(self, position: Position) -> dict[str, Any]:
        """Run step ``position.step + 1``, checkpoint it, and return its metrics record."""
        number = position.step + 1
        if self.config.run.objective == "sft":
            record = self._sft_step(position, number)
        else:
            record = self._grpo_step(position, number)
        position.step = number
        record["lr"] = self.updater.scheduler.get_last_lr()[0]
        self.folder.append_metrics(record)
        clock = time.perf_counter()
        self.folder.save(
            position, self.policy.model, self.updater.optimizer, self.updater.scheduler
        )
        record["seconds_checkpoint"] = time.perf_counter() - clock
        if self._eval_due(number):
            self._evaluate(number)
        self.folder.plot()
        return record

    def _grpo_step(self, position: Position, number: int) -> dict[str, Any]:
        started = time.perf_counter()
        rollouts, refilled = self._rollouts(position, number)
        rollout_seconds = time.perf_counter() - started
        rows, dropped = rollout_rows(self.config, rollouts)
        if self.config.run.save_rollouts:
            self.folder.save_rollouts(number, rollout_lines(rollouts))
        clock = time.perf_counter()
        # torch on the compute thread, where llama.cpp rollouts run too (see compute_thread).
        old, ref = compute_thread.call(self.updater.old_logprobs, rows)
        old_seconds = time.perf_counter() - clock
        clock = time.perf_counter()
        # The update fills the old logprobs it computes itself (None entries).
        stats = (
            compute_thread.call(self.updater.ppo_update, rows, old, ref) if rows else UpdateStats()
        )
        update_seconds = time.perf_counter() - clock
        self.last_rows = rows  # for inspection and tests
        self.last_old_logprobs = [values or [] for values in old]
        gap = sampler_gap(rows, old) if self.config.optim.old_logprobs != "sampler" else None
        return {
            "step": number,
            **rollout_record(rollouts),
            "dropped_groups": dropped,
            "refilled_groups": refilled,
            "rows": len(rows),
            "tokens": stats.tokens,
            "loss": stats.loss,
            "policy_loss": stats.policy_loss,
            "kl": stats.kl,
            "clip_fraction": stats.clip_fraction,
            "max_ratio_deviation": stats.max_ratio_deviation,
            "grad_norm": stats.grad_norm,
            "sampler_logprob_gap": gap,
            "samples": [s.id for s in rollouts.samples],
            "seconds_rollout": rollout_seconds,
            "seconds_old_logprobs": old_seconds,
            "seconds_update": update_seconds,
        }

    def _rollouts(self, position: Position, number: int) -> tuple[Rollouts, int]:
        """The step's rollouts, and how many groups were added by dynamic sampling: with
        ``rollout.refill``, each degenerate group is replaced by a new question's, for up to
        that many rounds (DAPO); the degenerate ones stay in the record and are dropped."""
        config = self.config
        samples = self.data.take(position, config.rollout.questions)
        rollouts = collect_rollouts(
            config, self.engine, self.tokenizer, samples, number, progress=self.progress
        )
        refilled = 0
        for _ in range(config.rollout.refill):
            wanted = config.rollout.questions - sum(not c.degenerate for c in rollouts.credit)
            if wanted <= 0:
                break
            more = collect_rollouts(
                config, self.engine, self.tokenizer, self.data.take(position, wanted), number,
                progress=self.progress, first_group=len(rollouts.samples),
            )  # fmt: skip
            rollouts, refilled = merge(rollouts, more), refilled + wanted
        return rollouts, refilled

    def _sft_step(self, position: Position, number: int) -> dict[str, Any]:
        """A supervised step on oracle episodes (``run.objective = "sft"``): the warm start."""
        clock = time.perf_counter()
        samples = self.data.take(position, self.config.rollout.questions)
        run = self.config.run
        rows = oracle_rows(
            self.oracle_agent(),
            self.policy,
            samples,
            evidence_weight=run.evidence_weight,
            noise_rate=run.noisy_notes,
            rng=random.Random(f"noisy-notes:{run.seed}:{number}"),  # the same on a resume
            claim_rate=run.false_claims,
            update_share=run.update_share,
            section_first_share=run.section_first_share,
            other_agents=[self.oracle_agent(size) for size in run.chunk_choices],
            keep_empty_updates=run.keep_empty_updates,
            noisy_yes=run.probe_noisy_yes,
            first_hop=run.first_hop,
            decision_weight=run.decision_weight,
            row_kinds=run.row_kinds,
            followup_weight=run.followup_weight,
            rememr1_thoughts=run.rememr1_thoughts,
            keep_share=run.keep_share,
            keep_weight=run.keep_weight,
        )
        if not rows:
            raise UsageError(
                f"step {number}: the oracle episodes gave no training rows; run.row_kinds "
                f"{run.row_kinds} names no conversation agent {self.config.agent.name} has"
            )
        prepare_seconds = time.perf_counter() - clock
        clock = time.perf_counter()
        loss, grad_norm = compute_thread.call(self.updater.supervised_update, rows)
        updates = [len(r.completion_ids) for r in rows if not r.is_final]
        self.last_rows = rows
        return {
            "step": number,
            "objective": "sft",
            "loss": loss,
            "reward": None,
            "accuracy": None,
            "memory_tokens": fmean(updates) if updates else None,
            "rows": len(rows),
            "tokens": sum(len(r.completion_ids) for r in rows),
            "grad_norm": grad_norm,
            "samples": [s.id for s in samples],
            "seconds_rollout": prepare_seconds,
            "seconds_old_logprobs": 0.0,
            "seconds_update": time.perf_counter() - clock,
        }

    def oracle_agent(self, chunk_tokens: int | None = None) -> Any:
        """The agent (memagent or memreread) whose prompts and caps the oracle episodes of an
        sft step use (cut at ``chunk_tokens``, else at the config's chunk size)."""
        config = agent_config(self.config, seed=None)
        if chunk_tokens is not None:
            config = replace(config, chunk_tokens=chunk_tokens)
        return make_agent(self.config.agent.name, self.backend, self.tokenizer, config)

    def greedy_config(self) -> Any:
        """The agent config held-out evaluation runs with: greedy, same budgets."""
        return agent_config(self.config, seed=None, temperature=0.0)

    # -- bookkeeping -----------------------------------------------------------------------

    def _resume(self) -> Position:
        updater = self.updater
        position, latest = self.folder.resume(
            self.policy.model, updater.optimizer, updater.scheduler
        )
        if latest is not None and self.progress:
            tqdm.write(f"resuming from {latest} (step {position.step})")
        return position

    def _eval_due(self, number: int) -> bool:
        every = self.config.run.eval_every
        if self.evaluate is None or every <= 0:
            return False
        return number % every == 0 or number == self.config.run.steps

    def _evaluate(self, number: int) -> None:
        assert self.evaluate is not None
        result = self.evaluate(number)
        if result is not None:
            self.folder.append_eval(number, result)


def _postfix(record: dict[str, Any]) -> dict[str, str]:
    if record.get("reward") is None:
        return {"loss": f"{record['loss']:.3f}"}
    return {"reward": f"{record['reward']:.2f}", "acc": f"{record['accuracy']:.2f}"}
