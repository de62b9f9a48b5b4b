"""The ``longread`` command line."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..agents.base import AgentBase
from ..agents.multi import MultiQuestionAgent
from ..agents.registry import AGENTS, make_agent, make_config
from ..citations import locate, sources_line
from ..errors import UsageError
from ..llm.factory import (
    BackendSettings,
    close_all,
    make_backend,
    make_call_backends,
    make_tokenizer,
)
from ..text import achunk_file
from ..trace import DISCARD, Run, StepSink, TraceWriter
from .data import data_group
from .document import checked_document
from .errors import LongreadGroup
from .eval import eval_group
from .options import (
    agent_options,
    backend_options,
    backend_settings,
    check_output_file,
    record_tokens_option,
    run_or_exit,
    with_trained_settings,
    without_idle_calls,
)
from .progress import RunProgress
from .serve import serve_command
from .trace import trace_group
from .train import train_command
from .view import view_command


@click.group(
    cls=LongreadGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "--version", prog_name="longread")
@click.option("-v", "--verbose", is_flag=True, help="Log what longread does (model loading, ...).")
def cli(verbose: bool) -> None:
    """Answer questions about documents far longer than a model's context window."""
    _log_to_stderr(logging.INFO if verbose else logging.WARNING)


class _LowerLevelFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"longread: {record.levelname.lower()}: {record.getMessage()}"


def _log_to_stderr(level: int) -> None:
    """Warnings (replaced bytes, estimated token counts) go to stderr as one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LowerLevelFormatter())
    logger = logging.getLogger("longread")
    logger.handlers = [handler]  # replace, so repeated in-process invocations don't stack
    logger.setLevel(level)
    logger.propagate = False


@cli.command()
@click.argument("file")
@click.option(
    "-q",
    "--question",
    "questions",
    required=True,
    multiple=True,
    help="The question to answer; repeat for several questions about FILE (memagent reads "
    "it once for all of them).",
)
@click.option(
    "--agent",
    type=click.Choice(list(AGENTS)),
    default="memagent",
    show_default=True,
    help="How to read: " + "; ".join(f"{name}: {spec.summary}" for name, spec in AGENTS.items()),
)
@backend_options
@agent_options
@record_tokens_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object (one line per question) instead of text.",
)
@click.option(
    "--no-sources",
    "no_sources",
    is_flag=True,
    help="Do not print the 'Sources: p. 12, ...' line under each answer (the spans of the "
    "document that hold it; --json always has them as citations).",
)
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    help="Write the full trace (one step record per model call) as JSON here; with several "
    "questions, one file per question (trace-q1.json, trace-q2.json, ...).",
)
@click.option(
    "--max-document-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=512.0,
    show_default=True,
    help="Refuse a FILE larger than this many MB (1 MB = 1,000,000 bytes), before reading it.",
)
def ask(
    file: str,
    questions: tuple[str, ...],
    agent: str,
    as_json: bool,
    no_sources: bool,
    trace_path: str | None,
    max_document_mb: float,
    record_tokens: bool,
    **options: Any,
) -> None:
    """Answer each QUESTION about FILE ('-' reads standard input)."""
    empty = [i for i, question in enumerate(questions, 1) if not question.strip()]
    if empty:
        which = f" (question {empty[0]} of {len(questions)})" if len(questions) > 1 else ""
        raise click.BadParameter(f"must not be empty{which}", param_hint="'--question'")
    if file != "-" and not Path(file).is_file():
        what = "is a directory" if Path(file).is_dir() else "does not exist"
        raise click.BadParameter(f"{file} {what}", param_hint="'FILE'")
    traces = _trace_paths(trace_path, len(questions)) if trace_path else []
    for trace in traces:
        check_output_file(trace, "--trace")
    settings = backend_settings(options, agent)
    config = make_config(agent, **with_trained_settings(agent, settings, options))
    settings = without_idle_calls(settings, config)
    with checked_document(file, max_mb=max_document_mb) as (path, name):
        writers: list[TraceWriter] = []
        try:
            writers.extend(_open_trace(trace) for trace in traces)
            job = _ask(path, name, questions, agent, settings, config, record_tokens, writers)
            runs = run_or_exit(job)
        except BaseException:
            for writer in writers:
                writer.discard()
            raise
    _print_runs(runs, as_json, sources=not no_sources)  # first: a paid answer is never lost
    for writer, run in zip(writers, runs, strict=False):
        _finish_trace(writer, run)


def _trace_paths(path: str, questions: int) -> list[str]:
    """``--trace`` PATH for one question; PATH's name with -q1, -q2, ... for several."""
    if questions == 1:
        return [path]
    target = Path(path)
    return [
        str(target.with_name(f"{target.stem}-q{i}{target.suffix}")) for i in range(1, questions + 1)
    ]


