"""``longread data hotpotqa``, ``ruler``, ``chains`` and ``closed-book``: build evaluation
sets as JSONL."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from ..data.builders import build_hotpotqa, build_hotpotqa_to_length
from ..data.chains import CHAIN_WORDINGS, DISTRACTOR_ORDERS, ORDERS, build_chains
from ..data.hotpotqa import load_hotpotqa
from ..data.loaders import save_samples
from ..data.records import Sample
from ..data.ruler import NEEDLE_WORDINGS, RULER_TASKS, build_ruler
from ..text.tokenizer import Tokenizer
from .closed_book import closed_book
from .errors import LongreadGroup
from .options import hotpotqa_input_option, run_or_exit


@click.group(name="data", cls=LongreadGroup)
def data_group() -> None:
    """Build evaluation sets (RULER-HQA, RULER) as canonical JSONL files."""


def _int_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        numbers = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter("must be comma-separated whole numbers, e.g. 4096,8192") from None
    if not numbers or min(numbers) < 1:
        raise click.BadParameter("must list at least one positive number")
    return numbers


def tokenizer_option(func: Any) -> Any:
    return click.option(
        "--tokenizer",
        "tokenizer_path",
        help="tokenizer.json or model folder that counts lengths "
        "[default: the embedded SmolLM2 vocabulary].",
    )(func)


def choice_option(flag: str, choices: Sequence[str], default: str, help: str) -> Any:
    """A ``--flag`` taking one of ``choices``, its default shown in ``--help``."""
    return click.option(
        flag, type=click.Choice(choices), default=default, show_default=True, help=help
    )


def _tokenizer(path: str | None) -> Tokenizer:
    """Lengths are counted with a given HF tokenizer, else the embedded model's own vocabulary."""
    from ..text.tokenizers import HFTokenizer, LlamaCppTokenizer

    if path:
        return HFTokenizer.from_path(path)
    from ..llm.gguf import resolve_model_file

    return LlamaCppTokenizer.from_gguf(resolve_model_file(None, "original"))


def _read_ids(path: str | None) -> set[str]:
    if path is None:
        return set()
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip()}


