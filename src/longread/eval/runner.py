"""Run an agent over a set of samples: bounded concurrency, every sample recorded as it ends.

A sample is scored from its final reply (the scorer extracts the box), its trace is written,
and its row is committed before the next one is counted, so a killed run loses at most the
samples in flight; rerunning skips what is done and retries what failed. A sample whose
backend call fails, or that cannot fit the window, is a failed row, never a dropped one.

Samples that share a document (QuALITY asks about 13 questions per article) are read together
in one pass (``MultiQuestionAgent.run_many``) when the agent's prompts let a prefix cache
reuse each chunk across questions (MemAgent with ``section_first``); otherwise, and with the
paper's prompt order, where reading together would only reorder the calls, one at a time.
A group is one unit of work, its document cut once (to the smallest chunk size any of its
questions needs): if a call fails or a question cannot fit the window, every sample of the
group gets a failed row (retried by the next run); each sample keeps its own trace and row.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tqdm import tqdm

from ..agents.base import Agent, ProgressCallback
from ..agents.multi import MultiQuestionAgent
from ..data.evidence import evidence_sentences
from ..data.records import Sample
from ..errors import BackendError, LongreadError, UsageError
from ..trace import FORMAT_ERROR, MEMORY_TRUNCATED, Run, Step, StepSink, TraceWriter
from .citation_score import citation_score
from .evidence_watch import EvidenceWatch, stopped_before_evidence
from .scoring import SCORERS, score_answer, sub_em
from .store import DONE, FAILED, RunStore, SampleResult

# Builds one agent per sample around the shared backend, reporting each call to ``progress``.
AgentFactory = Callable[[ProgressCallback], Agent]
# Grouping keys for reports, in order of preference: the first present is the context length.
# Group by the target length a set was built for (exact per-sample counts would scatter it).
LENGTH_KEYS = ("length", "docs", "context_tokens")
_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


@dataclass
class Summary:
    """Totals over the given samples after this session, and where this session's time went.

    ``overhead_seconds`` is wall time with no backend call in flight (loading, chunking,
    scoring, writing, and the gaps between calls); ``backend_busy_seconds`` is the wall time
    with at least one call in flight. ``backend_call_seconds`` sums every call's own latency,
    so it exceeds the busy time when calls overlap. ``bookkeeping_seconds`` is the time spent
    scoring, writing traces and recording rows, summed over samples (it may overlap calls)."""

    total: int
    done: int
    failed: int
    skipped: int  # already done before this session
    ran: int  # finished (done or failed) in this session
    accuracy: float  # headline metric over all ``total`` samples, 0..1 (failed count as 0)
    calls: int
    prompt_tokens: int
    completion_tokens: int
    wall_seconds: float
    backend_busy_seconds: float
    backend_call_seconds: float
    overhead_seconds: float
    bookkeeping_seconds: float
    concurrency: int
    interrupted: bool = False  # stopped early (Ctrl-C, SIGTERM, a failure streak, a bug)
    # This session's failures grouped by error message, most frequent first: ``error``,
    # ``transient`` (server trouble) or not (a configuration error), and ``samples``.
    failures: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Meter:
    """Tokens and busy time from the agents' per-call progress callback.

    Each call reports when it ended and how long it took, so its interval is known; the union
    of the intervals is the time the backend was busy, however many calls overlapped."""

    def __init__(self, on_update: Callable[[_Meter], None] | None = None) -> None:
        self.on_update = on_update  # told after every call (the progress bar's live counts)
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.call_seconds = 0.0
        self.bookkeeping_seconds = 0.0
        self._intervals: list[tuple[float, float]] = []

    def on_call(self, step: Step, expected_calls: int) -> None:
        end = time.perf_counter()
        self.calls += 1
        self.prompt_tokens += step.prompt_tokens
        self.completion_tokens += step.completion_tokens
        self.call_seconds += step.seconds
        self._intervals.append((end - step.seconds, end))
        if self.on_update is not None:
            self.on_update(self)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def busy_seconds(self) -> float:
        return _union_length(self._intervals)


def _union_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by the ``(start, end)`` intervals, overlaps counted once."""
    covered, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    return covered


