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
    check_output_file,
    record_tokens_option,
    run_or_exit,
    with_trained_settings,
    without_idle_calls,
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
                     help="Samples in flight at once (also the most requests sent at once); "
                          "with --section-first, samples that share a document are one unit, "
                          "read together. The embedded model works on one call at a time (N "
                          "with --parallel N): no more samples than that are in flight."),
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
    settings = dataclasses.replace(backend_settings(options, agent), max_concurrency=concurrency)
    config = make_config(agent, **with_trained_settings(agent, settings, options))
    settings = without_idle_calls(settings, config)
    given = click.get_current_context().get_parameter_source("concurrency")
    explicit = given is click.core.ParameterSource.COMMANDLINE
    job = _eval_run(
        data, agent, config, settings, out, (concurrency, explicit), limit, progress, record_tokens
    )
    summary = run_or_exit(job)
    _print_summary(summary, out)
    if summary.failed:
        click.get_current_context().exit(_report_failures(summary))


async def _eval_run(
    data: str,
    agent: str,
    config: Any,
    settings: BackendSettings,
    out: str,
    requested: tuple[int, bool],
    limit: int | None,
    progress: bool,
    record_tokens: bool,
) -> Summary:
    from ..eval.runner import check_samples, run_eval
    from ..eval.store import RunStore, run_config
    from ..llm.factory import close_all, make_backend, make_call_backends, make_tokenizer

    files = [Path(data)]
    if files[0].is_dir():  # every data file in the tree (RULER's <length>/data/<task>/ layout)
        files = await asyncio.to_thread(data_files, data)
        click.echo(f"reading {len(files)} data file(s) from {data}", err=True)
    loaded = await asyncio.to_thread(load_files, files)
    samples = loaded[:limit]
    if not samples:
        raise UsageError(f"no samples in {data}")
    check_samples(samples)  # before any server is asked anything or a model loaded
    # The data is identified by the content of every sample, not only the --limit ones, so a
    # resume with another --limit (or from a moved folder) matches the run's saved data_hash.
    run = await asyncio.to_thread(
        run_config, agent, dataclasses.asdict(config), settings, data, loaded, record_tokens
    )
    with RunStore(out, writer=True) as store:
        store.save_config(run)
        _note_foreign_results(store, samples, out)
        backend = make_backend(settings)
        call_backends = make_call_backends(settings)  # --decision-adapter's
        concurrency, note = samples_at_once(backend, *requested)
        if note:
            click.echo(f"longread: note: {note}", err=True)
        try:
            tokenizer = await make_tokenizer(backend, settings)  # asks a server for its model
            store.fill_backend(getattr(backend, "model", None), backend.context_window)
            machine = getattr(backend, "machine", None)  # the embedded model's kernels
            if machine:
                store.session_fields["machine"] = machine
            summary = await run_eval(
                samples,
                lambda report: make_agent(
                    agent,
                    backend,
                    tokenizer,
                    config,
                    report,
                    record_tokens=record_tokens,
                    call_backends=call_backends,
                ),
                store,
                concurrency,
                progress,
            )
        finally:
            await backend.aclose()
            await close_all(call_backends.values())
    return summary


def samples_at_once(backend: Any, requested: int, explicit: bool) -> tuple[int, str | None]:
    """How many samples to keep in flight on ``backend``, and a note when fewer than an
    explicit ``--concurrency``. A backend that works on a few calls at a time (the embedded
    model: one, or ``--parallel N``) gets no more samples than that: more would only take
    turns, each sample's seconds would count the others' calls (the report's s/sample, 4x
    at the default 4), and a kept prompt prefix would be lost between turns."""
    at_once = getattr(backend, "calls_at_once", None)
    if at_once is None or requested <= at_once:
        return requested, None
    note = None
    if explicit:
        note = (
            f"the embedded model works on {at_once} call(s) at a time: {at_once} sample(s) "
            f"in flight, not {requested} (give --parallel N to batch calls)"
        )
    return at_once, note


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


# Distinct error messages listed after a run with failed samples; the rest are counted.
_SHOWN_FAILURES = 5


def _report_failures(summary: Summary) -> int:
    """Say how many samples failed and why, grouped by message, permanent (a configuration
    error: a rerun fails the same way) told from transient (server trouble: a rerun may pass).
    Returns the exit code: 2 when any failure is permanent, else 3 (as ``ask`` exits)."""
    permanent = sum(f["samples"] for f in summary.failures if not f["transient"])
    transient = sum(f["samples"] for f in summary.failures if f["transient"])
    kinds = []
    if permanent:
        kinds.append(
            f"{permanent} of them on a configuration error (permanent: a rerun fails the same "
            "way until it is fixed)"
        )
    if transient:
        kinds.append(
            f"{transient} of them on server trouble (transient: rerun the same command to "
            "retry the failed samples)"
        )
    head = f"longread: error: {summary.failed} of {summary.total} samples failed"
    click.echo(", ".join([head, *kinds]), err=True)
    for failure in summary.failures[:_SHOWN_FAILURES]:
        kind = "transient" if failure["transient"] else "permanent"
        click.echo(f"  {failure['samples']} x {kind}: {failure['error']}", err=True)
    hidden = summary.failures[_SHOWN_FAILURES:]
    if hidden:
        count = sum(f["samples"] for f in hidden)
        click.echo(f"  {count} more with {len(hidden)} other messages (summary.json)", err=True)
    return 2 if permanent else 3


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
    outputs = {"--markdown": markdown_path, "--plot": plot_path, "--json": json_path}
    for flag, path in outputs.items():
        if path:  # checked before the runs are read; a new folder for the outputs is made
            _prepare_output(path, flag)
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


@eval_group.command("compare")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option(
    "--metric",
    type=click.Choice(["headline", "strict", "sub_em", "em"]),
    default="headline",
    show_default=True,
    help="What counts as answered: full marks on it (headline: RULER's match_all, else "
    "sub-EM, as `eval run` prints; strict needs a \\boxed{} answer).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    help="Write every pair, sample by sample, as JSON lines here.",
)
def compare(run_dirs: tuple[str, ...], metric: str, json_path: str | None) -> None:
    """Pair runs of the same data sample by sample: RUN_A RUN_B [RUN_A2 RUN_B2 ...].

    For each pair: how many each got right, the samples only one got, McNemar's exact test on
    those, and seconds per sample (and share read) both ways; a pooled row for several pairs.
    Runs of different data are refused."""
    from ..eval.compare import compare_table, pair_runs, pairing_record

    if len(run_dirs) % 2:
        raise UsageError("give the run folders in pairs: RUN_A RUN_B [RUN_A2 RUN_B2 ...]")
    if json_path:
        _prepare_output(json_path, "--json")
    pairs = zip(run_dirs[::2], run_dirs[1::2], strict=True)
    pairings = [pair_runs(a, b, metric) for a, b in pairs]
    click.echo("\n".join(compare_table(pairings)))
    if json_path:
        records = (json.dumps(pairing_record(p)) + "\n" for p in pairings)
        Path(json_path).write_text("".join(records))


def _prepare_output(path: str, flag: str) -> None:
    """Make the folder of an output file, or say in one line why it cannot be made or written."""
    folder = Path(path).parent
    blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise UsageError(f"{flag} {path}: {blocker} is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot create the folder {folder}: {exc.strerror or exc}"
        ) from None
    check_output_file(path, flag)


eval_group.add_command(_run_command(), "run")
