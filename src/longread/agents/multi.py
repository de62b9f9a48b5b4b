"""Many questions, one document: a single pass that reads each chunk for every question.

Users ask many questions of one book, and benchmarks group them (QuALITY: about 13 per
article). Asked one at a time, the document is cut and read once per question. Read together,
it is cut once and read chunk-major: chunk 1 for every question, then chunk 2, and so on,
then the final answers. Consecutive calls then read the same chunk, so with a prompt that puts
the section first (``MemAgentConfig.section_first``) they share a long prompt prefix, which a
prefix cache computes once: the embedded model keeps the previous call's state and reuses its
longest common token prefix; vLLM's automatic prefix caching keeps recent prefixes.

Each question keeps its own run: its own context (run id, sample id, sink), its own step
records (one per model call, as ever) and its own Run. With the paper's prompt order the
answers are those of asking one question at a time; only the order of the calls changes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..errors import UsageError
from ..trace import Run, StepSink, utc_now
from .base import AgentBase, CallContext, ConfigT, Document, Reading, require_question
from .budget import ChunkPlan


class MultiQuestionAgent(AgentBase[ConfigT]):
    """An agent that can read one document for several questions in a single pass.
    Subclasses implement ``plan_many`` and ``read_many``; ``run_many`` is the skeleton they
    share, as ``run`` is for ``read``."""

    @property
    def shares_prefix(self) -> bool:
        """Whether calls for different questions on one chunk share a long prompt prefix,
        so that reading questions together saves prefill (evaluation groups samples then)."""
        return False

    def plan_many(self, questions: Sequence[str]) -> ChunkPlan:
        """One chunk size that fits every question's calls."""
        raise NotImplementedError

    async def read_many(
        self, contexts: Sequence[CallContext], questions: Sequence[str], document: Document
    ) -> list[Reading]:
        """Make every question's calls, question i's through ``contexts[i]``."""
        raise NotImplementedError

    async def run_many(
        self,
        questions: Sequence[str],
        document: Document,
        *,
        sample_ids: Sequence[str | None] | None = None,
        sinks: Sequence[StepSink | None] | None = None,
    ) -> list[Run]:
        """Answer every question about ``document`` in one pass; one Run per question, in
        order, each as ``run`` would give it (``sample_ids[i]`` and ``sinks[i]`` as there).

        A run's ``seconds`` is its own calls' time plus an even share of the time between
        calls, so the runs' seconds add up to the pass's wall time."""
        started, clock = utc_now(), time.perf_counter()
        if not questions:
            raise UsageError("no question to answer")
        questions = [require_question(q) for q in questions]
        count = len(questions)
        ids = _per_question(sample_ids, count, "sample_ids")
        outs = _per_question(sinks, count, "sinks")
        contexts = [self.new_context(sample_id=i, sink=s) for i, s in zip(ids, outs, strict=True)]
        readings = await self.read_many(contexts, questions, document)
        wall = time.perf_counter() - clock
        own = [sum(step.seconds for step in reading.steps) for reading in readings]
        between = max(wall - sum(own), 0.0) / count
        return [
            self.make_run(ctx, question, reading, started, seconds + between)
            for ctx, question, reading, seconds in zip(
                contexts, questions, readings, own, strict=True
            )
        ]


def _per_question(values: Sequence[Any] | None, count: int, name: str) -> list[Any]:
    if values is None:
        return [None] * count
    if len(values) != count:
        raise ValueError(f"{name} has {len(values)} entries for {count} questions")
    return list(values)
