"""run_eval in process: scoring, traces, failures kept in the denominator, retries, limits."""

from __future__ import annotations

import io
import json

import pytest

from longread.agents.registry import make_agent
from longread.errors import BackendError, BudgetError, UsageError
from longread.eval import runner
from longread.eval.runner import (
    check_samples,
    context_length,
    dataset_label,
    run_eval,
    trace_name,
)
from longread.eval.store import FAILED
from longread.trace import Run

from .eval_helpers import AnswerBackend, factory, open_store, question, sample
from .scripted import ScriptedBackend, WordTokenizer


async def test_every_sample_is_scored_traced_and_recorded(tmp_path):
    samples = [sample("a", ["Paris"]), sample("b", ["Paris"]), sample("c", ["Rome", "Roma"])]
    backend = AnswerBackend(
        {
            question("a"): "\\boxed{Paris}",
            question("b"): "It is Paris.",
            question("c"): "\\boxed{x}",
        }
    )
    with open_store(tmp_path) as store:
        summary = await run_eval(samples, factory(backend), store, concurrency=2, progress=False)
        rows = {r.sample_id: r for r in store.results()}
    assert (summary.total, summary.done, summary.failed, summary.ran) == (3, 3, 0, 3)
    assert summary.accuracy == pytest.approx(2 / 3)  # b counts: lenient sub-EM, unboxed
    assert rows["a"].score["strict"] == 1.0 and rows["b"].score["strict"] == 0.0
    assert rows["b"].score["boxed"] is False and rows["b"].score["prediction"] == "It is Paris."
    assert rows["a"].cost["calls"] == 1 and summary.calls == 3
    trace = Run.from_dict(json.loads((tmp_path / rows["c"].trace).read_text()))
    assert trace.question == question("c") and trace.final_reply == "\\boxed{x}"
    assert json.loads((tmp_path / "summary.json").read_text()) == summary.to_dict()


async def test_overhead_is_wall_time_without_a_call_in_flight(tmp_path):
    samples = [sample(str(i), ["Paris"]) for i in range(6)]
    backend = AnswerBackend({question(s.id): "\\boxed{Paris}" for s in samples}, delay=0.01)
    with open_store(tmp_path) as store:
        summary = await run_eval(samples, factory(backend), store, concurrency=3, progress=False)
    assert summary.overhead_seconds == pytest.approx(
        summary.wall_seconds - summary.backend_busy_seconds
    )
    assert 0 < summary.backend_busy_seconds <= summary.wall_seconds
    assert summary.bookkeeping_seconds > 0
    # Overlapping calls count once in the busy time, every time in the summed latencies.
    assert runner._union_length([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.7)]) == 4.0
    assert runner._union_length([]) == 0.0


async def test_no_more_than_concurrency_samples_run_at_once(tmp_path):
    samples = [sample(str(i), ["Paris"]) for i in range(10)]
    backend = AnswerBackend({question(s.id): "\\boxed{Paris}" for s in samples}, delay=0.01)
    with open_store(tmp_path) as store:
        summary = await run_eval(samples, factory(backend), store, concurrency=3, progress=False)
    assert backend.max_in_flight == 3
    assert sorted(backend.calls) == sorted(question(s.id) for s in samples)
    assert summary.done == 10


@pytest.mark.parametrize(
    "error", [BackendError("server answered 500"), BudgetError("the question does not fit")]
)
async def test_failures_stay_in_the_denominator_and_are_retried(tmp_path, error):
    samples = [sample(s, ["Paris"]) for s in ("a", "b", "c", "d")]
    replies = {question(s.id): "\\boxed{Paris}" for s in samples}
    with open_store(tmp_path) as store:
        first = AnswerBackend({**replies, question("b"): error})
        summary = await run_eval(samples, factory(first), store, concurrency=2, progress=False)
        assert (summary.done, summary.failed, summary.accuracy) == (3, 1, 0.75)
        (row,) = [r for r in store.results() if r.status == FAILED]
        assert row.sample_id == "b" and row.trace is None
        assert row.error == f"{type(error).__name__}: {error}"
        assert row.score["null"] is True and row.score["sub_em"] == 0.0

        second = AnswerBackend(replies)
        summary = await run_eval(samples, factory(second), store, concurrency=2, progress=False)
        assert second.calls == [question("b")]  # done samples are not rerun
        assert (summary.done, summary.failed, summary.skipped, summary.accuracy) == (4, 0, 3, 1.0)
        assert {r.sample_id: r.attempts for r in store.results()}["b"] == 2
    sessions = [json.loads(line) for line in (tmp_path / "sessions.jsonl").read_text().splitlines()]
    assert [(s["ran"], s["failed"]) for s in sessions] == [(4, 1), (1, 0)]


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        (BackendError("connection refused", transient=True), BackendError),  # exit 3
        (BackendError("HTTP 400: connection refused by policy"), UsageError),  # exit 2
    ],
    ids=["transient", "permanent"],
)
async def test_a_dead_server_stops_the_run_after_a_streak_of_failures(tmp_path, error, raised):
    samples = [sample(str(i), ["Paris"]) for i in range(10)]
    backend = AnswerBackend({question(s.id): error for s in samples})
    with open_store(tmp_path) as store:
        with pytest.raises(raised, match=r"3 samples failed in a row.*connection refused"):
            await run_eval(
                samples, factory(backend), store, 1, progress=False, max_consecutive_failures=3
            )
        assert store.failed_ids() == {"0", "1", "2"}


