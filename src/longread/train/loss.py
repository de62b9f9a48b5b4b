"""The policy-gradient loss of multi-conversation RL (ALGORITHMS.md section 7), in torch.

Token-level clipped surrogate (PPO ratio clip 0.2; DAPO's clip-higher by a larger upper bound),
aggregated as a token mean over every completion token of the batch, plus an optional
low-variance KL to a reference policy (the k3 estimator). A token mean weighs every sampled
token alike, so a rollout with more chunks (more conversations, more tokens) weighs more in the
update than a short one; that is the papers' aggregation (TRAINING.md, "Pitfalls").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# exp() of a log-ratio past this is a sign of stale old logprobs, not a real ratio; clamping
# keeps one bad token from turning the batch's loss into inf.
MAX_LOG_RATIO = 20.0


@dataclass
class LossTerms:
    """The loss to backpropagate and what to log about it."""

    loss: torch.Tensor  # scalar, with grad
    policy_loss: float
    kl: float | None  # token-mean k3 KL to the reference; None without a reference
    clip_fraction: float  # share of completion tokens whose clipped branch was taken
    max_ratio_deviation: float  # max |ratio - 1| over completion tokens (0: exactly on-policy)
    tokens: int  # completion tokens the mean ran over


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> LossTerms:
    """The clipped surrogate over a padded batch of completions.

    ``logprobs`` (B, T): the policy's log-probabilities of the sampled tokens, with grad;
    ``old_logprobs`` (B, T): those of the policy that sampled them; ``advantages``: (B,) one per
    row (a conversation's advantage, given to each of its tokens) or (B, T); ``mask`` (B, T): 1
    on completion tokens, 0 on padding. ``clip_high > clip_low`` is DAPO's clip-higher.
    ``ref_logprobs`` with ``kl_coef > 0`` adds ``kl_coef * KL`` (k3: exp(r) - r - 1 with
    r = ref - logprobs; unbiased, never negative).
    """
    weights = mask.to(logprobs.dtype)
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logprobs)
    log_ratio = (logprobs - old_logprobs).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * advantages
    tokens = weights.sum()
    count = tokens.clamp(min=1.0)
    pg = (-torch.minimum(unclipped, clipped) * weights).sum() / count
    clip_fraction = ((clipped < unclipped).to(weights.dtype) * weights).sum() / count
    deviation = 0.0
    if weights.numel():  # an empty batch has no tokens and no max
        deviation = float(((ratio.detach() - 1.0).abs() * weights).max())
    loss, kl = pg, None
    if ref_logprobs is not None and kl_coef > 0.0:
        delta = (ref_logprobs - logprobs).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
        kl_tensor = ((torch.exp(delta) - delta - 1.0) * weights).sum() / count
        loss = loss + kl_coef * kl_tensor
        kl = float(kl_tensor.detach())
    return LossTerms(
        loss=loss,
        policy_loss=float(pg.detach()),
        kl=kl,
        clip_fraction=float(clip_fraction.detach()),
        max_ratio_deviation=deviation,
        tokens=int(tokens.detach()),
    )


def sampled_logprobs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """log p(ids[t]) under ``logits[t]`` (B, T, V) -> (B, T): temperature 1, the definition the
    step record's sampler logprobs use, so the two can be compared."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
