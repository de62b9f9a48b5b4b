"""``longread data closed-book``: list the questions a model answers without any context."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from ..agents.prompts import load_prompt
from ..data.hotpotqa import load_hotpotqa, parse_hotpot_records
from ..errors import UsageError
from ..eval.closed_book import Question, ask_closed_book
from ..llm.base import SamplingParams
from .options import backend_options, backend_settings, hotpotqa_input_option, run_or_exit


@click.command("closed-book")
@hotpotqa_input_option
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    help="Write the ids answered correctly here, one per line (for data hotpotqa --exclude);"
    " every reply goes to OUT.log.",
)
@click.option("--n", type=click.IntRange(min=1), help="Only the first N questions [all].")
@click.option("--answer-tokens", type=click.IntRange(min=1), default=128, show_default=True,
              help="New tokens for each answer.")  # fmt: skip
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True,
              help="Questions in flight at once.")  # fmt: skip
@click.option("--progress/--no-progress", default=True, show_default=True)
@backend_options
def closed_book(input_path: str, out: str, n: int | None, answer_tokens: int, concurrency: int,
                progress: bool, **options: Any) -> None:  # fmt: skip
    """Ask each question with no document and list those the model gets right.

    RULER-HQA leaves such questions out, so that accuracy measures reading, not recall: pass
    the list to ``longread data hotpotqa --exclude``. Greedy decoding. An answer counts when
    it equals the gold (SQuAD-normalised) or holds it as whole words; yes/no must be exact.
    Every reply goes to OUT.log as it arrives, so an interrupted pass resumes when rerun.
    """
    settings = dataclasses.replace(backend_settings(options), max_concurrency=concurrency)
    run_or_exit(_closed_book(Path(input_path), Path(out), n, answer_tokens, settings, progress))


async def _closed_book(
    input_path: Path, out: Path, n: int | None, answer_tokens: int, settings: Any, progress: bool
) -> None:
    from ..llm.factory import make_backend

    parsed = parse_hotpot_records(load_hotpotqa(str(input_path)))[:n]
    questions = [Question(q.id, q.question, (q.answer,)) for q in parsed]
    if out.is_dir():
        raise UsageError(f"{out} is a folder; --out takes a file name")
    # Not .jsonl: a log beside the data must not be read as a data file by eval run --data.
    log = out.with_name(out.name + ".log")
    header = {
        "backend": settings.backend,
        "base_url": settings.base_url,
        "model": settings.model,
        "gguf": settings.gguf,
        "quant": settings.quant,
        "extra_body": settings.extra_body,
        "answer_tokens": answer_tokens,
        "prompt": load_prompt("closed_book").template,
    }
    backend = make_backend(settings)
    try:
        answers = await ask_closed_book(
            questions,
            backend,
            SamplingParams(max_tokens=answer_tokens),
            log,
            header,
            concurrency=settings.max_concurrency,
            progress=progress,
        )
    finally:
        await backend.aclose()
    correct = [a.id for a in answers if a.known]
    out.write_text("".join(f"{i}\n" for i in correct), encoding="utf-8")
    click.echo(
        f"{len(correct)} of {len(answers)} questions answered without the context; "
        f"ids in {out}, every reply in {log}"
    )
