"""The policy-gradient loss against a float64 reference written here, token by token."""

from __future__ import annotations

import math
import random

import pytest
import torch

from longread.train.loss import policy_loss, sampled_logprobs


def reference(logp, old, adv, mask, clip_low, clip_high, ref=None, kl_coef=0.0):
    """ALGORITHMS.md section 7 in plain float64 Python: per token
    -min(r A, clip(r, 1 - low, 1 + high) A), averaged over every unmasked token of the batch,
    plus kl_coef * mean(exp(ref - logp) - (ref - logp) - 1)."""
    total, clipped, kl, n = 0.0, 0, 0.0, 0
    for b in range(len(logp)):
        for t in range(len(logp[b])):
            if not mask[b][t]:
                continue
            r = math.exp(logp[b][t] - old[b][t])
            a = adv[b]
            low, high = r * a, min(max(r, 1 - clip_low), 1 + clip_high) * a
            total += -min(low, high)
            clipped += high < low
            if ref is not None:
                d = ref[b][t] - logp[b][t]
                kl += math.exp(d) - d - 1
            n += 1
    return total / n + kl_coef * kl / n, clipped / n, kl / n


def batch(seed: int, rows: int = 3, width: int = 6):
    rng = random.Random(seed)
    logp = [[-rng.uniform(0.05, 3.0) for _ in range(width)] for _ in range(rows)]
    old = [[x + rng.uniform(-0.4, 0.4) for x in row] for row in logp]
    ref = [[x + rng.uniform(-0.3, 0.3) for x in row] for row in logp]
    adv = [rng.uniform(-1.5, 1.5) for _ in range(rows)]
    mask = [[1] * rng.randint(2, width) for _ in range(rows)]
    mask = [m + [0] * (width - len(m)) for m in mask]  # padded rows of different lengths
    return logp, old, ref, adv, mask


def tensors(*lists):
    return [torch.tensor(x, dtype=torch.float64) for x in lists]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("clip_low", "clip_high"), [(0.2, 0.2), (0.2, 0.28)])
def test_loss_matches_the_float64_reference(seed, clip_low, clip_high):
    logp, old, ref, adv, mask = batch(seed)
    expected, fraction, kl = reference(logp, old, adv, mask, clip_low, clip_high, ref, 0.001)
    t_logp, t_old, t_ref, t_adv, t_mask = tensors(logp, old, ref, adv, mask)
    terms = policy_loss(t_logp, t_old, t_adv, t_mask, clip_low=clip_low, clip_high=clip_high,
                        ref_logprobs=t_ref, kl_coef=0.001)  # fmt: skip
    assert float(terms.loss) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert terms.clip_fraction == pytest.approx(fraction)
    assert terms.kl == pytest.approx(kl)
    assert terms.tokens == sum(map(sum, mask))


def test_the_ratio_is_one_on_policy_so_the_loss_is_minus_the_mean_advantage():
    # Two rows of 2 and 1 completion tokens, advantages 1 and -2: token mean (1 + 1 - 2) / 3.
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -9.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1], [1, 0]])
    terms = policy_loss(logp, logp.clone(), torch.tensor([1.0, -2.0], dtype=torch.float64), mask)
    assert float(terms.loss) == pytest.approx(-(1 + 1 - 2) / 3)
    assert terms.clip_fraction == 0.0 and terms.kl is None


def test_clipped_tokens_get_no_gradient_and_padding_none_either():
    # Token 0: ratio e^0.5 ~ 1.65 with A > 0, past 1 + 0.2: clipped, no gradient.
    # Token 1: ratio 1, inside the clip range: gradient -A / n. Token 2: padding.
    logp = torch.tensor([[0.0, -1.0, -1.0]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[-0.5, -1.0, -5.0]], dtype=torch.float64)
    terms = policy_loss(logp, old, torch.tensor([2.0], dtype=torch.float64),
                        torch.tensor([[1, 1, 0]]))  # fmt: skip
    terms.loss.backward()
    assert logp.grad is not None
    assert logp.grad[0].tolist() == pytest.approx([0.0, -2.0 / 2, 0.0])
    assert terms.clip_fraction == pytest.approx(0.5)


def test_sampled_logprobs_are_the_log_softmax_of_the_chosen_ids():
    logits = torch.tensor([[[0.0, math.log(3.0)], [2.0, 2.0]]])  # p = (1/4, 3/4), (1/2, 1/2)
    ids = torch.tensor([[1, 0]])
    assert sampled_logprobs(logits, ids)[0].tolist() == pytest.approx(
        [math.log(0.75), math.log(0.5)]
    )
