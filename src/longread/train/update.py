"""The update of the CPU trainer: the clipped-surrogate (PPO) step on rollout rows, and the
supervised step on oracle rows, both accumulated over micro-batches into one token mean.

Everything here runs on the compute thread (see ``compute_thread``), where llama.cpp rollouts
run too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

import torch

from ..errors import UsageError
from .config import OptimSection
from .episodes import TrainingRow
from .forward import completion_logprobs, make_batch, padded, unpadded
from .loss import policy_loss


@dataclass
class UpdateStats:
    """What one step's update logs: token-weighted means over its optimizer steps."""

    loss: float = 0.0
    policy_loss: float = 0.0
    kl: float | None = None
    clip_fraction: float = 0.0
    max_ratio_deviation: float = 0.0  # max |ratio - 1| over the tokens: 0 when on-policy
    grad_norm: float = 0.0
    tokens: int = 0


def enable_checkpointing(model: Any) -> None:
    """Recompute each layer's activations in the backward (transformers >= 5 calls it
    activation checkpointing, 4.x gradient checkpointing). Non-reentrant: with frozen
    embeddings (LoRA) the reentrant variant sees inputs that need no grad and drops the
    gradient of every layer."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


class Updater:
    """The optimizer, its schedule and the losses over ``model``'s trainable parameters.

    ``steps_per_update``: optimizer steps per training step (the warm-up counts training
    steps). ``reference``: a frozen reference model for the KL term; without one the
    reference is the trainable weights as they are now, at the start of the run (the starting
    LoRA adapter, warm start included, or the starting weights of full fine-tuning), frozen
    in a copy and swapped in for the reference's forward passes."""

    def __init__(
        self,
        model: Any,
        optim: OptimSection,
        pad_id: int,
        *,
        steps_per_update: int = 1,
        reference: torch.nn.Module | None = None,
    ) -> None:
        self.model = model
        self.optim = optim
        if optim.gradient_checkpointing:
            enable_checkpointing(model)
        self.pad_id = pad_id
        self.reference = reference
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise UsageError("the model has no trainable parameters")
        self.start: list[torch.Tensor] = []
        if optim.kl_coef > 0.0 and reference is None:
            self.start = [p.detach().clone() for p in self.params]
        self.optimizer = torch.optim.AdamW(
            self.params, lr=optim.lr, weight_decay=optim.weight_decay
        )
        warmup = max(optim.warmup_steps * steps_per_update, 0)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda k: min(1.0, (k + 1) / warmup) if warmup else 1.0
        )

    def micro_batches(self, rows: list[TrainingRow]) -> list[list[TrainingRow]]:
        """``rows`` in groups of ``micro_batch``, shortest first (``micro_batch_indices``)."""
        return [[rows[i] for i in group] for group in self.micro_batch_indices(rows)]

    def micro_batch_indices(self, rows: list[TrainingRow]) -> list[list[int]]:
        """The indices of ``rows`` in groups of ``micro_batch``, shortest rows first.

        A micro-batch pads every row to its longest, so rows of like length go together: a
        150-token probe row beside 1,500-token update rows cost a 1,500-token forward
        (sft29p). Every loss here divides a token sum by the step's (or minibatch's) token
        count, so the grouping changes no gradient, only the padding."""
        size = self.optim.micro_batch
        order = sorted(
            range(len(rows)), key=lambda i: len(rows[i].prompt_ids) + len(rows[i].completion_ids)
        )
        return [order[k : k + size] for k in range(0, len(order), size)]

    def minibatches(self, count: int) -> list[list[int]]:
        """The row indices of each minibatch (one optimizer step each): interleaved, so every
        minibatch holds rows of every group (both signs of advantage)."""
        parts = min(self.optim.minibatches, count)
        return [list(range(k, count, parts)) for k in range(parts)]

    # -- supervised ------------------------------------------------------------------------

    def supervised_update(self, rows: list[TrainingRow]) -> tuple[float, float]:
        """One AdamW step on the token-mean negative log-likelihood of the completions, each
        row's tokens weighted by its ``weight`` (``oracle_rows``: 1, or the evidence weight).
        Returns the loss and the gradient norm."""
        model = self.model
        model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total_tokens = sum(len(r.completion_ids) for r in rows)
        loss_sum = 0.0
        for chunk in self.micro_batches(rows):
            batch = make_batch(chunk, self.pad_id)
            weights = torch.tensor([r.weight for r in chunk], dtype=torch.float32)[:, None]
            nll = -(completion_logprobs(model, batch) * batch.mask * weights).sum() / total_tokens
            nll.backward()
            loss_sum += float(nll.detach())
        grad_norm = self._step()
        return loss_sum, grad_norm

    # -- policy gradient -------------------------------------------------------------------

    @torch.no_grad()
    def old_logprobs(
        self, rows: list[TrainingRow]
    ) -> tuple[list[list[float] | None], list[list[float]] | None]:
        """Old and reference logprobs of every completion token.

        An old entry is None where the update computes it itself (``old_logprobs = "auto"``:
        the rows of the first minibatch, whose first forward runs before any optimizer step,
        so its detached logprobs are the old policy's; one forward cheaper). The rows of
        later minibatches are recomputed here, before the weights move."""
        mode = self.optim.old_logprobs
        inline = set(self.minibatches(len(rows))[0]) if mode == "auto" and rows else set()
        old: list[list[float] | None] = [None] * len(rows)
        if mode == "sampler":
            old = [list(r.old_logprobs or []) for r in rows]
        else:
            todo = [i for i in range(len(rows)) if i not in inline]
            self.model.eval()
            recomputed = self._logprobs(self.model, [rows[i] for i in todo])
            for i, values in zip(todo, recomputed, strict=True):
                old[i] = values
        ref = None
        if self.optim.kl_coef > 0.0:
            with self.reference_model() as reference:
                ref = self._logprobs(reference, rows)
        return old, ref

    def _logprobs(self, model: Any, rows: list[TrainingRow]) -> list[list[float]]:
        """Each row's completion logprobs, in the order of ``rows``."""
        values: list[list[float]] = [[] for _ in rows]
        for group in self.micro_batch_indices(rows):
            batch = make_batch([rows[i] for i in group], self.pad_id)
            for i, row_values in zip(
                group, unpadded(completion_logprobs(model, batch), batch), strict=True
            ):
                values[i] = row_values
        return values

    @contextlib.contextmanager
    def reference_model(self) -> Iterator[Any]:
        """The reference policy, in eval mode: the frozen model passed in, or the model with
        the run's starting weights swapped in (and its own swapped back afterwards)."""
        if self.reference is not None:
            yield self.reference
            return
        if not self.start:
            raise UsageError("optim.kl_coef > 0 needs a reference: none was kept")
        with torch.no_grad():
            current = [p.detach().clone() for p in self.params]
            for param, start in zip(self.params, self.start, strict=True):
                param.copy_(start)
        training = self.model.training
        self.model.eval()
        try:
            yield self.model
        finally:
            with torch.no_grad():
                for param, now in zip(self.params, current, strict=True):
                    param.copy_(now)
            self.model.train(training)

    def ppo_update(
        self,
        rows: list[TrainingRow],
        old: list[list[float] | None],
        ref: list[list[float]] | None,
    ) -> UpdateStats:
        """``epochs`` passes over the rows, each one optimizer step per minibatch, each step a
        token mean over its minibatch. With more than one step, every step after the first
        trains on rows the policy no longer samples exactly, so the PPO ratio moves off 1 and
        the clip can act. A None entry of ``old`` is filled, in place, by that row's first
        forward (detached), which runs before any optimizer step (see :meth:`old_logprobs`)."""
        total = UpdateStats(tokens=sum(len(r.completion_ids) for r in rows))
        steps = 0
        for _ in range(self.optim.epochs):
            for indices in self.minibatches(len(rows)):
                self._minibatch_step([rows[i] for i in indices], indices, old, ref, total)
                steps += 1
        grads = total.grad_norm
        total.grad_norm = grads / steps if steps else 0.0
        weight = self.optim.epochs * total.tokens
        if weight:
            total.loss /= weight
            total.policy_loss /= weight
            total.clip_fraction /= weight
            total.kl = None if ref is None else (total.kl or 0.0) / weight
        return total

    def _minibatch_step(
        self,
        rows: list[TrainingRow],
        indices: list[int],
        old: list[list[float] | None],
        ref: list[list[float]] | None,
        total: UpdateStats,
    ) -> None:
        """One optimizer step on the token mean of ``rows`` (rows ``indices`` of the step);
        adds its token-weighted terms to ``total``."""
        model, optim = self.model, self.optim
        model.train()
        self.optimizer.zero_grad(set_to_none=True)
        tokens = sum(len(r.completion_ids) for r in rows)
        for group in self.micro_batch_indices(rows):
            chunk = [rows[k] for k in group]
            batch = make_batch(chunk, self.pad_id)
            ids = [indices[k] for k in group]
            logprobs = completion_logprobs(model, batch)
            for i, values in zip(ids, unpadded(logprobs.detach(), batch), strict=True):
                if old[i] is None:
                    old[i] = values
            terms = policy_loss(
                logprobs,
                padded([old[i] or [] for i in ids], batch.width),
                torch.tensor([r.advantage for r in chunk], dtype=torch.float32),
                batch.mask,
                clip_low=optim.clip_low,
                clip_high=optim.clip_high,
                ref_logprobs=padded([ref[i] for i in ids], batch.width) if ref else None,
                kl_coef=optim.kl_coef,
            )
            (terms.loss * (terms.tokens / tokens)).backward()  # micro means -> one token mean
            total.loss += float(terms.loss.detach()) * terms.tokens
            total.policy_loss += terms.policy_loss * terms.tokens
            total.clip_fraction += terms.clip_fraction * terms.tokens
            total.kl = (total.kl or 0.0) + (terms.kl or 0.0) * terms.tokens
            total.max_ratio_deviation = max(total.max_ratio_deviation, terms.max_ratio_deviation)
        total.grad_norm += self._step()

    def _step(self) -> float:
        """Clip the gradient, step the optimizer and the schedule; return the gradient norm."""
        clip = self.optim.grad_clip if self.optim.grad_clip > 0 else float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip))
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm


def sampler_gap(rows: list[TrainingRow], old: Sequence[Sequence[float] | None]) -> float | None:
    """Mean |sampler logprob - trainer logprob| over the step's tokens: 0 up to float noise
    when the policy sampled, larger when llama.cpp did (quantised weights, other kernels)."""
    gaps = [
        abs(a - b)
        for row, mine in zip(rows, old, strict=True)
        for a, b in zip(row.old_logprobs or [], mine or [], strict=False)
    ]
    return fmean(gaps) if gaps else None