async def test_a_bug_propagates_and_keeps_what_finished(tmp_path):
    samples = [sample("a", ["Paris"]), sample("b", ["Paris"]), sample("c", ["Paris"])]
    replies = {question("a"): "\\boxed{Paris}", question("b"): RuntimeError("bug")}
    backend = AnswerBackend({**replies, question("c"): "\\boxed{Paris}"})
    with open_store(tmp_path) as store:
        with pytest.raises(RuntimeError, match="bug"):
            await run_eval(samples, factory(backend), store, concurrency=1, progress=False)
        assert store.done_ids() == {"a"} and store.failed_ids() == set()


async def test_ruler_samples_record_match_all_and_their_group(tmp_path):
    samples = [sample("r", ["11", "22"], kind="ruler", dataset="ruler", context_tokens=4096)]
    backend = AnswerBackend({question("r"): "\\boxed{11}"})
    with open_store(tmp_path) as store:
        summary = await run_eval(samples, factory(backend), store, concurrency=1, progress=False)
        (row,) = store.results()
    assert row.score["match_all"] == 50.0 and summary.accuracy == 0.5
    assert (row.kind, row.dataset, row.context_length) == ("ruler", "ruler", 4096)


def test_bad_samples_are_refused_before_any_call():
    with pytest.raises(UsageError, match="'a' occurs twice"):
        check_samples([sample("a", ["x"]), sample("a", ["y"])])
    with pytest.raises(UsageError, match="no gold answers"):
        check_samples([sample("a", [])])
    with pytest.raises(UsageError, match="unknown kind 'mcq'"):
        check_samples([sample("a", ["x"], kind="mcq")])


def test_context_length_and_trace_names():
    # The target a set was built for groups it; exact per-sample counts are the fallback.
    assert context_length({"context_tokens": 8071, "length": 8192}) == 8192
    assert context_length({"context_tokens": 8000}) == 8000
    assert context_length({"length": "8k", "docs": 20}) == "8k"
    assert context_length({"docs": 20}) == 20
    assert context_length({}) is None
    assert trace_name("hotpot-17.a") == "hotpot-17.a.json"
    unsafe = [trace_name(i) for i in ("a/b", "a_b", "../x", "a b")]
    assert all("/" not in n and " " not in n and not n.startswith(".") for n in unsafe)
    assert len(set(unsafe)) == 4


def test_each_ruler_task_is_its_own_dataset_in_reports():
    assert dataset_label({"dataset": "ruler", "task": "niah_single_2"}) == "ruler/niah_single_2"
    assert dataset_label({"dataset": "ruler", "task": "vt"}) == "ruler/vt"
    assert dataset_label({"dataset": "hotpotqa"}) == "hotpotqa"
    assert dataset_label({"dataset": "qa", "task": "qa"}) == "qa"
    assert dataset_label({"task": "vt"}) is None
    # RULER-HQA by document count and by tokens: two axes, never one table.
    assert dataset_label({"dataset": "hotpotqa", "docs": 50}) == "hotpotqa (by documents)"
    assert dataset_label({"dataset": "hotpotqa", "docs": 61, "length": 8192}) == "hotpotqa"


def test_a_needle_worded_otherwise_or_in_another_text_is_its_own_dataset(tmp_path):
    """Held-out wordings and haystacks must not share RULER's table (or its plot line)."""
    from longread.data.builders import build_ruler
    from longread.text import ApproxTokenizer

    prose = tmp_path / "prose.txt"
    prose.write_text("A plain sentence of prose about rivers and their banks. " * 400)
    tokenizer = ApproxTokenizer()
    (ruler,) = build_ruler("niah_single_2", 1500, 1, 0, tokenizer)
    (held,) = build_ruler(
        "niah_single_2", 1500, 1, 0, tokenizer, str(prose), wording="heldout-ledger"
    )
    assert dataset_label(ruler.meta) == "ruler/niah_single_2"
    assert dataset_label(held.meta) == (
        "ruler/niah_single_2 (wording heldout-ledger, haystack_file prose.txt)"
    )


async def test_the_bar_moves_with_every_call_not_only_every_sample(tmp_path, monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    samples = [sample("a", ["Paris"]), sample("b", ["Rome"])]
    backend = AnswerBackend({question(s.id): "\\boxed{Paris}" for s in samples})
    with open_store(tmp_path, "memagent") as store:
        await run_eval(samples, factory(backend, "memagent"), store, concurrency=1)
    frames = [frame.strip() for frame in err.getvalue().split("\r") if frame.strip()]
    # memagent makes two calls per sample here (one chunk, then the answer): the first call
    # shows before the first sample is done.
    assert any(f.startswith("0%") and "0/2" in f and "calls=1" in f for f in frames), frames
    assert "2/2" in frames[-1] and "calls=4" in frames[-1] and "acc=50.0%" in frames[-1]


async def test_a_failed_sample_keeps_what_its_calls_cost(tmp_path):
    def overloaded(messages):
        raise BackendError("server answered 503")

    # memagent on a one-chunk document: the memory update works, the final answer fails.
    backend = ScriptedBackend(["Notes: item a is Paris.", overloaded])
    tokens = WordTokenizer()
    with open_store(tmp_path, "memagent") as store:
        summary = await run_eval(
            [sample("a", ["Paris"])],
            lambda progress: make_agent("memagent", backend, tokens, None, progress),
            store,
            1,
            progress=False,
        )
        (row,) = store.results()
    assert (row.status, summary.failed, len(backend.requests)) == (FAILED, 1, 2)
    update_prompt = sum(tokens.count(m["content"]) for m in backend.requests[0][0])
    assert row.cost["calls"] == 1 == summary.calls
    assert row.cost["prompt_tokens"] == update_prompt == summary.prompt_tokens
    assert row.cost["completion_tokens"] == tokens.count("Notes: item a is Paris.")
    assert row.cost["seconds"] >= 0
