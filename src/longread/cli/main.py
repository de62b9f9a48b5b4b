"""The ``longread`` command line."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..agents.registry import AGENTS, make_agent, make_config
from ..errors import UsageError
from ..llm.factory import BackendSettings, make_backend, make_tokenizer
from ..text import achunk_file
from ..trace import DISCARD, Run, TraceWriter
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
@click.option("-q", "--question", required=True, help="The question to answer.")
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    help="Write the full trace (one step record per model call) as JSON here.",
)
def ask(
    file: str,
    question: str,
    agent: str,
    as_json: bool,
    trace_path: str | None,
    record_tokens: bool,
    **options: Any,
) -> None:
    """Answer QUESTION about FILE ('-' reads standard input)."""
    if not question.strip():
        raise click.BadParameter("must not be empty", param_hint="'--question'")
    if file != "-" and not Path(file).is_file():
        what = "is a directory" if Path(file).is_dir() else "does not exist"
        raise click.BadParameter(f"{file} {what}", param_hint="'FILE'")
    if trace_path:
        check_output_file(trace_path, "--trace")
    settings = backend_settings(options)
    config = make_config(agent, **options)
    with checked_document(file) as (path, name):
        writer = _open_trace(trace_path) if trace_path else None
        try:
            job = _ask(path, name, question, agent, settings, config, record_tokens, writer)
            run = run_or_exit(job)
        except BaseException:
            if writer is not None:
                writer.discard()
            raise
    _print_run(run, as_json)  # first: an answer that was paid for is never lost
    if writer is not None:
        _finish_trace(writer, run)


async def _ask(
    file: str,
    name: str,
    question: str,
    agent_name: str,
    settings: BackendSettings,
    config: Any,
    record_tokens: bool,
    writer: TraceWriter | None,
) -> Run:
    backend = make_backend(settings)
    try:
        tokenizer = await make_tokenizer(backend, settings)
        with RunProgress() as progress:
            agent = make_agent(
                agent_name, backend, tokenizer, config, progress.update, record_tokens=record_tokens
            )
            plan = agent.plan(question)
            if plan.shrunk:
                click.echo(f"longread: note: {plan.note()}", err=True)
            chunks = await achunk_file(file, tokenizer, plan.chunk_tokens, name=name)
            progress.start(chunks=len(chunks))  # the agent reports the calls it expects
            try:
                # Steps stream to the trace (or nowhere): memory stays flat on long documents.
                return await agent.run(question, chunks, sink=writer or DISCARD)
            finally:
                chunks.close()
    finally:
        await backend.aclose()


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


def _print_run(run: Run, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(run.summary(), ensure_ascii=False))
        return
    for note in run.notes:
        click.echo(f"longread: note: {note}", err=True)
    click.echo(run.answer)


cli.add_command(eval_group, "eval")
cli.add_command(data_group, "data")
cli.add_command(trace_group, "trace")
cli.add_command(train_command, "train")
cli.add_command(serve_command, "serve")
cli.add_command(view_command, "view")


def main() -> None:
    """Console entry point."""
    cli.main(prog_name="longread")
