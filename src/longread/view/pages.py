"""What each page shows, computed from traces and run folders; the templates only lay it out.

Three pages: a trace (one agent run, call by call), a run folder (the report's numbers and a
table of samples), and a folder of traces (a table of runs).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..agents.memagent import NO_MEMORY
from ..citations.model import Citation
from ..eval.store import DONE, SampleResult
from ..trace import Run, Step
from . import runfolder
from .chunks import FoundChunk, find_chunk
from .diff import WordDiff, word_diff
from .highlight import Piece, highlight
from .sources import NotATrace, RunFolder, Source, TraceSummary, trace_name


@dataclass(frozen=True)
class TokenView:
    """A call's token record: the sampled ids and how likely the sampler found each."""

    prompt_ids: int | None  # how many ids the model read (None: the server did not say)
    completion: list[tuple[int, float | None]]  # (id, logprob)

    @property
    def mean_logprob(self) -> float | None:
        known = [lp for _, lp in self.completion if lp is not None]
        return sum(known) / len(known) if known else None

    @staticmethod
    def bucket(logprob: float | None) -> str:
        """A CSS class by probability: how sure the sampler was of the token it drew."""
        if logprob is None:
            return "p-unknown"
        p = math.exp(logprob)
        return "p-high" if p >= 0.9 else "p-mid" if p >= 0.5 else "p-low" if p >= 0.1 else "p-rare"


@dataclass(frozen=True)
class StepView:
    """One call of a trace (``step``, the record as saved), with the chunk it read and its
    memory compared with the memory before it."""

    step: Step
    chunk: FoundChunk | None
    diff: WordDiff | None  # the memory against the memory before it
    first_memory: bool  # nothing came before (the diff is all insertions)
    tokens: TokenView | None
    pieces: list[Piece] | None = None  # the chunk's text with the spans its memory drew on

    @property
    def marks(self) -> int:
        return sum(piece.marked for piece in self.pieces or [])

    @property
    def recalled(self) -> bool:
        return self.step.recall is not None and self.step.recall.memory is not None


@dataclass(frozen=True)
class CitationView:
    """A citation of the run's answer and the call that read its chunk (None: not found)."""

    citation: Citation
    step: int | None

    @property
    def where(self) -> str:
        """The page and section, else the characters: "p. 2 · Methods", "characters 10-42"."""
        c = self.citation
        parts = [f"p. {c.page}"] if c.page is not None else []
        parts += [c.section] if c.section else []
        return " · ".join(parts) or f"characters {c.char_start}-{c.char_end}"


@dataclass(frozen=True)
class TracePage:
    name: str  # the trace file's name
    run: Run
    steps: list[StepView]
    gold: list[str] | None = None
    gold_note: str | None = None  # why the gold answer is not shown
    result: SampleResult | None = None  # the run folder's row for this sample
    previous: str | None = None  # neighbouring traces of the same run folder
    next: str | None = None
    flags: Counter[str] = field(default_factory=Counter)
    citations: list[CitationView] = field(default_factory=list)

    @property
    def unsupported(self) -> bool:
        """The run checked its answer against the document and found nothing backing it."""
        return self.run.supported is False

    @property
    def correct(self) -> bool | None:
        return None if self.result is None else is_correct(self.result)

    @property
    def title(self) -> str:
        """The sample's id (traces before schema 2 lack it: their row has it), else the file."""
        sample = self.run.sample_id or (self.result.sample_id if self.result else None)
        return sample or self.name


def trace_page(run: Run, name: str, **context: Any) -> TracePage:
    """The trace page of ``run`` (saved as ``name``); ``context`` adds gold, row, neighbours."""
    views = []
    memories: dict[str, str] = {}  # the latest memory of each line of memories
    for step in run.steps:
        line = _memory_line(step)
        before = memories.get(line)
        chunk = None
        if step.chunk_index is not None and step.messages:
            known = before if before is not None else NO_MEMORY  # what the first prompt holds
            chunk = find_chunk(
                step.messages[-1]["content"], run.agent, run.config.get("prompt_dir"), known
            )
        diff = None
        if step.memory is not None:
            diff = word_diff(before or "", step.memory)
            memories[line] = step.memory
        tokens = None
        if step.tokens is not None:
            ids, logprobs = step.tokens.completion_ids, step.tokens.logprobs
            prompt = len(step.tokens.prompt_ids) if step.tokens.prompt_ids is not None else None
            pairs = [(i, logprobs[n] if logprobs else None) for n, i in enumerate(ids)]
            tokens = TokenView(prompt, pairs)
        pieces = None
        if chunk is not None and step.sources:
            pieces = highlight(chunk, step.chunk_index, step.sources)
        views.append(StepView(step, chunk, diff, before is None, tokens, pieces))
    flags = Counter(flag for step in run.steps for flag in step.flags)
    cited = [CitationView(c, _reading_step(run.steps, c)) for c in run.citations]
    return TracePage(name, run, views, flags=flags, citations=cited, **context)


