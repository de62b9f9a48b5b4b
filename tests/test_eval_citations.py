"""Evaluation judges citations: precision against the needle or the supporting sentences, and
coverage of the correct answers, in the store and in the report."""

from __future__ import annotations

from dataclasses import replace

from longread.citations import Citation
from longread.eval.citation_score import citation_score
from longread.eval.report import citation_cells, load_runs, markdown_report
from longread.eval.runner import run_eval

from .eval_helpers import AnswerBackend, factory, open_store, question, sample

NEEDLE = "One of the special magic numbers for item a is: 4331324."
FILLER = "The grass grew tall in the meadow. "


def ruler_sample(sample_id: str):
    base = sample(sample_id, ["4331324"], kind="ruler", dataset="ruler", task="niah_single_2")
    return replace(base, context=f"{FILLER * 5}{NEEDLE} {FILLER * 5}")


def test_a_ruler_citation_is_precise_when_it_holds_the_needle():
    s = ruler_sample("a")
    at = s.context.index(NEEDLE)
    on = Citation(NEEDLE, at, at + len(NEEDLE), 0)
    off = Citation("The grass grew tall in the meadow.", 0, 34, 0)
    assert citation_score([on, off], True, s) == {
        "cited": 2, "cited_precise": 1, "supported": True,
    }  # fmt: skip


def test_a_hotpotqa_citation_is_precise_when_it_overlaps_a_supporting_sentence():
    fact = "Hot Pixel is a puzzle video game for the Sony PlayStation Portable."
    s = replace(sample("h", ["PSP"], evidence=[fact]), context=f"Intro text. {fact} More text.")
    at = s.context.index(fact)
    inside = Citation("puzzle video game", at + 12, at + 29, 0)
    outside = Citation("Intro text.", 0, 11, 0)
    assert citation_score([inside, outside], True, s)["cited_precise"] == 1


def test_a_set_without_evidence_counts_citations_without_judging_them():
    assert citation_score([Citation("x", 0, 1, 0)], True, sample("z", ["x"])) == {
        "cited": 1, "cited_precise": None, "supported": True,
    }  # fmt: skip


async def test_eval_records_citation_scores_and_the_report_shows_precision_and_coverage(tmp_path):
    samples = [ruler_sample("a"), ruler_sample("b")]
    backend = AnswerBackend({question("a"): "\\boxed{4331324}", question("b"): "\\boxed{9999999}"})
    with open_store(tmp_path) as store:
        await run_eval(samples, factory(backend), store, concurrency=1, progress=False)
        rows = {r.sample_id: r for r in store.results()}

    assert rows["a"].score["cited"] == 1 and rows["a"].score["cited_precise"] == 1
    assert rows["b"].score["cited"] == 0 and rows["b"].score["supported"] is False
    report = markdown_report(load_runs([tmp_path]))
    assert "| 0.5 | 100% (1/1) | 100% (1/1) | 100% (1/1) | 1 |" in report


def test_precision_is_given_over_every_answer_and_over_the_correct_ones():
    # A wrong answer read from the wrong sentence cites that sentence: honest, but not the needle.
    right = {"cited": 1, "cited_precise": 1, "supported": True, "sub_em": 1.0}
    wrong = {"cited": 1, "cited_precise": 0, "supported": True, "sub_em": 0.0}
    assert citation_cells([right, wrong]) == ["1.0", "50% (1/2)", "100% (1/1)", "100% (1/1)", "0"]