class _Bar:
    """done/total with the accuracy so far, failures, calls and tokens/s; ETA from tqdm.

    Calls and tokens/s move with every model call, so a sample that takes minutes (a long
    document read chunk by chunk) still shows progress."""

    def __init__(self, enabled: bool, total: int, previous: list[SampleResult]) -> None:
        self._correct = sum(r.headline for r in previous)
        self._failed = 0  # earlier failures are being retried, so not counted yet
        self._counted = len(previous)
        self._calls = 0
        self._tokens = 0
        self._started = time.perf_counter()
        self._bar = tqdm(
            total=total,
            initial=len(previous),
            unit="sample",
            file=sys.stderr,
            disable=not enabled,
            dynamic_ncols=True,
            mininterval=0.5,
        )

    def add(self, result: SampleResult) -> None:
        """Count a finished sample."""
        self._correct += result.headline
        self._failed += result.status == FAILED
        self._counted += 1
        self._bar.set_postfix(self._postfix(), refresh=False)
        self._bar.update(1)

    def on_calls(self, meter: _Meter) -> None:
        """Show the session's calls and tokens/s after a model call."""
        self._calls, self._tokens = meter.calls, meter.tokens
        self._bar.set_postfix(self._postfix())

    def _postfix(self) -> dict[str, str | int]:
        elapsed = time.perf_counter() - self._started
        accuracy = f"{100 * self._correct / self._counted:.1f}%" if self._counted else "-"
        return {
            "acc": accuracy,
            "failed": self._failed,
            "calls": self._calls,
            "tok/s": f"{self._tokens / elapsed:.0f}" if elapsed > 0 else "-",
        }

    def close(self) -> None:
        self._bar.close()


async def run_eval(
    samples: Sequence[Sample],
    agent_factory: AgentFactory,
    store: RunStore,
    concurrency: int,
    progress: bool = True,
    *,
    max_consecutive_failures: int | None = 20,
) -> Summary:
    """Run every sample not yet done in ``store``, ``concurrency`` at a time, and return the
    totals. Failed samples of an earlier session are retried. The session's summary is saved
    even when the run is stopped early, so its time still counts in the run's totals.

    ``max_consecutive_failures`` failed samples in a row stop the run with a BackendError (a
    dead server should not turn ten thousand samples into failed rows); they stay recorded and
    are retried by the next run. None never stops."""
    if concurrency < 1:
        raise UsageError("concurrency must be at least 1")
    check_samples(samples)
    done = store.done_ids()
    todo = [s for s in samples if s.id not in done]
    ids = {s.id for s in samples}
    previous = [r for r in store.results() if r.sample_id in ids and r.status == DONE]
    bar = _Bar(progress, len(samples), previous)
    meter = _Meter(on_update=bar.on_calls)
    streak = _FailureStreak(max_consecutive_failures)
    groups = group_by_document(todo) if _reads_together(agent_factory) else [[s] for s in todo]
    watch = _exit_gated(agent_factory)
    pending = iter(groups)
    finished: list[SampleResult] = []
    started = time.perf_counter()

    async def worker() -> None:
        for group in pending:  # one shared iterator: each group is taken once
            for result in await _evaluate_group(group, agent_factory, meter, store, watch):
                store.record(result)  # durable before the sample is counted
                finished.append(result)
                bar.add(result)
                streak.add(result)

    interrupted = True
    try:
        await run_workers(min(concurrency, len(groups)), worker)
        interrupted = False
    finally:
        bar.close()
        wall = time.perf_counter() - started
        summary = _summarise(
            samples,
            store,
            meter,
            finished,
            ran=len(finished),
            skipped=len(samples) - len(todo),
            wall=wall,
            concurrency=concurrency,
            interrupted=interrupted,
        )
        store.save_summary(summary.to_dict())
    return summary


