"""Advantages for a batch of conversation rows, grouped by question and by rollout
(engine-neutral; ALGORITHMS.md sections 2, 3 and 7).

An engine hands its advantage step a flat batch: one row per conversation, named in verl 0.9
by a key ``{uid}_{session}_{index}`` (the question, the rollout of it, the conversation's place
in the rollout; ``trainer/ppo/v1/utils.py``). :func:`row_advantages` regroups the rows, takes
each rollout's outcome from its final row (as verl's multi-trajectory GRPO does), hands each
group to the CPU trainer's own credit function
(:func:`~longread.train.credit.group_advantages`) and gives every row its value:

- ``grpo``: the outcome advantage of the rollout, broadcast to its conversations;
- ``rememr1``: ReMemR1's per-step mix of the outcome and step terms (alpha 0.8);
- ``rea``: MemReread's ReA mixed with its format term (alpha 0.05); alpha 0 is pure ReA.

The step terms are the ones the loop records per conversation (``step_rewards: rememr1`` or
``rea`` in its config, :func:`~longread.train.credit.step_terms`). The loop also records
whether each conversation came before the evidence was shown and whether grounded notes cut
its notes, so the CPU trainer's per-turn options apply here too: ``credit_before_evidence``
False gives the first kind advantage 0, ``ungrounded_penalty`` adds its centred term
(:func:`~longread.train.credit.ungrounded_terms`).

Unlike verl's GRPO, a question with a single rollout gets advantage 0 (its reward is its
mean), as :func:`~longread.train.advantages.grpo_advantages` defines it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..credit import (
    DEFAULT_THETA,
    ESTIMATORS,
    group_advantages,
    masked_before,
    needs_step_terms,
    ungrounded_terms,
    with_terms,
)
from .rows import PAYLOAD_KEY

METHODS = ESTIMATORS


@dataclass(frozen=True)
class SessionRow:
    """One row of the batch: which question, which rollout, which conversation of it, and
    what the loop recorded for the advantage (None where it recorded nothing)."""

    uid: str
    session: str
    index: int
    step_reward: float | None = None
    rereads: int | None = None
    before_evidence: bool = False  # shown before any evidence sentence
    ungrounded: bool = False  # grounded notes cut a note from its memory
    padding: bool = False  # a row the engine added to fill a batch: advantage 0, no group


def parse_row_key(key: str) -> tuple[str, str, int]:
    """``{uid}_{session}_{index}`` -> (uid, session, index). The uid may hold underscores;
    the last two fields may not (verl splits the same way)."""
    parts = key.rsplit("_", 2)
    if len(parts) != 3 or not parts[2].isdigit():
        raise ValueError(f"row key {key!r} is not '{{uid}}_{{session}}_{{index}}'")
    return parts[0], parts[1], int(parts[2])


def session_rows(
    keys: Sequence[str],
    extra_fields: Sequence[Mapping[str, Any] | None],
    padding: Sequence[bool] | None = None,
) -> list[SessionRow]:
    """The batch's rows from the engine's keys and each row's extra fields (the loop's
    payload under :data:`~longread.train.verl.rows.PAYLOAD_KEY`; absent on padding rows)."""
    if len(extra_fields) != len(keys) or (padding is not None and len(padding) != len(keys)):
        raise ValueError("keys, extra fields and padding flags must have one entry per row")
    rows = []
    for i, key in enumerate(keys):
        uid, session, index = parse_row_key(key)
        payload = (extra_fields[i] or {}).get(PAYLOAD_KEY) or {}
        reward, rereads = payload.get("step_reward"), payload.get("rereads")
        rows.append(
            SessionRow(
                uid, session, index,
                step_reward=None if reward is None else float(reward),
                rereads=None if rereads is None else int(rereads),
                before_evidence=bool(payload.get("before_evidence", False)),
                ungrounded=bool(payload.get("ungrounded", False)),
                padding=bool(padding[i]) if padding is not None else False,
            )
        )  # fmt: skip
    return rows


def row_advantages(
    rows: Sequence[SessionRow],
    outcomes: Sequence[float],
    method: str,
    *,
    alpha: float | None = None,
    theta: float = DEFAULT_THETA,
    std_normalise: bool = False,
    credit_before_evidence: bool = True,
    ungrounded_penalty: float = 0.0,
) -> list[float]:
    """One advantage per row, in the rows' order. ``outcomes[i]`` is row i's reward; a
    rollout's outcome is its final (highest-index) row's. ``alpha`` defaults to the method's
    paper value; ``theta`` is ReA's correctness threshold; ``std_normalise`` applies to grpo;
    ``credit_before_evidence`` and ``ungrounded_penalty`` are the CPU trainer's per-turn
    options (``[reward]``, :func:`~longread.train.credit.group_credit`).

    Raises ValueError when a rollout's conversation indices are not 0..n-1, or when the
    method needs what a row lacks (step rewards for rememr1 and mixed rea, reread counts for
    rea).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if len(outcomes) != len(rows):
        raise ValueError(f"{len(outcomes)} outcomes for {len(rows)} rows")
    result = [0.0] * len(rows)
    for sessions in _groups(rows).values():
        values = group_advantages(
            method,
            [outcomes[positions[-1]] for positions in sessions],
            [len(positions) for positions in sessions],
            step_terms=_step_rewards(rows, sessions, method) if needs_step_terms(method, alpha)
            else None,
            rereads=_rereads(rows, sessions) if method == "rea" else None,
            alpha=alpha,
            theta=theta,
            std_normalise=std_normalise,
        )  # fmt: skip
        if not credit_before_evidence:
            before = [sum(rows[i].before_evidence for i in positions) for positions in sessions]
            values = masked_before(values, before)
        if ungrounded_penalty:
            flags = [[rows[i].ungrounded for i in positions] for positions in sessions]
            values = with_terms(values, ungrounded_terms(flags, ungrounded_penalty))
        for positions, session_values in zip(sessions, values, strict=True):
            for position, value in zip(positions, session_values, strict=True):
                result[position] = value
    return result


