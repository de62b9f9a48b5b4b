"""Log-probabilities of the sampled completion tokens of a batch of training rows.

Rows are left-padded so every completion ends at the last position; the model then computes
logits only for the last ``max completion + 1`` positions (``logits_to_keep``): a 49K-word
vocabulary times a 1,000-token prompt would otherwise cost 200 MB per row for logits the loss
never reads. Position ids follow the attention mask, so padding does not shift positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .episodes import TrainingRow
from .loss import sampled_logprobs


@dataclass
class Batch:
    """A padded micro-batch: model inputs and the completion-aligned targets."""

    input_ids: torch.Tensor  # (B, T), left-padded
    attention_mask: torch.Tensor  # (B, T)
    position_ids: torch.Tensor  # (B, T)
    targets: torch.Tensor  # (B, C): completion ids, right-aligned, 0 where masked
    mask: torch.Tensor  # (B, C): 1 on completion tokens

    @property
    def width(self) -> int:
        return int(self.targets.shape[1])


def make_batch(rows: Sequence[TrainingRow], pad_id: int) -> Batch:
    """Left-pad ``rows`` (prompt + completion) into one batch."""
    lengths = [len(r.prompt_ids) + len(r.completion_ids) for r in rows]
    width = max(len(r.completion_ids) for r in rows)
    total = max(lengths)
    input_ids = torch.full((len(rows), total), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), total), dtype=torch.long)
    targets = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.float32)
    for b, (row, length) in enumerate(zip(rows, lengths, strict=True)):
        input_ids[b, total - length :] = torch.tensor(row.prompt_ids + row.completion_ids)
        attention[b, total - length :] = 1
        n = len(row.completion_ids)
        targets[b, width - n :] = torch.tensor(row.completion_ids)
        mask[b, width - n :] = 1.0
    positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
    return Batch(input_ids, attention, positions, targets, mask)


def completion_logprobs(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """log p(completion token) under ``model``, (B, C) aligned with ``batch.targets``
    (with grad when grad is enabled). Masked places hold garbage: multiply by ``batch.mask``."""
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        logits_to_keep=batch.width + 1,
        use_cache=False,
    )
    # Logits at position i predict token i + 1: the last C + 1 positions minus the final one
    # predict the last C tokens, which are the (right-aligned) completion.
    logits = out.logits[:, :-1, :]
    return sampled_logprobs(logits, batch.targets)


def padded(values: Sequence[Sequence[float]], width: int) -> torch.Tensor:
    """Right-aligned (B, width) tensor of per-token values, zeros in front."""
    out = torch.zeros((len(values), width), dtype=torch.float32)
    for b, row in enumerate(values):
        if row:
            out[b, width - len(row) :] = torch.tensor(list(row), dtype=torch.float32)
    return out


def unpadded(values: torch.Tensor, batch: Batch) -> list[list[float]]:
    """The inverse of :func:`padded` for one batch: each row's completion values."""
    lengths = batch.mask.sum(dim=1).long().tolist()
    width = batch.width
    return [values[b, width - n :].tolist() for b, n in enumerate(lengths)]
