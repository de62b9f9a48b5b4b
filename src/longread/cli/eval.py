"""``longread eval run`` and ``longread eval report``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import click

from ..agents.registry import AGENTS, make_agent, make_config
from ..data.loaders import data_files, load_files
from ..data.records import Sample
from ..errors import UsageError
from ..eval.report import load_runs, markdown_report, plot_accuracy, run_time_report, run_times
from ..eval.runner import Summary
from ..llm.factory import BackendSettings
from .errors import LongreadGroup
from .options import (
    agent_options,
    backend_options,
    backend_settings,
    record_tokens_option,
    run_or_exit,
)


@click.group(name="eval", cls=LongreadGroup)
def eval_group() -> None:
    """Evaluate agents on datasets: resumable runs and their reports."""


def _run_command() -> click.Command:
    """``run`` with the shared backend and agent flags of ``longread ask``."""
    options = [
        click.option("--data", required=True, type=click.Path(exists=True),
                     help="A data file (.jsonl, .json, .parquet; any format the loaders read), or "
                     "a folder: every data file in it and its subfolders."),
        click.option("--agent", type=click.Choice(list(AGENTS)), required=True,
                     help="; ".join(f"{n}: {spec.summary}" for n, spec in AGENTS.items())),
        click.option("--out", required=True, type=click.Path(file_okay=False),
                     help="Run folder; the same command with the same folder resumes the run "
                          "(finished samples are skipped, failed ones retried)."),
        click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True,
                     help="Samples in flight at once (also the most requests sent at once)."),
        click.option("--limit", type=click.IntRange(min=1), help="Only the first N samples."),
        click.option("--progress/--no-progress", default=True, show_default=True,
                     help="Progress bar on stderr."),
    ]  # fmt: skip
    command = record_tokens_option(backend_options(agent_options(run)))
    for option in reversed(options):
        command = option(command)
    return click.command("run")(command)


def run(
    data: str,
    agent: str,
    out: str,
    concurrency: int,
    limit: int | None,
    progress: bool,
    record_tokens: bool,
    **options: Any,
) -> None:
    """Run AGENT over every sample of DATA, recording each in the run folder --out.

    Interrupted runs resume: the same command skips finished samples and retries failed ones.
    """
    settings = dataclasses.replace(backend_settings(options), max_concurrency=concurrency)
    config = make_config(agent, **options)
    job = _eval_run(data, agent, config, settings, out, concurrency, limit, progress, record_tokens)
    run_or_exit(job)


async def _eval_run(
    data: str,
    agent: str,
    config: Any,
    settings: BackendSettings,
    out: str,
    concurrency: int,
    limit: int | None,
    progress: bool,
    record_tokens: bool,
) -> None:
    from ..eval.runner import run_eval
    from ..eval.store import RunStore, run_config
    from ..llm.factory import make_backend, make_tokenizer

    files = [Path(data)]
    if files[0].is_dir():  # every data file in the tree (RULER's <length>/data/<task>/ layout)
        files = await asyncio.to_thread(data_files, data)
        click.echo(f"reading {len(files)} data file(s) from {data}", err=True)
    loaded = await asyncio.to_thread(load_files, files)
    samples = loaded[:limit]
    if not samples:
        raise UsageError(f"no samples in {data}")
    # The data is identified by the content of every sample, not only the --limit ones, so a
    # resume with another --limit (or from a moved folder) matches the run's saved data_hash.
    run = await asyncio.to_thread(
        run_config, agent, dataclasses.asdict(config), settings, data, loaded, record_tokens
    )
    with RunStore(out, writer=True) as store:
        store.save_config(run)
        _note_foreign_results(store, samples, out)
        backend = make_backend(settings)
        try:
            tokenizer = await make_tokenizer(backend, settings)  # asks a server for its model
            store.fill_backend(getattr(backend, "model", None), backend.context_window)
            summary = await run_eval(
                samples,
                lambda report: make_agent(
                    agent, backend, tokenizer, config, report, record_tokens=record_tokens
                ),
                store,
                concurrency,
                progress,
            )
        finally:
            await backend.aclose()
    _print_summary(summary, out)


def _note_foreign_results(store: Any, samples: list[Sample], out: str) -> None:
    """Say so when a folder's results belong to none of the samples (ids changed since)."""
    stored = store.done_ids() | store.failed_ids()
    if stored and not stored & {s.id for s in samples}:
        click.echo(
            f"longread: note: none of the {len(stored)} results in {out} is for a sample of "
            "this data (were its ids changed?); they are kept, but every sample runs again",
            err=True,
        )


def _print_summary(summary: Summary, out: str) -> None:
    click.echo(
        f"{summary.done}/{summary.total} done, {summary.failed} failed, "
        f"accuracy {100 * summary.accuracy:.1f}% (lenient sub-EM / RULER match_all)"
    )
    click.echo(
        f"wall {summary.wall_seconds:.1f}s, backend busy {summary.backend_busy_seconds:.1f}s, "
        f"overhead {summary.overhead_seconds:.1f}s; details in {Path(out) / 'summary.json'}"
    )
    if summary.failed:
        click.echo(
            f"longread: note: {summary.failed} sample(s) failed; rerun the same command to "
            "retry them",
            err=True,
        )


@eval_group.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False),
    help="Write the Markdown tables here (default: print them).",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    help="Write an accuracy-vs-context-length plot here (needs matplotlib).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    help="Write every per-sample row as JSON lines here.",
)
def report(
    run_dirs: tuple[str, ...],
    markdown_path: str | None,
    plot_path: str | None,
    json_path: str | None,
) -> None:
    """Tables (and a plot) of one or more run folders RUN_DIRS: accuracy and cost per
    dataset x context length x agent, then where each run's time went."""
    for path in (markdown_path, plot_path, json_path):
        if path:  # a new folder for the outputs is made, not a traceback
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    rows = load_runs(run_dirs)
    text = markdown_report(rows) + "\n" + run_time_report(run_times(run_dirs))
    if plot_path:
        plot_accuracy(rows, plot_path)
    if json_path:
        lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        Path(json_path).write_text("".join(lines))
    if markdown_path:
        Path(markdown_path).write_text(text)
    else:
        click.echo(text, nl=False)


eval_group.add_command(_run_command(), "run")