def _reading_step(steps: list[Step], citation: Citation) -> int | None:
    """The call that read a citation's span: the one whose sources hold it, else the first
    that read its chunk."""
    span = (citation.char_start, citation.char_end)
    for step in steps:
        held = any((s.char_start, s.char_end) == span for s in step.sources or [])
        if held and step.chunk_index == citation.chunk:
            return step.step
    for step in steps:
        if citation.chunk is not None and step.chunk_index == citation.chunk:
            return step.step
    return None


def _memory_line(step: Step) -> str:
    """Which memory a step continues: MemReread's rereads each build their own from nothing;
    its integrate calls rewrite the first pass's memory, like every other agent's steps."""
    return step.phase if step.phase.startswith("reread") else "main"


def run_trace_page(source: RunFolder, name: str, run: Run) -> TracePage:
    """A trace of a run folder: with its row's score, the gold answers and its neighbours."""
    results = source.results()
    names = [n for n in (trace_name(r) for r in results) if n]
    result = next((r for r in results if trace_name(r) == name), None)
    gold, note = source.gold(source.config())
    sample = run.sample_id or (result.sample_id if result else None)
    answers = gold.get(sample) if sample is not None else None
    if answers is None and note is None:
        note = "the run's data has no sample with this id"
    at = names.index(name) if name in names else None
    return trace_page(
        run,
        name,
        gold=answers,
        gold_note=note,
        result=result,
        previous=names[at - 1] if at else None,
        next=names[at + 1] if at is not None and at + 1 < len(names) else None,
    )


def is_correct(result: SampleResult) -> bool:
    """Right by the report's headline metric (RULER's match_all, else sub-EM): fully right."""
    return result.status == DONE and result.headline >= 1.0


@dataclass(frozen=True)
class SampleRow:
    """One sample of a run folder."""

    result: SampleResult
    trace: str | None  # trace file name, None when the sample failed before one was written
    summary: TraceSummary | None  # None: no readable trace
    correct: bool
    score: float  # the headline metric, percent

    @property
    def cost(self) -> dict[str, Any]:
        return self.result.cost

    @property
    def metrics(self) -> str:
        """Every score, for a tooltip."""
        score = self.result.score
        names = ("sub_em", "em", "f1", "strict", "match_all", "match_part")
        return " · ".join(f"{n} {_number(score[n])}" for n in names if score.get(n) is not None)


@dataclass(frozen=True)
class RunPage:
    title: str
    path: str
    config: dict[str, Any]
    agent: str
    tables: list[runfolder.ReportTable]
    legend: str
    time: dict[str, Any]
    samples: list[SampleRow]
    expected: int | None  # samples in the run's data, when config.json says

    @property
    def done(self) -> int:
        return sum(row.result.status == DONE for row in self.samples)

    @property
    def failed(self) -> int:
        return len(self.samples) - self.done

    @property
    def backend(self) -> str:
        """The model the run used, in words."""
        backend = self.config.get("backend") or {}
        parts = [str(backend.get("backend") or "")]
        for key in ("model", "model_file", "base_url", "adapter", "quant"):
            if backend.get(key):
                parts.append(f"{key} {backend[key]}")
        return ", ".join(p for p in parts if p)


def run_page(source: RunFolder) -> RunPage:
    """The run folder's page: the report's tables and run time, and every sample."""
    config = source.config()
    results = source.results()
    rows = runfolder.report_rows(source.path, config, results)
    tables, legend = runfolder.report_tables(rows) if rows else ([], "")
    samples = []
    for result in results:
        name = trace_name(result)
        summary = _try_summary(source, name)
        samples.append(SampleRow(result, name, summary, is_correct(result), 100 * result.headline))
    return RunPage(
        title=source.title,
        path=str(source.path),
        config=config,
        agent=_report_agent(rows, config),
        tables=tables,
        legend=legend,
        time=runfolder.run_time(source.path),
        samples=samples,
        expected=config.get("samples") if isinstance(config.get("samples"), int) else None,
    )


def _report_agent(rows: list[dict[str, Any]], config: dict[str, Any]) -> str:
    """The agent as the report labels it (with its adapter, if any)."""
    return str(rows[0]["agent"]) if rows else str(config.get("agent", "?"))


@dataclass(frozen=True)
class TraceRow:
    """One trace of a folder of traces."""

    name: str
    summary: TraceSummary


@dataclass(frozen=True)
class FolderPage:
    title: str
    path: str
    traces: list[TraceRow]
    skipped: list[tuple[str, str]]  # (file, why): JSON files that are not traces


def folder_page(source: Source) -> FolderPage:
    traces, skipped = [], []
    for name in source.names():
        try:
            summary = source.summary(name)
        except (NotATrace, OSError) as exc:  # OSError: removed while listing
            skipped.append((name, str(exc)))
            continue
        if summary is not None:
            traces.append(TraceRow(name, summary))
    return FolderPage(source.title, str(source.path), traces, skipped)


def _try_summary(source: Source, name: str | None) -> TraceSummary | None:
    if name is None:
        return None
    try:
        return source.summary(name)
    except (NotATrace, OSError):
        return None


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)
