"""The CPU trainer's update (``train.update.Updater``): micro-batches group rows of like
length, and the grouping changes neither the logprobs a row gets nor the step's gradient.

A tiny random Llama stands in for SmolLM2: what is checked is the bookkeeping of rows into
micro-batches, which is the same for any causal model."""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")  # the 'train' extra; `make install` always installs it
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from longread.train.config import OptimSection  # noqa: E402
from longread.train.episodes import TrainingRow  # noqa: E402
from longread.train.update import Updater  # noqa: E402

PAD = 0


def tiny_model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=64,
    )
    return LlamaForCausalLM(config)


def row(prompt: int, completion: int, seed: int) -> TrainingRow:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 64, (prompt + completion,), generator=generator).tolist()
    return TrainingRow(
        prompt_ids=ids[:prompt],
        completion_ids=ids[prompt:],
        old_logprobs=None,
        advantage=0.0,
        group="q",
        rollout="r",
        step=seed,
        is_final=False,
        weight=1.0 + seed % 2,
    )


# Long update-like rows and short probe-like rows, interleaved as an episode makes them.
ROWS = [row(40, 12, 0), row(5, 2, 1), row(38, 10, 2), row(6, 1, 3), row(41, 9, 4), row(4, 2, 5)]


def updater(model: LlamaForCausalLM, micro_batch: int, **optim: object) -> Updater:
    return Updater(model, OptimSection(lr=0.01, micro_batch=micro_batch, **optim), PAD)


def test_short_rows_share_a_micro_batch_instead_of_padding_to_long_ones() -> None:
    batches = updater(tiny_model(), micro_batch=3).micro_batches(ROWS)
    lengths = [sorted(len(r.prompt_ids) + len(r.completion_ids) for r in b) for b in batches]
    assert lengths == [[6, 7, 7], [48, 50, 52]]


def test_each_row_gets_its_own_logprobs_in_the_order_given() -> None:
    model = tiny_model()
    grouped = updater(model, micro_batch=2)._logprobs(model, ROWS)
    alone = [updater(model, micro_batch=1)._logprobs(model, [r])[0] for r in ROWS]
    assert [len(v) for v in grouped] == [len(r.completion_ids) for r in ROWS]
    for mine, reference in zip(grouped, alone, strict=True):
        assert mine == pytest.approx(reference, abs=1e-5)


def test_the_supervised_step_is_the_same_whatever_the_micro_batch() -> None:
    results = []
    for micro_batch in (1, 2, len(ROWS)):
        model = tiny_model()
        loss, grad_norm = updater(model, micro_batch).supervised_update(ROWS)
        results.append((loss, grad_norm, [p.detach().clone() for p in model.parameters()]))
    (loss, grad_norm, weights), *others = results
    for other_loss, other_norm, other_weights in others:
        assert other_loss == pytest.approx(loss, rel=1e-5)
        assert other_norm == pytest.approx(grad_norm, rel=1e-4)
        for a, b in zip(weights, other_weights, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_the_policy_step_gives_each_row_its_own_old_logprobs_whatever_the_micro_batch() -> None:
    """Two minibatches: the first's old logprobs come from its own first forward ("auto"),
    the second's are computed before any step; both must land on their own rows."""
    rows = [replace(r, advantage=1.0 if k % 2 else -1.0) for k, r in enumerate(ROWS)]
    results = []
    for micro_batch in (1, 3):
        model = tiny_model()
        update = updater(model, micro_batch, minibatches=2, old_logprobs="auto")
        before = [update._logprobs(model, [r])[0] for r in rows]
        old, ref = update.old_logprobs(rows)
        update.ppo_update(rows, old, ref)
        for mine, alone in zip(old, before, strict=True):
            assert mine == pytest.approx(alone, abs=1e-5)
        results.append([p.detach().clone() for p in model.parameters()])
    for a, b in zip(*results, strict=True):
        # AdamW's steps are 0.01 a weight: a misplaced row would move them that much, float
        # noise in near-zero gradients a few millionths
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-5)