def _write(samples: list[Sample], out: Path, name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.jsonl"
    save_samples(samples, path)
    click.echo(f"wrote {len(samples)} samples to {path}")


@data_group.command("hotpotqa")
@hotpotqa_input_option
@click.option(
    "--docs", callback=_int_list, help="Documents per question, e.g. 50,100,200 (RULER-HQA)."
)
@click.option(
    "--lengths",
    callback=_int_list,
    help="Token targets instead of document counts, e.g. 8192,16384.",
)
@click.option(
    "--n", type=click.IntRange(min=1), default=128, show_default=True, help="Questions per set."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--exclude",
    "exclude_path",
    type=click.Path(exists=True, dir_okay=False),
    help="A file of question ids, one per line, to leave out (e.g. the questions a model "
    "answers without the context, which RULER-HQA filters out); their paragraphs still pad "
    "the other questions.",
)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output folder.")
@tokenizer_option
def hotpotqa(input_path: str, docs: list[int] | None, lengths: list[int] | None, n: int,
             seed: int, exclude_path: str | None, out: str,
             tokenizer_path: str | None) -> None:  # fmt: skip
    """RULER-HQA sets: each question's paragraphs among other questions' paragraphs."""
    if bool(docs) == bool(lengths):
        raise click.UsageError("give exactly one of --docs and --lengths")

    async def build() -> None:
        records = load_hotpotqa(input_path)
        exclude = _read_ids(exclude_path)
        for count in docs or []:
            samples = build_hotpotqa(records, count, n, seed, exclude=exclude)
            _write(samples, Path(out), f"hotpotqa_docs{count}")
        if lengths:
            tokenizer = _tokenizer(tokenizer_path)
            for tokens in lengths:
                samples = build_hotpotqa_to_length(
                    records, tokens, tokenizer, n, seed, exclude=exclude
                )
                _write(samples, Path(out), f"hotpotqa_{tokens}")

    run_or_exit(build())


@data_group.command("ruler")
@click.option("--task", required=True, type=click.Choice(RULER_TASKS))
@click.option("--lengths", required=True, callback=_int_list, help="Token targets, e.g. 4096,8192.")
@click.option(
    "--n", type=click.IntRange(min=1), default=100, show_default=True, help="Samples per length."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--haystack",
    help="noise, noise-paragraphs, essay, needles, or a text file to use as the essay "
    "[default: the task's RULER haystack].",
)
@click.option(
    "--hotpotqa",
    "hotpotqa_path",
    type=click.Path(exists=True, dir_okay=False),
    help="HotpotQA JSON for the qa task.",
)
@choice_option(
    "--wording",
    NEEDLE_WORDINGS,
    "ruler",
    "How the niah tasks word the needle and question: RULER's, another wording (for "
    "training data that does not teach one sentence), mixed (one of ruler/plain/secret drawn "
    "per sample), varied (one of every training wording), composed (a new wording per "
    "sample, put together from parts) or a heldout-* wording (never drawn by the others: "
    "the unseen-wording evaluation).",
)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output folder.")
@tokenizer_option
def ruler(task: str, lengths: list[int], n: int, seed: int, haystack: str | None,
          hotpotqa_path: str | None, wording: str, out: str,
          tokenizer_path: str | None) -> None:  # fmt: skip
    """RULER synthetic tasks fitted to each token length (within 1%)."""

    if task == "qa" and hotpotqa_path is None:
        raise click.UsageError("task qa is built from HotpotQA questions: pass --hotpotqa FILE")

    async def build() -> None:
        records = load_hotpotqa(hotpotqa_path) if hotpotqa_path else None
        tokenizer = _tokenizer(tokenizer_path)
        for tokens in lengths:
            samples = build_ruler(task, tokens, n, seed, tokenizer, haystack, records, wording)
            _write(samples, Path(out), f"ruler_{task}_{tokens}")

    run_or_exit(build())


@data_group.command("chains")
@click.option("--lengths", required=True, callback=_int_list, help="Token targets, e.g. 4096,8192.")
@click.option(
    "--n", type=click.IntRange(min=1), default=100, show_default=True, help="Samples per length."
)
@click.option("--seed", type=int, default=0, show_default=True)
@choice_option(
    "--order",
    ORDERS,
    "reversed",
    "reversed: the fact before the bridge that makes it matter (the task); forward: the "
    "bridge first (the control a forward memory can do).",
)
@choice_option(
    "--wording",
    CHAIN_WORDINGS,
    "train",
    "Sentence templates: the training ones, or held-out ones no training set uses.",
)
@click.option(
    "--distractors",
    type=click.IntRange(0, 8),
    default=3,
    show_default=True,
    help="Other chains (items, places, codes) in each document.",
)
@choice_option(
    "--distractor-order",
    DISTRACTOR_ORDERS,
    "same",
    "same: every distractor chain in the sample's order; mixed: each drawn (the sets of "
    "stops 59-61, where a reversed sample's first code is the answer about half the time).",
)
@click.option(
    "--haystack",
    help="noise, noise-paragraphs, essay, or a text file to use as the essay [default: essay].",
)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output folder.")
@tokenizer_option
def chains(lengths: list[int], n: int, seed: int, order: str, wording: str, distractors: int,
           distractor_order: str, haystack: str | None, out: str,
           tokenizer_path: str | None) -> None:  # fmt: skip
    """Two-hop chains whose fact comes before the bridge that makes it matter: the question
    names an item, the bridge sends it to a place, the fact gives the place's code."""

    async def build() -> None:
        tokenizer = _tokenizer(tokenizer_path)
        for tokens in lengths:
            samples = build_chains(
                tokens, n, seed, tokenizer, haystack, order, wording, distractors,
                distractor_order,
            )  # fmt: skip
            _write(samples, Path(out), f"chains_{order}_{tokens}")

    run_or_exit(build())


data_group.add_command(closed_book)