def check_samples(samples: Sequence[Sample]) -> None:
    """Refuse data the store or the scorer cannot take, before any call is paid for."""
    seen: set[str] = set()
    for sample in samples:
        if sample.id in seen:
            raise UsageError(f"sample id {sample.id!r} occurs twice; ids must be unique")
        seen.add(sample.id)
        if not sample.answers:
            raise UsageError(f"sample {sample.id!r} has no gold answers")
        if not sample.question.strip():
            raise UsageError(f"sample {sample.id!r} has an empty question")
        if not sample.context.strip():  # every agent would refuse it
            raise UsageError(f"sample {sample.id!r} has an empty context (no document to read)")
        kind = sample.meta.get("kind", "qa")
        if kind not in SCORERS:
            raise UsageError(f"sample {sample.id!r} has unknown kind {kind!r}")


def _reads_together(agent_factory: AgentFactory) -> bool:
    """Whether this run's agent reads samples that share a document together (see the
    module's docstring); asked of an agent built only for that (it makes no call)."""
    agent = agent_factory(lambda step, expected_calls: None)
    return isinstance(agent, MultiQuestionAgent) and agent.shares_prefix


def _exit_gated(agent_factory: AgentFactory) -> bool:
    """Whether this run's agent may stop reading early (memagent's exit gate or probe): then
    each sample's update prompts are watched for its evidence (eval/evidence_watch.py)."""
    config = getattr(agent_factory(lambda step, expected_calls: None), "config", None)
    return bool(getattr(config, "exit_gate", False) or getattr(config, "exit_probe", False))


def group_by_document(samples: Sequence[Sample]) -> list[list[Sample]]:
    """The samples grouped by identical context, groups and samples in first-seen order."""
    groups: dict[str, list[Sample]] = {}
    for sample in samples:
        groups.setdefault(sample.context, []).append(sample)
    return list(groups.values())


async def _evaluate_group(
    group: list[Sample],
    agent_factory: AgentFactory,
    meter: _Meter,
    store: RunStore,
    watch_evidence: bool = False,
) -> list[SampleResult]:
    """Run, score and trace the samples of one document, read together when there are
    several. Errors a user can act on (backend, budget, bad sample) give failed results;
    anything else is a bug and propagates. ``watch_evidence``: note whether an early stop
    came before the sample's evidence was read (the exit gate)."""
    spent = {sample.id: _Spent(meter) for sample in group}
    # The steps go to the trace files as they happen: a sample's memory stays one step deep.
    writers = [TraceWriter(store.run_dir / _trace_path(sample)) for sample in group]
    watches = [
        EvidenceWatch(evidence_sentences(sample), writer) if watch_evidence else None
        for sample, writer in zip(group, writers, strict=True)
    ]
    sinks: list[StepSink] = [w or writer for w, writer in zip(watches, writers, strict=True)]
    try:
        if len(group) == 1:
            runs = [await _run_one(group[0], agent_factory(spent[group[0].id].on_call), sinks[0])]
        else:
            runs = await _run_together(group, agent_factory, spent, sinks)
    except BaseException as exc:
        for writer in writers:
            writer.discard()
        if not isinstance(exc, LongreadError):
            raise
        return [_failed(sample, exc, spent[sample.id]) for sample in group]
    return [
        await _finished(sample, run, writer, meter, watch)
        for sample, run, writer, watch in zip(group, runs, writers, watches, strict=True)
    ]


async def _run_one(sample: Sample, agent: Agent, sink: StepSink) -> Run:
    return await agent.run(sample.question, sample.context, sample_id=sample.id, sink=sink)


async def _run_together(
    group: list[Sample],
    agent_factory: AgentFactory,
    spent: dict[str, _Spent],
    sinks: list[StepSink],
) -> list[Run]:
    def on_call(step: Step, expected_calls: int) -> None:  # each call to its own sample
        spent[step.sample_id or ""].on_call(step, expected_calls)

    agent = agent_factory(on_call)
    assert isinstance(agent, MultiQuestionAgent)  # _reads_together said so
    return await agent.run_many(
        [sample.question for sample in group],
        group[0].context,
        sample_ids=[sample.id for sample in group],
        sinks=sinks,
    )


def _failed(sample: Sample, exc: LongreadError, spent: _Spent) -> SampleResult:
    score = score_answer(None, sample.answers, kind=sample.meta.get("kind", "qa"))
    # What the calls before the failure cost is kept: a failed sample was not free.
    error = f"{type(exc).__name__}: {exc}"
    return _result(
        sample, FAILED, score.to_dict(), cost=spent.cost(), error=error, transient=exc.transient
    )


