"""The CPU trainer: multi-conversation GRPO over the real agents (ALGORITHMS.md section 7).

One step: take ``questions`` samples; roll each out ``rollouts`` times with the agent on the
policy itself (temperature 1.0); score every rollout and give each of its conversations an
advantage (``credit``); recompute the old logprobs; one token-mean clipped-surrogate update per
epoch, accumulated over micro-batches; checkpoint; log; evaluate every K steps.

Everything a step does is a function of the checkpoint it starts from and the seeds (rollout
sampling is seeded per call), so a run killed at any point and started again with the same
command continues exactly as if it had never stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

import torch
from tqdm.auto import tqdm

from ..agents import make_agent, make_config
from ..data.records import Sample
from ..errors import UsageError
from ..files import write_json
from ..llm import compute_thread
from ..text.tokenizer import Tokenizer
from ..trace import FORMAT_ERROR, NO_BOXED_ANSWER, Run
from . import checkpoint, metrics
from .checkpoint import Position
from .config import TrainConfig
from .credit import GroupCredit, group_credit
from .engines import make_engine
from .episodes import TrainingRow, training_rows
from .forward import completion_logprobs, make_batch, padded, unpadded
from .loss import policy_loss
from .oracle import oracle_rows
from .policy import Policy, PolicyBackend

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
EVAL_FILE = "eval.jsonl"
PLOT_FILE = "metrics.png"
ADAPTER_GGUF = "adapter.gguf"


@dataclass
class Rollouts:
    """One step's rollouts: per group, the sample, its runs and its credit."""

    samples: list[Sample]
    runs: list[list[Run]]
    credit: list[GroupCredit]


@dataclass
class UpdateStats:
    loss: float = 0.0
    policy_loss: float = 0.0
    kl: float | None = None
    clip_fraction: float = 0.0
    grad_norm: float = 0.0
    tokens: int = 0


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