def _groups(rows: Sequence[SessionRow]) -> dict[str, list[list[int]]]:
    """uid -> its rollouts, each the row positions in conversation order. Padding rows are
    left out (they keep advantage 0)."""
    by_uid: dict[str, dict[str, list[int]]] = {}
    for position, row in enumerate(rows):
        if not row.padding:
            by_uid.setdefault(row.uid, {}).setdefault(row.session, []).append(position)
    groups: dict[str, list[list[int]]] = {}
    for uid, sessions in by_uid.items():
        ordered = [sorted(p, key=lambda i: rows[i].index) for p in sessions.values()]
        for positions in ordered:
            indices = [rows[i].index for i in positions]
            if indices != list(range(len(indices))):
                raise ValueError(
                    f"rollout {rows[positions[0]].session} of {uid} has conversations "
                    f"{indices}; expected 0..{len(indices) - 1}"
                )
        groups[uid] = ordered
    return groups


def _step_rewards(
    rows: Sequence[SessionRow], sessions: list[list[int]], method: str
) -> list[list[float]]:
    rewards = [[rows[i].step_reward for i in positions] for positions in sessions]
    if any(r is None for session in rewards for r in session):
        raise ValueError(
            f"{method} needs a step reward on every conversation; set step_rewards: {method} "
            "in the agent loop config"
        )
    return [[float(r) for r in session if r is not None] for session in rewards]


def _rereads(rows: Sequence[SessionRow], sessions: list[list[int]]) -> list[int]:
    rereads = [rows[positions[-1]].rereads for positions in sessions]
    if any(k is None for k in rereads):
        raise ValueError("rea needs each rollout's reread count; the longread loop records it")
    return [int(k or 0) for k in rereads]
