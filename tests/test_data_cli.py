"""``longread data ...`` as a user runs it: real files in, canonical JSONL sets out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from longread.cli.data import data_group
from longread.data.loaders import load_samples
from longread.eval.closed_book import knows

from .fake_openai_server import FakeOpenAIServer, Reply, completion_body, error_body
from .test_builders import fake_records
from .text_helpers import train_bpe


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_bpe(tmp_path_factory.mktemp("bpe"))


@pytest.fixture
def hotpot_file(tmp_path: Path) -> Path:
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps(fake_records(40)), encoding="utf-8")
    return path


def data(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(data_group, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_hotpotqa_by_documents_writes_one_set_per_size(hotpot_file, tmp_path):
    out = tmp_path / "sets"
    code, stdout, _ = data("hotpotqa", "--input", str(hotpot_file), "--docs", "10,20",
                           "--n", "3", "--out", str(out))  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "hotpotqa_docs10.jsonl",
        "hotpotqa_docs20.jsonl",
    ]
    assert f"wrote 3 samples to {out / 'hotpotqa_docs20.jsonl'}" in stdout
    for docs in (10, 20):
        samples = load_samples(out / f"hotpotqa_docs{docs}.jsonl")
        assert [s.meta["docs"] for s in samples] == [docs] * 3
        assert [s.meta["question_id"] for s in samples] == ["q0", "q1", "q2"]


def test_hotpotqa_by_length_counts_with_the_given_tokenizer(hotpot_file, tokenizer_json, tmp_path):
    out = tmp_path / "sets"
    args = ["--lengths", "3000", "--n", "2", "--tokenizer", str(tokenizer_json)]
    code, _, stderr = data("hotpotqa", "--input", str(hotpot_file), *args, "--out", str(out))
    assert code == 0, stderr
    for sample in load_samples(out / "hotpotqa_3000.jsonl"):
        assert sample.meta["length"] == 3000
        assert 2500 < sample.meta["context_tokens"] <= 3000  # within a paragraph or so


def test_excluded_questions_are_skipped_and_still_pad(hotpot_file, tmp_path):
    exclude = tmp_path / "closed_book.txt"
    exclude.write_text("q0\nq2\n\n")
    out = tmp_path / "sets"
    code, _, stderr = data("hotpotqa", "--input", str(hotpot_file), "--docs", "200",
                           "--n", "2", "--exclude", str(exclude), "--out", str(out))  # fmt: skip
    assert code == 0, stderr
    samples = load_samples(out / "hotpotqa_docs200.jsonl")
    assert [s.meta["question_id"] for s in samples] == ["q1", "q3"]
    # Paragraphs only q0 has are still among the distractors of the others.
    records = fake_records(40)
    others = {title for r in records[1:] for title, _ in r["context"]}
    q0_only = {title for title, _ in records[0]["context"]} - others
    assert any(f"\n{title}\n" in s.context for s in samples for title in q0_only)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--docs", "10", "--lengths", "3000"], "give exactly one of --docs and --lengths"),
        (["--docs", "10", "--n", "41"], "asked for 41 questions but the records hold 40"),
        (
            ["--docs", "10", "--exclude", "{unknown}"],
            "1 excluded id(s) are not in the records, e.g. 'nope'",
        ),
    ],
)
def test_hotpotqa_refusals_are_one_line_with_exit_2(hotpot_file, tmp_path, args, message):
    unknown = tmp_path / "ids.txt"
    unknown.write_text("nope\n")
    args = [a.format(unknown=unknown) for a in args]
    code, _, stderr = data("hotpotqa", "--input", str(hotpot_file), *args, "--out", str(tmp_path))
    assert code == 2
    assert message in stderr
    assert not list(tmp_path.glob("*.jsonl"))


def test_a_hotpotqa_file_of_non_objects_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[[1, 2]]")
    code, _, stderr = data("hotpotqa", "--input", str(bad), "--docs", "5", "--out", str(tmp_path))
    assert (code, stderr.strip()) == (
        2,
        f"longread: error: {bad}[0]: record is a list, not an object",
    )


def test_ruler_qa_needs_a_hotpotqa_file_before_any_work(tmp_path):
    code, _, stderr = data("ruler", "--task", "qa", "--lengths", "4096", "--out", str(tmp_path))
    assert code == 2
    assert "task qa is built from HotpotQA questions: pass --hotpotqa FILE" in stderr


def test_ruler_writes_each_length_fitted(tokenizer_json, tmp_path):
    code, _, stderr = data("ruler", "--task", "niah_single_1", "--lengths", "2000,4000", "--n", "2",
                           "--tokenizer", str(tokenizer_json), "--out", str(tmp_path))  # fmt: skip
    assert code == 0, stderr
    for length in (2000, 4000):
        samples = load_samples(tmp_path / f"ruler_niah_single_1_{length}.jsonl")
        assert len(samples) == 2
        assert all(0.99 * length <= s.meta["tokens"] <= length for s in samples)
        assert all(s.answers[0] in s.context for s in samples)


def test_ruler_wording_words_the_needle_and_refuses_an_ambiguous_one(tokenizer_json, tmp_path):
    common = ["--lengths", "2000", "--n", "2", "--tokenizer", str(tokenizer_json)]
    code, _, stderr = data("ruler", "--task", "niah_single_1", "--wording", "plain", *common,
                           "--out", str(tmp_path))  # fmt: skip
    assert code == 0, stderr
    for sample in load_samples(tmp_path / "ruler_niah_single_1_2000.jsonl"):
        assert f"The special magic number is {sample.answers[0]}." in sample.context
    code, _, stderr = data("ruler", "--task", "niah_multikey_1", "--wording", "plain", *common,
                           "--out", str(tmp_path / "multi"))  # fmt: skip
    assert code == 2
    assert "wording 'plain' names no key" in stderr


def test_chains_writes_each_length_and_order(tokenizer_json, tmp_path):
    common = ["--lengths", "2000", "--n", "2", "--tokenizer", str(tokenizer_json)]
    for order in ("reversed", "forward"):
        code, _, stderr = data("chains", "--order", order, *common, "--out", str(tmp_path))
        assert code == 0, stderr
        samples = load_samples(tmp_path / f"chains_{order}_2000.jsonl")
        assert len(samples) == 2 and {s.meta["order"] for s in samples} == {order}
        assert all(s.answers[0] in s.meta["evidence"][0] for s in samples)
    code, _, stderr = data("chains", "--haystack", "needles", *common, "--out", str(tmp_path))
    assert code == 2 and "not needles" in stderr


CHAT = "/v1/chat/completions"


def test_closed_book_lists_what_the_model_knows_and_resumes(hotpot_file, tmp_path):
    out = tmp_path / "closed_book.txt"
    args = ["closed-book", "--input", str(hotpot_file), "--n", "5", "--out", str(out),
            "--concurrency", "1", "--retries", "0", "--model", "m", "--no-progress"]  # fmt: skip
    with FakeOpenAIServer() as server:
        server.script(
            CHAT,
            Reply(body=completion_body("\\boxed{answer 0}")),  # right
            Reply(body=completion_body("\\boxed{no idea}")),  # wrong
            Reply(body=completion_body("It is answer 2.")),  # right without a box
            Reply(500, error_body("overloaded", 500)),  # the pass stops here
        )
        code, _, stderr = data(*args, "--base-url", f"{server.url}/v1")
        assert code == 3, stderr
        assert not out.exists()
        log = (tmp_path / "closed_book.txt.log").read_text().splitlines()
        assert json.loads(log[0])["header"]["model"] == "m"
        answers = [json.loads(line) for line in log[1:]]
        assert [(a["id"], a["known"]) for a in answers] == [
            ("q0", True),
            ("q1", False),
            ("q2", True),
        ]

        server.script(
            CHAT,
            Reply(body=completion_body("\\boxed{answer 3}")),
            Reply(body=completion_body("\\boxed{}")),  # empty: wrong
        )
        code, stdout, stderr = data(*args, "--base-url", f"{server.url}/v1")
        assert code == 0, stderr
        prompts = [r.body["messages"][-1]["content"] for r in server.requests_to(CHAT)]
        # Another model's replies are never reused for this one.
        other = [a if a != "m" else "other" for a in args]
        code, _, stderr = data(*other, "--base-url", f"{server.url}/v1")
        assert code == 2
        assert "holds replies of another model or setting (model: saved 'm', now 'other')" in stderr
    assert out.read_text() == "q0\nq2\nq3\n"
    assert "3 of 5 questions answered without the context" in stdout
    # Only the two unanswered questions were asked again, and no document went with them.
    assert [p.split("\n")[0] for p in prompts[-2:]] == [
        "Problem: Question 3?",
        "Problem: Question 4?",
    ]
    assert all("Document" not in p for p in prompts)


def logged_ids(log: Path) -> list[str]:
    """The question ids of a closed-book log's reply lines (its first line is the header)."""
    header, *replies = log.read_text().splitlines()
    assert "header" in json.loads(header)
    return [json.loads(line)["id"] for line in replies]