async def _ask(
    file: str,
    name: str,
    questions: tuple[str, ...],
    agent_name: str,
    settings: BackendSettings,
    config: Any,
    record_tokens: bool,
    writers: list[TraceWriter],
) -> list[Run]:
    """Every question's run, in order: read together in one pass by an agent that can
    (memagent), else one question after another."""
    together = issubclass(AGENTS[agent_name].agent, MultiQuestionAgent)
    batches = [list(questions)] if together else [[q] for q in questions]
    sinks: list[StepSink] = [*writers] if writers else [DISCARD] * len(questions)
    backend = make_backend(settings)
    call_backends = make_call_backends(settings)  # --decision-adapter's
    try:
        tokenizer = await make_tokenizer(backend, settings)
        runs: list[Run] = []
        for batch in batches:
            with RunProgress() as progress:
                agent = make_agent(
                    agent_name,
                    backend,
                    tokenizer,
                    config,
                    progress.update,
                    record_tokens=record_tokens,
                    call_backends=call_backends,
                )
                batch_sinks = sinks[len(runs) : len(runs) + len(batch)]
                runs += await _read_file(agent, progress, file, name, batch, batch_sinks)
        return runs
    finally:
        await backend.aclose()
        await close_all(call_backends.values())


async def _read_file(
    agent: AgentBase[Any],
    progress: RunProgress,
    file: str,
    name: str,
    questions: list[str],
    sinks: list[StepSink],
) -> list[Run]:
    """Cut the file once for ``questions`` and run them (several only for a
    MultiQuestionAgent). Steps stream to the trace (or nowhere): memory stays flat."""
    multi = agent if isinstance(agent, MultiQuestionAgent) and len(questions) > 1 else None
    plan = multi.plan_many(questions) if multi else agent.plan(questions[0])
    if plan.shrunk:
        click.echo(f"longread: note: {plan.note()}", err=True)
    chunks = await achunk_file(file, agent.tokenizer, plan.chunk_tokens, name=name)
    progress.start(chunks=len(chunks))  # the agent reports the calls it expects
    try:
        if multi:
            runs = await multi.run_many(questions, chunks, sinks=sinks)
        else:
            runs = [await agent.run(questions[0], chunks, sink=sinks[0])]
    finally:
        chunks.close()
    positions = getattr(chunks, "positions", None)  # pages and sections, where the format has them
    for run in runs:
        run.citations = locate(run.citations, positions)
    return runs


def _open_trace(path: str) -> TraceWriter:
    try:
        return TraceWriter(path)
    except OSError as exc:
        raise UsageError(f"--trace {path} cannot be written: {exc.strerror or exc}") from None


def _finish_trace(writer: TraceWriter, run: Run) -> None:
    try:
        writer.finish(run)
    except OSError as exc:
        raise UsageError(
            f"could not write the trace to {writer.path}: {exc.strerror or exc} (the answer "
            "above is complete)"
        ) from None


def _print_runs(runs: list[Run], as_json: bool, *, sources: bool = True) -> None:
    """The answer (one question: the answer alone, as ever), or each answer labelled with its
    question: ``Q1: ...`` then ``A1: ...``; each followed by its ``Sources:`` line unless
    ``sources`` is off; with ``--json`` one object per line (citations included)."""
    if as_json:
        for run in runs:
            click.echo(json.dumps(run.summary(), ensure_ascii=False))
        return
    if len(runs) == 1:
        for note in runs[0].notes:
            click.echo(f"longread: note: {note}", err=True)
        click.echo(runs[0].answer)
        _print_sources(runs[0], sources)
        return
    for number, run in enumerate(runs, 1):
        for note in run.notes:
            click.echo(f"longread: note: Q{number}: {note}", err=True)
        blank = "\n" if number > 1 else ""
        click.echo(f"{blank}Q{number}: {run.question}\nA{number}: {run.answer}")
        _print_sources(run, sources)


def _print_sources(run: Run, sources: bool) -> None:
    line = sources_line(run.citations, run.supported) if sources else None
    if line is not None:
        click.echo(line)


cli.add_command(eval_group, "eval")
cli.add_command(data_group, "data")
cli.add_command(trace_group, "trace")
cli.add_command(train_command, "train")
cli.add_command(serve_command, "serve")
cli.add_command(view_command, "view")


def main() -> None:
    """Console entry point."""
    cli.main(prog_name="longread")