async def _finished(
    sample: Sample,
    run: Run,
    writer: TraceWriter,
    meter: _Meter,
    watch: EvidenceWatch | None = None,
) -> SampleResult:
    began = time.perf_counter()
    score = score_answer(run.final_reply, sample.answers, kind=sample.meta.get("kind", "qa"))
    await asyncio.to_thread(writer.finish, run)
    scores = {**score.to_dict(), **citation_score(run.citations, run.supported, sample)}
    cost = {**_cost(run), **_mechanism_use(run, sample.answers)}
    if watch is not None and "chunks_read" in cost:  # the report's "exits before evidence"
        cost["exit_before_evidence"] = stopped_before_evidence(run.config, watch)
    result = _result(sample, DONE, scores, cost=cost, trace=_trace_path(sample))
    meter.bookkeeping_seconds += time.perf_counter() - began
    return result


def _trace_path(sample: Sample) -> str:
    return f"traces/{trace_name(sample.id)}"


def context_length(meta: dict[str, Any]) -> int | str | None:
    """What reports group lengths by: ``context_tokens``, else ``length``, else ``docs``."""
    for key in LENGTH_KEYS:
        value = meta.get(key)
        if isinstance(value, (int, str)):
            return value
        if value is not None:
            return str(value)
    return None


def dataset_label(meta: dict[str, Any]) -> str | None:
    """What reports group datasets by: the dataset's name, with the task where one dataset
    holds several (RULER's ``ruler/niah_single_2``), since tasks must not share a table, and
    marked ``(by documents)`` for sets sized by document count."""
    dataset, task = meta.get("dataset"), meta.get("task")
    if dataset is None:
        return None
    label = f"{dataset}/{task}" if task and task != dataset else str(dataset)
    # A needle worded otherwise, or hidden in another text, is another test of the same task.
    # Chains whose distractors take their own orders are an easier set than the same task
    # with every chain in the sample's order (data/chains.py), so the two never share a table.
    variant = [
        f"{k} {meta[k]}" for k in ("wording", "haystack_file", "distractor_order") if meta.get(k)
    ]
    if variant:
        label += f" ({', '.join(variant)})"
    # Sets sized by document count (RULER-HQA's own axis) must not share a table or a plot
    # line with sets sized in tokens.
    return f"{label} (by documents)" if "docs" in meta and "length" not in meta else label


def trace_name(sample_id: str) -> str:
    """A file name for the sample's trace; ids unsafe as names get a hash to stay unique."""
    if _SAFE_ID.fullmatch(sample_id):
        return f"{sample_id}.json"
    digest = hashlib.sha1(sample_id.encode()).hexdigest()[:10]
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', sample_id)[:80]}-{digest}.json"


def _result(sample: Sample, status: str, score: dict[str, Any], **extra: Any) -> SampleResult:
    return SampleResult(
        sample_id=sample.id,
        status=status,
        kind=sample.meta.get("kind", "qa"),
        score=score,
        dataset=dataset_label(sample.meta),
        context_length=context_length(sample.meta),
        **extra,
    )


class _Spent:
    """One sample's calls so far, passed on to the session's meter; a failed sample's cost."""

    def __init__(self, meter: _Meter) -> None:
        self._meter = meter
        self._started = time.perf_counter()
        self._steps: list[Step] = []

    def on_call(self, step: Step, expected_calls: int) -> None:
        self._steps.append(step)
        self._meter.on_call(step, expected_calls)

    def cost(self) -> dict[str, Any]:
        return {
            "calls": len(self._steps),
            "prompt_tokens": sum(c.prompt_tokens for c in self._steps),
            "completion_tokens": sum(c.completion_tokens for c in self._steps),
            "seconds": time.perf_counter() - self._started,
        }


