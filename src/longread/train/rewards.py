"""Reward functions over the repo's own run records (ALGORITHMS.md sections 2, 3, 5 and 7).

A rollout is one :class:`~longread.trace.Run`; a group is the n rollouts of one question. Each
reward is a plain function of a run and the question's gold aliases returning a float (TRL's
"reward functions as plain functions"); :func:`group_rewards` maps one over a group and gives
the list of floats the advantage functions in :mod:`longread.train.advantages` take.

The outcome reward is the evaluation's own strict judge (:func:`score_answer`), so a model is
trained on exactly what it is scored on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..agents.memagent import NO_MEMORY
from ..eval import evidence_watch
from ..eval.evidence_watch import EvidenceWatch
from ..eval.scoring import extract_prediction, score_answer, word_recall
from ..trace import FORMAT_ERROR, MEMORY_KEPT, Run, Step

RewardFn = Callable[[Run, Sequence[str]], float]


def group_rewards(reward: RewardFn, runs: Sequence[Run], golds: Sequence[str]) -> list[float]:
    """``reward`` of each rollout of one question's group, in order."""
    return [reward(run, golds) for run in runs]


# --- outcome and partial credit -----------------------------------------------------------


def outcome_reward(run: Run, golds: Sequence[str], *, kind: str = "qa") -> float:
    """The outcome reward R (ALGORITHMS.md sections 2, 5 and 7): 1.0 when the final reply's
    last ``\\boxed{}`` equals a gold alias after lower-casing and dropping whitespace (the
    strict judge; an unboxed answer scores 0), else 0.0.

    This is ``score_answer(run.final_reply, golds, kind=kind).strict``: one judge for
    evaluation and training. ``kind="ruler"`` makes samples with several needles require all.
    """
    return score_answer(run.final_reply, golds, kind=kind).strict


def final_memory(run: Run) -> str | None:
    """The memory the final call saw: that of the last step which left one (None if none)."""
    return next((s.memory for s in reversed(run.steps) if s.memory is not None), None)


def memory_recall_reward(run: Run, golds: Sequence[str]) -> float:
    """Optional partial credit for small models (TRAINING.md, "Pitfalls"): the word recall
    (ALGORITHMS.md section 2) of the best gold alias in :func:`final_memory`; 0.0 when the run
    left no memory.

    Groups where every rollout misses the strict answer have zero outcome advantage; this
    still ranks a rollout that kept the evidence above one that lost it.
    """
    memory = final_memory(run)
    return 0.0 if memory is None else word_recall(memory, golds)


# --- ReMemR1 multi-level step rewards (RLMLR) ---------------------------------------------


@dataclass(frozen=True)
class StepReward:
    """The RLMLR terms of one step (ALGORITHMS.md section 2); ``total`` is r_t."""

    step: int  # ``Step.step`` of the call
    kind: str  # ``Step.kind``: "update" or "final"
    format: float  # f_t: 1.0 when the step followed the format, else 0.0
    update_gain: float  # recall(new memory) - recall(previous memory); may be negative
    revisit_gain: float  # max(0, recall(recalled + prompt) - recall(prompt))

    @property
    def total(self) -> float:
        """r_t = f_t + update gain + revisit gain: the three terms unweighted, as ALGORITHMS.md
        lists them with no weights."""
        return self.format + self.update_gain + self.revisit_gain


def prompt_text(step: Step) -> str:
    """The text the model read in ``step``: every message's content, joined by newlines."""
    return "\n".join(m["content"] for m in step.messages)


def rememr1_step_rewards(run: Run, golds: Sequence[str]) -> list[StepReward]:
    """One :class:`StepReward` per step of a ReMemR1 (or MemAgent) run, in order
    (ALGORITHMS.md section 2, "Multi-level reward"). Recall is :func:`word_recall` of the
    best gold alias (case and punctuation normalised).

    - format f_t, update step: 1.0 when the step has neither ``FORMAT_ERROR`` (exactly one
      non-empty closed ``<update>`` and at most one closed ``<recall>``, see
      ``parse_step_reply``) nor ``MEMORY_KEPT`` in its flags. Final step: 1.0 when its reply
      has a ``\\boxed{}`` whose content is not empty (the scorer reads the last box).
    - update gain, update step: ``recall(step.memory) - recall(previous memory)``, where the
      previous memory is the ``memory`` of the previous update step, or the ``NO_MEMORY``
      placeholder for the first one (recall 0 unless a gold word is in it). A kept memory
      gains 0. Final step: 0 (it writes no memory).
    - revisit gain, update step that recalled something: ``max(0, recall(R + "\\n" + P) -
      recall(P))`` with P = :func:`prompt_text` of this step and R = ``step.recall.memory``
      (what its recall brought back, which the next prompt shows): the gold words the recall
      adds to what the step already read. 0 when the step asked nothing or nothing matched;
      0 for the final step.

    Only update and final steps are expected: MemReread's decide/integrate calls raise
    ``ValueError``, since their memories do not form one chain.
    """
    rewards: list[StepReward] = []
    previous = word_recall(NO_MEMORY, golds)
    for step in run.steps:
        if step.kind == "final":
            rewards.append(StepReward(step.step, step.kind, _final_format(step), 0.0, 0.0))
        elif step.kind == "update":
            new = word_recall(step.memory, golds) if step.memory is not None else previous
            rewards.append(
                StepReward(step.step, step.kind, _update_format(step), new - previous,
                           _revisit_gain(step, golds))
            )  # fmt: skip
            previous = new
        else:
            raise ValueError(
                f"step {step.step} is a {step.kind!r} call; ReMemR1 step rewards cover "
                "update and final calls only"
            )
    return rewards


