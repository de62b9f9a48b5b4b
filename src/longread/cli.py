"""The ``longread`` command line."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import click

from . import __version__
from .agents.registry import AGENTS, make_agent, make_config
from .errors import LongreadError
from .llm.factory import BackendSettings, make_backend, make_tokenizer
from .progress import RunProgress
from .text import achunk_file
from .trace import Run


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


def _parse_json_object(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object")
    return parsed


def backend_options(func: Any) -> Any:
    """Flags shared by every command that talks to a model."""
    options = [
        click.option(
            "--backend",
            type=click.Choice(["auto", "llamacpp", "openai"]),
            default="auto",
            show_default=True,
            help="auto: an OpenAI-compatible server when --base-url or OPENAI_BASE_URL "
            "is set, else the embedded model.",
        ),
        click.option(
            "--base-url",
            help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 "
            "(default: $OPENAI_BASE_URL).",
        ),
        click.option("--model", help="Model name on the server (default: the server's first)."),
        click.option("--api-key", help="API key (default: $OPENAI_API_KEY)."),
        click.option(
            "--context-window",
            type=click.IntRange(min=256),
            help="Server's context window in tokens, when it does not report one.",
        ),
        click.option(
            "--tokenizer",
            "tokenizer_path",
            help="tokenizer.json or model folder for exact token counts on a server.",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=1),
            default=600.0,
            show_default=True,
            help="Seconds to wait for one server reply.",
        ),
        click.option(
            "--extra-body",
            callback=_parse_json_object,
            help="Extra JSON fields for every chat request, e.g. '{\"top_k\": 20}'.",
        ),
        click.option(
            "--retries",
            type=click.IntRange(min=0),
            default=5,
            show_default=True,
            help="Retries (exponential backoff) on 429, 5xx, timeouts, lost connections.",
        ),
        click.option(
            "--gguf",
            type=click.Path(dir_okay=False),
            help="GGUF model for the embedded backend (default: bundled SmolLM2-135M).",
        ),
        click.option(
            "--quant",
            type=click.Choice(["q8_0", "q4_0", "f16", "original"]),
            help="Convert the GGUF once to this type for speed (bundled model: q8_0); "
            "'original' loads it as shipped.",
        ),
        click.option(
            "--n-ctx",
            type=click.IntRange(min=256),
            help="Embedded model's context window [default: 8192].",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def agent_options(func: Any) -> Any:
    """Reading settings. Unset flags keep the chosen agent's own (paper) defaults; a flag the
    agent does not use is refused."""
    int_option = click.IntRange(min=1)
    options = [
        click.option("--chunk-tokens", type=int_option,
                     help="Largest chunk per call, shrunk to fit the window [5000]."),
        click.option("--memory-tokens", type=int_option,
                     help="Memory cap, new tokens per rewrite [memagent/memreread: 1024; "
                          "rememr1: 2048]."),
        click.option("--final-tokens", type=int_option,
                     help="New tokens for the final answer [1024; rememr1: 2048]."),
        click.option("--max-reread", type=click.IntRange(min=0),
                     help="memreread: rereads at most [2]."),
        click.option("--decide-tokens", type=int_option,
                     help="memreread: new tokens for the stop/sub-question decision [256]."),
        click.option("--recall-top-k", type=int_option,
                     help="rememr1: earlier memories brought back per recall [1]."),
        click.option("--recall-threshold", type=click.FloatRange(0, 1),
                     help="rememr1: least TF-IDF cosine for a recall to count [0.1]."),
        click.option("--rag-k", type=int_option, help="rag: chunks retrieved [4]."),
        click.option("--rag-chunk-tokens", type=int_option, help="rag: chunk size [512]."),
        click.option("--temperature", type=click.FloatRange(0, 2),
                     help="Sampling temperature [0: greedy; the papers evaluate at 0.7]."),
        click.option("--top-p", type=click.FloatRange(0, 1, min_open=True), help="[1.0]"),
        click.option("--seed", type=int, help="Sampling seed, for reproducible sampled runs."),
        click.option("--prompt-dir", type=click.Path(file_okay=False, exists=True),
                     help="Folder with your own prompt files (same names as the bundled ones)."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    help="Write the full trace (every conversation) as JSON here.",
)
def ask(
    file: str, question: str, agent: str, as_json: bool, trace_path: str | None, **options: Any
) -> None:
    """Answer QUESTION about FILE ('-' reads standard input)."""
    if not question.strip():
        raise click.BadParameter("must not be empty", param_hint="'--question'")
    if file != "-" and not Path(file).is_file():
        what = "is a directory" if Path(file).is_dir() else "does not exist"
        raise click.BadParameter(f"{file} {what}", param_hint="'FILE'")
    settings = _backend_settings(options)
    try:
        config = make_config(agent, **options)
    except LongreadError as exc:
        raise click.UsageError(str(exc)) from None
    run = _run_or_exit(_ask(file, question, agent, settings, config))
    if trace_path:
        run.save(trace_path)
    _print_run(run, as_json)


def _backend_settings(options: dict[str, Any]) -> BackendSettings:
    """Take the backend flags out of ``options``."""
    return BackendSettings(
        backend=options.pop("backend"),
        base_url=options.pop("base_url"),
        model=options.pop("model"),
        api_key=options.pop("api_key"),
        context_window=options.pop("context_window"),
        tokenizer=options.pop("tokenizer_path"),
        timeout=options.pop("timeout"),
        max_retries=options.pop("retries"),
        extra_body=options.pop("extra_body"),
        gguf=options.pop("gguf"),
        quant=options.pop("quant"),
        n_ctx=options.pop("n_ctx"),
    )


async def _ask(
    file: str, question: str, agent_name: str, settings: BackendSettings, config: Any
) -> Run:
    backend = make_backend(settings)
    try:
        tokenizer = await make_tokenizer(backend, settings)
        with RunProgress() as progress:
            agent = make_agent(agent_name, backend, tokenizer, config, progress.update)
            plan = agent.plan(question)
            if plan.shrunk:
                click.echo(f"longread: note: {plan.note()}", err=True)
            chunks = await achunk_file(file, tokenizer, plan.chunk_tokens)
            progress.start(chunks=len(chunks))  # the agent reports the calls it expects
            return await agent.run(question, chunks)
    finally:
        await backend.aclose()


def _run_or_exit(coroutine: Any) -> Run:
    """Run the coroutine; user-facing errors become one line on stderr and an exit code."""
    try:
        return asyncio.run(coroutine)
    except LongreadError as exc:
        click.echo(f"longread: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("longread: interrupted", err=True)
        sys.exit(130)


def _print_run(run: Run, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(run.summary(), ensure_ascii=False))
        return
    for note in run.notes:
        click.echo(f"longread: note: {note}", err=True)
    click.echo(run.answer)


def main() -> None:
    """Console entry point."""
    cli.main(prog_name="longread")


if __name__ == "__main__":
    main()