class Trainer:
    """Trains ``policy`` with ``config``, checkpointing into ``out``.

    ``tokenizer`` is the longread tokenizer the agents chunk with (the policy's own);
    ``evaluate`` (optional) runs the held-out set and returns its accuracy record."""

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
        self.out = Path(out)
        self.evaluate = evaluate
        self.progress = progress
        self.reference = reference
        self.backend = PolicyBackend(
            policy, seed=config.run.seed, context_window=config.model.context_window or None
        )
        self.engine = make_engine(config, self.backend, self.out)
        model = policy.model
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise UsageError("the model has no trainable parameters")
        optim = config.optim
        self.optimizer = torch.optim.AdamW(
            self.params, lr=optim.lr, weight_decay=optim.weight_decay
        )
        warmup = max(optim.warmup_steps * optim.epochs, 0)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda k: min(1.0, (k + 1) / warmup) if warmup else 1.0
        )
        self.last_rows: list[TrainingRow] = []
        self.last_old_logprobs: list[list[float]] = []
        pad = policy.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else policy.tokenizer.eos_token_id)

    # -- the run ---------------------------------------------------------------------------

    def run(self, stop_after: int | None = None) -> Position:
        """Train until ``run.steps`` (resuming from the newest checkpoint); ``stop_after``
        ends this session after that many steps (a later call resumes)."""
        self.out.mkdir(parents=True, exist_ok=True)
        self._save_or_check_config()
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
        record["lr"] = self.scheduler.get_last_lr()[0]
        metrics.append_line(self.out / METRICS_FILE, record)
        clock = time.perf_counter()
        checkpoint.save_checkpoint(
            self.out / "checkpoints", position, self.policy.model, self.optimizer,
            self.scheduler, self.config.run.keep_checkpoints,
        )  # fmt: skip
        self._publish_adapter()
        record["seconds_checkpoint"] = time.perf_counter() - clock
        if self._eval_due(number):
            self._evaluate(number)
        metrics.plot(self.out / METRICS_FILE, self.out / EVAL_FILE, self.out / PLOT_FILE)
        return record

    def _grpo_step(self, position: Position, number: int) -> dict[str, Any]:
        started = time.perf_counter()
        samples = self.data.take(position, self.config.rollout.questions)
        rollouts = self._rollout(samples, number)
        rollout_seconds = time.perf_counter() - started
        rows, dropped = self._rows(rollouts)
        clock = time.perf_counter()
        # torch on the compute thread, where llama.cpp rollouts run too (see compute_thread).
        given, ref = compute_thread.call(self._old_logprobs, rows)
        old_seconds = time.perf_counter() - clock
        clock = time.perf_counter()
        old = given if given is not None else [[] for _ in rows]  # filled by the update

        def update() -> UpdateStats:
            return self._update(rows, old, ref, fill_old=given is None)

        stats = compute_thread.call(update) if rows else UpdateStats()
        update_seconds = time.perf_counter() - clock
        self.last_rows, self.last_old_logprobs = rows, old  # for inspection and tests
        gap = _sampler_gap(rows, old) if self.config.optim.old_logprobs != "sampler" else None
        record = self._record(number, rollouts, rows, dropped, stats, gap)
        record.update(
            seconds_rollout=rollout_seconds,
            seconds_old_logprobs=old_seconds,
            seconds_update=update_seconds,
        )
        return record

    def _sft_step(self, position: Position, number: int) -> dict[str, Any]:
        """A supervised step on oracle episodes (``run.objective = "sft"``): the warm start."""
        clock = time.perf_counter()
        samples = self.data.take(position, self.config.rollout.questions)
        run = self.config.run
        rows = oracle_rows(
            self._oracle_agent(),
            self.policy,
            samples,
            evidence_weight=run.evidence_weight,
            noise_rate=run.noisy_notes,
            rng=random.Random(f"noisy-notes:{run.seed}:{number}"),  # the same on a resume
            claim_rate=run.false_claims,
        )
        prepare_seconds = time.perf_counter() - clock
        clock = time.perf_counter()
        loss, grad_norm = compute_thread.call(self._supervised_update, rows)
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

    def _oracle_agent(self) -> Any:
        return make_agent("memagent", self.backend, self.tokenizer, self._agent_config(seed=None))

    def _supervised_update(self, rows: list[TrainingRow]) -> tuple[float, float]:
        """One AdamW step on the token-mean negative log-likelihood of the completions, each
        row's tokens weighted by its ``advantage`` (``oracle_rows``: 1, or the evidence weight)."""
        model = self.policy.model
        model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total_tokens = sum(len(r.completion_ids) for r in rows)
        loss_sum = 0.0
        for chunk in self._micro_batches(rows):
            batch = make_batch(chunk, self.pad_id)
            weights = torch.tensor([r.advantage for r in chunk], dtype=torch.float32)[:, None]
            nll = -(completion_logprobs(model, batch) * batch.mask * weights).sum() / total_tokens
            nll.backward()
            loss_sum += float(nll.detach())
        clip = self.config.optim.grad_clip if self.config.optim.grad_clip > 0 else float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip))
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss_sum, grad_norm

    # -- phases ----------------------------------------------------------------------------

    def _rollout(self, samples: list[Sample], number: int) -> Rollouts:
        """Every rollout of the step, through the agent itself, scored per group."""
        n = self.config.rollout.rollouts
        bar = tqdm(
            total=len(samples) * n, desc=f"step {number} rollouts", unit="run", leave=False,
            disable=not self.progress, dynamic_ncols=True,
        )  # fmt: skip
        backend = self.engine.open()

        async def one(sample: Sample, group: int, k: int) -> Run:
            agent = make_agent(
                self.config.agent.name, backend, self.tokenizer,
                self._agent_config(seed=_rollout_seed(self.config.run.seed, number, group, k)),
                record_tokens=True,
            )  # fmt: skip
            run = await agent.run(sample.question, sample.context, sample_id=sample.id)
            bar.update(1)
            return run

        async def everything() -> list[Run]:
            jobs = [one(s, g, k) for g, s in enumerate(samples) for k in range(n)]
            try:
                return list(await asyncio.gather(*jobs))
            finally:
                if backend is not self.backend:
                    await backend.aclose()

        try:
            flat = asyncio.run(everything())
        finally:
            bar.close()
        runs = [flat[g * n : (g + 1) * n] for g in range(len(samples))]
        credit = [self._credit(s, group) for s, group in zip(samples, runs, strict=True)]
        return Rollouts(samples, runs, credit)

    def _credit(self, sample: Sample, runs: list[Run]) -> GroupCredit:
        reward = self.config.reward
        return group_credit(
            runs,
            sample.answers,
            kind=sample.meta.get("kind", "qa"),
            reward=reward.reward,
            estimator=reward.estimator,
            std_normalise=reward.std_normalise,
            alpha=None if reward.alpha < 0 else reward.alpha,
            recall_weight=reward.recall_weight,
        )

    def _agent_config(self, *, seed: int | None, temperature: float | None = None) -> Any:
        agent = self.config.agent
        options = {
            "prompt_set": agent.prompt_set,
            "chunk_tokens": agent.chunk_tokens,
            "memory_tokens": agent.memory_tokens,
            "final_tokens": agent.final_tokens,
            "temperature": self.config.rollout.temperature if temperature is None else temperature,
            "top_p": self.config.rollout.top_p if temperature is None else 1.0,
            "seed": seed,
            **agent.options,
        }
        return make_config(agent.name, **options)

    def _rows(self, rollouts: Rollouts) -> tuple[list[TrainingRow], int]:
        rows: list[TrainingRow] = []
        dropped = 0
        for sample, runs, credit in zip(
            rollouts.samples, rollouts.runs, rollouts.credit, strict=True
        ):
            if credit.degenerate and not self.config.reward.keep_degenerate:
                dropped += 1
                continue
            for run, advantages in zip(runs, credit.advantages, strict=True):
                rows.extend(training_rows(run, advantages, sample.id))
        return rows, dropped

    def _micro_batches(self, rows: list[TrainingRow]) -> list[list[TrainingRow]]:
        size = self.config.optim.micro_batch
        return [rows[i : i + size] for i in range(0, len(rows), size)]

    @torch.no_grad()
    def _old_logprobs(
        self, rows: list[TrainingRow]
    ) -> tuple[list[list[float]] | None, list[list[float]] | None]:
        """Old and reference logprobs of every completion token. Old ones are None when the
        update computes them itself (``old_logprobs = "auto"`` with one epoch)."""
        model = self.policy.model
        model.eval()
        mode = self.config.optim.old_logprobs
        if mode == "auto":
            mode = "inline" if self.config.optim.epochs == 1 else "recompute"
        old: list[list[float]] | None = None if mode == "inline" else []
        ref: list[list[float]] | None = [] if self.config.optim.kl_coef > 0.0 else None
        for chunk in self._micro_batches(rows):
            batch = make_batch(chunk, self.pad_id)
            if old is not None:
                if mode == "recompute":
                    old.extend(unpadded(completion_logprobs(model, batch), batch))
                else:
                    old.extend(list(r.old_logprobs or []) for r in chunk)
            if ref is not None:
                with self._reference() as reference:
                    ref.extend(unpadded(completion_logprobs(reference, batch), batch))
        return old, ref

    @contextlib.contextmanager
    def _reference(self) -> Iterator[Any]:
        """The reference policy: the base model with the adapter switched off (LoRA), or the
        frozen copy passed in (full fine-tuning)."""
        if self.reference is not None:
            yield self.reference
            return
        disable = getattr(self.policy.model, "disable_adapter", None)
        if disable is None:
            raise UsageError("optim.kl_coef > 0 with full fine-tuning needs a reference model")
        with disable():
            yield self.policy.model

    def _update(
        self,
        rows: list[TrainingRow],
        old: list[list[float]],
        ref: list[list[float]] | None,
        *,
        fill_old: bool = False,
    ) -> UpdateStats:
        """``epochs`` optimizer steps, each a token mean over every row of the step.
        ``fill_old``: ``old`` is empty and the first (only) epoch's forward, detached, is
        the old policy's logprobs (the weights have not moved yet), written into ``old``."""
        model = self.policy.model
        optim = self.config.optim
        total_tokens = sum(len(r.completion_ids) for r in rows)
        index = {id(r): i for i, r in enumerate(rows)}
        stats = UpdateStats()
        for _ in range(optim.epochs):
            model.train()
            self.optimizer.zero_grad(set_to_none=True)
            stats = UpdateStats(tokens=total_tokens)
            kl_sum = 0.0
            for chunk in self._micro_batches(rows):
                batch = make_batch(chunk, self.pad_id)
                ids = [index[id(r)] for r in chunk]
                logprobs = completion_logprobs(model, batch)
                if fill_old:
                    for i, values in zip(ids, unpadded(logprobs.detach(), batch), strict=True):
                        old[i] = values
                terms = policy_loss(
                    logprobs,
                    padded([old[i] for i in ids], batch.width),
                    torch.tensor([r.advantage for r in chunk], dtype=torch.float32),
                    batch.mask,
                    clip_low=optim.clip_low,
                    clip_high=optim.clip_high,
                    ref_logprobs=padded([ref[i] for i in ids], batch.width) if ref else None,
                    kl_coef=optim.kl_coef,
                )
                share = terms.tokens / total_tokens  # micro-batch means -> one token mean
                (terms.loss * share).backward()
                stats.loss += float(terms.loss.detach()) * share
                stats.policy_loss += terms.policy_loss * share
                stats.clip_fraction += terms.clip_fraction * share
                kl_sum += (terms.kl or 0.0) * share
            stats.kl = kl_sum if ref else None
            clip = optim.grad_clip if optim.grad_clip > 0 else float("inf")
            stats.grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip))
            self.optimizer.step()
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return stats

    # -- bookkeeping -----------------------------------------------------------------------

    def _record(
        self,
        number: int,
        rollouts: Rollouts,
        rows: list[TrainingRow],
        dropped: int,
        stats: UpdateStats,
        gap: float | None,
    ) -> dict[str, Any]:
        runs = [run for group in rollouts.runs for run in group]
        updates = [s for run in runs for s in run.steps if s.kind == "update"]
        calls = [s for run in runs for s in run.steps]
        rewards = [r for c in rollouts.credit for r in c.rewards]
        correct = [r for c in rollouts.credit for r in c.correct]
        return {
            "step": number,
            "reward": fmean(rewards),
            "accuracy": fmean(correct),
            "memory_tokens": fmean(s.completion_tokens for s in updates) if updates else None,
            "format_error_rate": fmean(FORMAT_ERROR in s.flags for s in calls),
            "no_boxed_answer_rate": fmean(
                any(NO_BOXED_ANSWER in s.flags for s in run.steps) for run in runs
            ),
            "groups": len(rollouts.credit),
            "dropped_groups": dropped,
            "rows": len(rows),
            "generated_tokens": sum(s.completion_tokens for s in calls),
            "prompt_tokens": sum(s.prompt_tokens for s in calls),
            "tokens": stats.tokens,
            "loss": stats.loss,
            "policy_loss": stats.policy_loss,
            "kl": stats.kl,
            "clip_fraction": stats.clip_fraction,
            "grad_norm": stats.grad_norm,
            "sampler_logprob_gap": gap,
            "samples": [s.id for s in rollouts.samples],
        }

    def _publish_adapter(self) -> None:
        """The latest LoRA as users load it: ``adapter.gguf`` for llama.cpp (``--adapter``)
        and ``adapter/`` for peft. Nothing for full fine-tuning."""
        model = self.policy.model
        if not hasattr(model, "peft_config"):
            return
        from .export import export_lora_gguf

        export_lora_gguf(model, self.out / ADAPTER_GGUF)
        model.save_pretrained(self.out / "adapter")

    def _save_or_check_config(self) -> None:
        """Save the resolved config; a resumed run must have the same one (``run.steps``
        excepted, so a finished run can be extended)."""
        path = self.out / CONFIG_FILE
        resolved = self.config.to_dict()
        if path.is_file():
            saved = _with_defaults(json.loads(path.read_text()))
            mine = {**resolved, "run": {**resolved["run"], "steps": None}}
            theirs = {**saved, "run": {**saved.get("run", {}), "steps": None}}
            if mine != theirs:
                changed = sorted(k for k in mine if mine.get(k) != theirs.get(k))
                raise UsageError(
                    f"{self.out} holds a training run with another config (sections "
                    f"{', '.join(changed)} differ); use another output folder"
                )
        write_json(path, resolved)

    def _resume(self) -> Position:
        latest = checkpoint.latest_checkpoint(self.out / "checkpoints")
        if latest is None:
            metrics.keep_until(self.out / METRICS_FILE, 0)
            return Position()
        position = checkpoint.load_checkpoint(
            latest, self.policy.model, self.optimizer, self.scheduler
        )
        metrics.keep_until(self.out / METRICS_FILE, position.step)
        if self.progress:
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
        if result is None:
            return
        done = {r["step"] for r in metrics.read_lines(self.out / EVAL_FILE)}
        if number not in done:
            metrics.append_line(self.out / EVAL_FILE, {"step": number, **result})

    def greedy_config(self) -> Any:
        """The agent config held-out evaluation runs with: greedy, same budgets."""
        return self._agent_config(seed=None, temperature=0.0)


def _postfix(record: dict[str, Any]) -> dict[str, str]:
    if record.get("reward") is None:
        return {"loss": f"{record['loss']:.3f}"}
    return {"reward": f"{record['reward']:.2f}", "acc": f"{record['accuracy']:.2f}"}


def _sampler_gap(rows: list[TrainingRow], old: list[list[float]]) -> float | None:
    """Mean |sampler logprob - trainer logprob| over the step's tokens: 0 up to float noise
    when the policy sampled, larger when llama.cpp did (quantised weights, other kernels)."""
    gaps = [
        abs(a - b)
        for row, mine in zip(rows, old, strict=True)
        for a, b in zip(row.old_logprobs or [], mine, strict=False)
    ]
    return fmean(gaps) if gaps else None


def _rollout_seed(seed: int, step: int, group: int, k: int) -> int:
    return random.Random(f"{seed}:{step}:{group}:{k}").randrange(2**31)


def _with_defaults(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved config with the settings added to longread since it was written at their
    defaults: a new option left alone must not block resuming an older run."""
    defaults = TrainConfig().to_dict()
    return {
        name: {**defaults[name], **section} if isinstance(section, dict) else section
        for name, section in {**defaults, **saved}.items()
    }