def test_closed_book_keeps_every_answer_when_one_call_fails(hotpot_file, tmp_path):
    out = tmp_path / "known.txt"
    ok = completion_body("\\boxed{x}")
    args = ["closed-book", "--input", str(hotpot_file), "--n", "6", "--out", str(out),
            "--concurrency", "3", "--retries", "0", "--model", "m", "--no-progress"]  # fmt: skip
    with FakeOpenAIServer() as server:
        # Three calls start together: two answer at once, the third fails a moment later,
        # while the next two (slow) are in flight.
        server.script(
            CHAT, Reply(body=ok), Reply(body=ok), Reply(500, error_body("down", 500), delay=0.3)
        )
        server.always(CHAT, Reply(body=ok, delay=1.0))
        code, _, stderr = data(*args, "--base-url", f"{server.url}/v1")
        assert code == 3, stderr
        first_pass = logged_ids(tmp_path / "known.txt.log")
        assert len(first_pass) == 2  # the answers that came back were kept
        code, stdout, stderr = data(*args, "--base-url", f"{server.url}/v1")
        assert code == 0, stderr
    ids = logged_ids(tmp_path / "known.txt.log")
    assert sorted(ids) == [f"q{i}" for i in range(6)]  # each once: resumed, nothing redone
    assert "0 of 6 questions answered without the context" in stdout


@pytest.mark.parametrize(
    ("reply", "golds", "known"),
    [
        ("\\boxed{Paris}", ["Paris"], True),
        ("I think it is Paris.", ["Paris"], True),  # whole words, unboxed
        ("\\boxed{Parisian food}", ["Paris"], False),  # not a whole word
        ("\\boxed{no}", ["no"], True),
        ("No, I do not know.", ["no"], False),  # yes/no needs the exact answer
        ("\\boxed{The Yes}", ["yes"], True),  # normalised: articles dropped
        ("\\boxed{}", ["Paris"], False),
        ("", ["Paris"], False),
    ],
)
def test_the_closed_book_judge(reply, golds, known):
    assert knows(reply, golds) is known