def _cost(run: Run) -> dict[str, Any]:
    # Memory rewrites (update calls) apart: how much a memory agent writes per chunk, and how
    # often it hits its cap, is what a trained memory changes.
    updates = [step for step in run.steps if step.kind == "update"]
    # With the exit gate on, how much of the document was read (the report's "read" column).
    read = {}
    if "chunks_read" in run.config:
        read = {"chunks_read": run.config["chunks_read"], "chunks": run.config["chunks"]}
    return {
        "calls": run.calls,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "seconds": run.seconds,
        "updates": len(updates),
        "update_tokens": sum(step.completion_tokens for step in updates),
        "updates_truncated": sum(MEMORY_TRUNCATED in step.flags for step in updates),
        **read,
    }


# The calls whose reply must follow an agent's own format (issue 28's "well formed" target):
# ReMemR1's <update>/<recall> steps, MemReread's stop-or-ask decisions.
FORMATTED_CALLS = {"rememr1": "update", "memreread": "decide"}


def _mechanism_use(run: Run, golds: Sequence[str]) -> dict[str, int]:
    """What the agent's own mechanism did (the report's "recalls", "rereads" and
    "well formed" columns): ReMemR1's recall queries, and how many brought back memory
    holding a gold answer; MemReread's rereads (its integrate calls); for both, the calls
    that must follow the agent's format and those flagged ``format_error``. Empty for other
    agents."""
    use: dict[str, int] = {}
    if run.agent == "rememr1":
        recalled = [s.recall.memory for s in run.steps if s.recall is not None]
        hits = sum(bool(memory) and sub_em(memory or "", golds) > 0 for memory in recalled)
        use = {"recalls": len(recalled), "recall_hits": hits}
    if run.agent == "memreread":
        use = {"rereads": sum(s.kind == "integrate" for s in run.steps)}
    kind = FORMATTED_CALLS.get(run.agent)
    if kind is not None:
        formatted = [s for s in run.steps if s.kind == kind]
        use["formatted_calls"] = len(formatted)
        use["format_errors"] = sum(FORMAT_ERROR in s.flags for s in formatted)
    return use


class _FailureStreak:
    """Stops a run whose samples keep failing, e.g. because the server is down."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.count = 0

    def add(self, result: SampleResult) -> None:
        self.count = self.count + 1 if result.status == FAILED else 0
        if self.limit is not None and self.count >= self.limit:
            message = (
                f"{self.count} samples failed in a row, the last with: {result.error}; "
                "stopping (failed samples are retried when you rerun the same command)"
            )
            if result.transient:
                raise BackendError(message, transient=True)
            raise UsageError(message)  # a configuration error: every sample would fail


async def run_workers(count: int, worker: Callable[[], Awaitable[None]]) -> None:
    """Run ``count`` copies of ``worker``; the first to raise cancels the others."""
    if count < 1:
        return
    tasks = [asyncio.ensure_future(worker()) for _ in range(count)]
    try:
        finished, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in finished:
            task.result()  # re-raise the first error
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _summarise(
    samples: Sequence[Sample],
    store: RunStore,
    meter: _Meter,
    finished: Sequence[SampleResult],
    *,
    ran: int,
    skipped: int,
    wall: float,
    concurrency: int,
    interrupted: bool,
) -> Summary:
    ids = {s.id for s in samples}
    rows = [r for r in store.results() if r.sample_id in ids]
    busy = meter.busy_seconds()
    return Summary(
        total=len(samples),
        done=sum(r.status == DONE for r in rows),
        failed=sum(r.status == FAILED for r in rows),
        skipped=skipped,
        ran=ran,
        accuracy=sum(r.headline for r in rows) / len(samples) if samples else 0.0,
        calls=meter.calls,
        prompt_tokens=meter.prompt_tokens,
        completion_tokens=meter.completion_tokens,
        wall_seconds=wall,
        backend_busy_seconds=busy,
        backend_call_seconds=meter.call_seconds,
        overhead_seconds=max(wall - busy, 0.0),
        bookkeeping_seconds=meter.bookkeeping_seconds,
        concurrency=concurrency,
        interrupted=interrupted,
        failures=group_failures(finished),
    )


def group_failures(results: Sequence[SampleResult]) -> list[dict[str, Any]]:
    """The failed results grouped by error message (and kind), most frequent first."""
    counts = Counter((r.error or "", bool(r.transient)) for r in results if r.status == FAILED)
    return [
        {"error": error, "transient": transient, "samples": n}
        for (error, transient), n in counts.most_common()
    ]
