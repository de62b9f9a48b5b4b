"""What one agent run hands to an RL engine: one output per conversation (engine-neutral).

An engine that trains several conversations per sample (verl 0.9's agent loops, SkyRL's
step-wise trajectories) wants, for each conversation: the prompt ids, the response ids, a mask
of the sampled tokens, the sampler's logprobs, and the outcome reward on the final one. Every
field here comes from the step records through :func:`~longread.train.training_rows`: the ids
are the ones the sampler saw and produced, never re-tokenised text.

This module also defines the dataset row the engine feeds back to the loop (:func:`dataset_row`
and :func:`sample_from_row`): the question, the document and the gold answers travel in
``extra_info``, so the engine's own prompt-length filter sees only the question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...data.records import Sample
from ...errors import UsageError
from ...trace import NOTES_UNGROUNDED, Run
from ..episodes import training_rows

LOOP_NAME = "longread_agent"  # the agent loop's registered name, and the dataset's agent_name
PAYLOAD_KEY = "longread"  # where each output's extra fields keep what the advantage step needs


@dataclass(frozen=True)
class ConversationOutput:
    """One conversation of a run in the shape of verl's ``AgentLoopOutput``.

    ``response_mask`` is 1 on every response token: a longread conversation's response is
    sampled text only (no tool output is spliced in). ``reward_score`` is set on the final
    conversation only; the engine copies it to the others (verl does, ``agent_loop_tq.py``).
    ``payload`` is what the advantage step reads back for this row (:data:`PAYLOAD_KEY`).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None
    reward_score: float | None
    seconds: float
    payload: dict[str, Any] = field(default_factory=dict)


def conversation_outputs(
    run: Run,
    outcome: float,
    *,
    step_rewards: Sequence[float] | None = None,
    rereads: int = 0,
    before_evidence: int = 0,
) -> list[ConversationOutput]:
    """One :class:`ConversationOutput` per step of ``run``, in call order.

    ``outcome`` is the run's outcome reward (on the last output); ``step_rewards`` one r_t per
    step for ReMemR1's advantage (ALGORITHMS.md section 2), None when the advantage needs
    none; ``rereads`` MemReread's reread count for ReA (section 3); ``before_evidence`` how
    many of the first steps came before an evidence sentence was shown (each row says whether
    it is one, and whether grounded notes cut its notes: the advantage step's per-turn
    options, ``credit_before_evidence`` and ``ungrounded_penalty``). Raises ValueError when the
    run has no token records (run the agent with ``record_tokens=True``), when a conversation
    sampled nothing (an engine cannot place a reward on an empty response), or when the
    step rewards do not match the steps.
    """
    if step_rewards is not None and len(step_rewards) != len(run.steps):
        raise ValueError(f"{len(step_rewards)} step rewards for a run of {len(run.steps)} steps")
    # The advantage is the engine's to compute, from the whole group; the rows carry none.
    rows = training_rows(run, [0.0] * len(run.steps), group=run.sample_id or run.run_id)
    outputs = []
    for t, (row, step) in enumerate(zip(rows, run.steps, strict=True)):
        if not row.completion_ids:
            raise ValueError(f"step {step.step} of run {run.run_id} sampled no tokens")
        last = t == len(rows) - 1
        payload = {
            "step": t,
            "kind": step.kind,
            "step_reward": None if step_rewards is None else float(step_rewards[t]),
            "rereads": rereads,
            "run_id": run.run_id,
            "before_evidence": t < before_evidence,
            "ungrounded": NOTES_UNGROUNDED in step.flags,
        }
        outputs.append(
            ConversationOutput(
                prompt_ids=list(row.prompt_ids),
                response_ids=list(row.completion_ids),
                response_mask=[1] * len(row.completion_ids),
                response_logprobs=None if row.old_logprobs is None else list(row.old_logprobs),
                reward_score=float(outcome) if last else None,
                seconds=step.seconds,
                payload=payload,
            )
        )
    return outputs


def dataset_row(sample: Sample, index: int, *, agent_loop: str | None = None) -> dict[str, Any]:
    """``sample`` as one row of a verl RL dataset (a Parquet row of ``RLHFDataset``).

    ``prompt`` holds the question alone (verl's length filter and logging read it); the
    document, the gold aliases and the scoring kind go in ``extra_info`` for the loop. With
    ``agent_loop``, the row's ``agent_name`` routes it to that loop; without, the run's
    ``rollout.agent.default_agent_loop`` does, so one dataset serves every agent.
    """
    routing = {"agent_name": agent_loop} if agent_loop else {}
    return {
        "data_source": f"longread/{sample.meta.get('dataset', 'custom')}",
        **routing,
        "prompt": [{"role": "user", "content": sample.question}],
        "reward_model": {"style": "rule", "ground_truth": list(sample.answers)},
        "extra_info": {
            "index": index,
            "sample_id": sample.id,
            "question": sample.question,
            "context": sample.context,
            "answers": list(sample.answers),
            "kind": sample.meta.get("kind", "qa"),
        },
    }


def sample_from_row(fields: Mapping[str, Any]) -> Sample:
    """The :class:`Sample` a dataset row (the keyword arguments verl gives an agent loop)
    describes: the inverse of :func:`dataset_row`. A row without a document or answers is a
    usage error that names the missing key."""
    info = fields.get("extra_info") or {}
    missing = [key for key in ("context", "answers") if not info.get(key)]
    if missing:
        raise UsageError(
            f"dataset row {info.get('sample_id') or fields.get('index')!r} has no "
            f"extra_info.{' or extra_info.'.join(missing)}; build rows with "
            "longread.train.verl.dataset_row (examples/verl/make_dataset.py)"
        )
    question = info.get("question") or _last_user_message(fields.get("raw_prompt"))
    answers = info["answers"]
    return Sample(
        id=str(info.get("sample_id") or fields.get("uid") or ""),
        question=str(question),
        context=str(info["context"]),
        answers=[answers] if isinstance(answers, str) else [str(a) for a in answers],
        meta={"kind": info.get("kind") or "qa"},
    )


def _last_user_message(messages: Any) -> str:
    for message in reversed(list(messages or [])):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""