def _update_format(step: Step) -> float:
    return float(FORMAT_ERROR not in step.flags and MEMORY_KEPT not in step.flags)


def _final_format(step: Step) -> float:
    # extract_prediction gives None for an empty box, so this is "a non-empty box".
    prediction, boxed = extract_prediction(step.reply)
    return float(boxed and prediction is not None)


def _revisit_gain(step: Step, golds: Sequence[str]) -> float:
    if step.recall is None or step.recall.memory is None:
        return 0.0
    prompt = prompt_text(step)
    with_recall = word_recall(step.recall.memory + "\n" + prompt, golds)
    return max(0.0, with_recall - word_recall(prompt, golds))


# --- MemReread ----------------------------------------------------------------------------


def reread_count(run: Run) -> int:
    """Rereads a MemReread run made: its integrate calls (ALGORITHMS.md section 3). A reread
    whose integration never ran (a failed run) is not counted."""
    return sum(step.kind == "integrate" for step in run.steps)


def _no_spaces(text: str) -> str:
    return "".join(text.lower().split())


def contained_reward(run: Run, golds: Sequence[str]) -> float:
    """MemReread's reference reward (ALGORITHMS.md section 3): 1.0 when a gold alias,
    lower-cased and without whitespace, occurs in the boxed prediction treated the same way.

    Looser than :func:`outcome_reward` (containment, not equality). The prediction is the last
    ``\\boxed{}`` of the final reply, as the scorer extracts it; an unboxed reply scores 0, or
    a reply restating the whole memory would collect the reward. Empty predictions and blank
    aliases never match.
    """
    prediction, boxed = extract_prediction(run.final_reply)
    if not boxed or prediction is None:
        return 0.0
    pred = _no_spaces(prediction)
    return float(any(gold in pred for gold in map(_no_spaces, golds) if gold))


# --- exit gate (GRU-Mem, ALGORITHMS.md section 8) -----------------------------------------


def run_stopped_before_evidence(run: Run, evidence: Sequence[str]) -> bool:
    """Whether the run's exit gate stopped reading (``chunks_read`` < ``chunks`` in its config)
    before an evidence sentence was shown (eval/evidence_watch.py: the eval report's test)."""
    watch = EvidenceWatch(evidence)
    for step in run.steps:
        watch.write(step)
    return evidence_watch.stopped_before_evidence(run.config, watch)


def steps_before_evidence(run: Run, evidence: Sequence[str]) -> int:
    """How many of the run's first steps came before any evidence sentence was shown
    (eval/evidence_watch.py's test): the updates of filler sections ahead of the needle. 0 when
    ``evidence`` is empty or no step showed it (then nothing marks where the evidence came)."""
    watch = EvidenceWatch(evidence)
    for index, step in enumerate(run.steps):
        watch.write(step)
        if watch.any_read:
            return index
    return 0


def exit_gate_reward(
    run: Run,
    evidence: Sequence[str],
    correct: float,
    *,
    early_penalty: float,
    skip_bonus: float,
) -> float:
    """GRU-Mem's exit-gate reward terms, added to a rollout's reward:

    - ``-early_penalty`` when the run stopped reading before an evidence sentence
      (:func:`run_stopped_before_evidence`): stopping early must never pay off by luck;
    - else, when its answer is right (``correct`` from the strict judge),
      ``skip_bonus`` times the share of chunks it did not read;
    - 0 for a run that read everything (the exit gate off, or never used).
    """
    read, total = run.config.get("chunks_read"), run.config.get("chunks")
    if read is None or not total or read >= total:
        return 0.0
    if run_stopped_before_evidence(run, evidence):
        return -early_penalty
    return skip_bonus * (1.0 - read / total) if correct else 0.0


# --- notes the document does not support ---------------------------------------------------

_NUMBER = re.compile(r"\d+")


def unsupported_note_share(run: Run, document: str, golds: Sequence[str] = ()) -> float:
    """The share of a run's memory updates whose notes hold a number that neither the document
    (with the question: pass both as ``document``) nor a gold answer states: a made-up answer
    such as "The special magic number ... is 11." written before the needle came. The outcome
    reward pays a rollout that makes a claim up and replaces it later as much as one that never
    made one up; this term, subtracted with a weight, tells them apart. A state-reset sample's
    document is its few sections, so a number its notes carried in from earlier sections
    counts as made up unless it is the gold (on RULER's needles the only number worth keeping).
    0.0 for a run without updates."""
    stated = set(_NUMBER.findall(document)) | set(_NUMBER.findall(" ".join(golds)))
    notes = [s.memory for s in run.steps if s.kind == "update" and s.memory is not None]
    if not notes:
        return 0.0
    made_up = sum(any(n not in stated for n in _NUMBER.findall(note)) for note in notes)
    return made_up / len(notes)
