"""``longread ask FILE -q Q1 -q Q2 ...``: one labelled answer per question, one read."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from longread.cli import cli

from .eval_helpers import AnswerBackend
from .fake_openai_server import COUNTED, FakeOpenAIServer, Reply, completion_body
from .scripted import WordTokenizer

# The module, not the ``main`` function that longread.cli exports under the same name.
cli_main = importlib.import_module("longread.cli.main")
CHAT = "/v1/chat/completions"
QUESTIONS = ("Who wrote the letter?", "Where was it sent?")


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        fake.always(CHAT, Reply(body=completion_body("noted \\boxed{7}", prompt_tokens=COUNTED)))
        yield fake


@pytest.fixture
def document(tmp_path: Path) -> Path:
    path = tmp_path / "doc.txt"
    path.write_text("\n\n".join(f"Paragraph {i} says the value is {i}." for i in range(40)))
    return path


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> AnswerBackend:
    """``ask``'s backend replaced by one that answers by question (any call order)."""
    backend = AnswerBackend({QUESTIONS[0]: "\\boxed{Ann}", QUESTIONS[1]: "\\boxed{Rome}"})

    async def tokenizer(*args: Any) -> WordTokenizer:
        return WordTokenizer()

    monkeypatch.setattr(cli_main, "make_backend", lambda settings: backend)
    monkeypatch.setattr(cli_main, "make_tokenizer", tokenizer)
    return backend


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def server_args(server: FakeOpenAIServer) -> list[str]:
    return ["--base-url", f"{server.url}/v1", "--model", "m", "--retries", "0"]


def ask_both(document: Path, *extra: str) -> Any:
    return invoke("ask", str(document), "-q", QUESTIONS[0], "-q", QUESTIONS[1], *extra)


# memagent reads the questions together; rag, which cannot, answers one after another.
@pytest.mark.parametrize("agent", [("memagent", "--chunk-tokens", "60"), ("rag", "--rag-k", "2")])
def test_each_answer_is_printed_under_its_question(answers, document, agent):
    result = ask_both(document, "--agent", *agent)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (f"Q1: {QUESTIONS[0]}\nA1: Ann\n\nQ2: {QUESTIONS[1]}\nA2: Rome\n")


def test_one_question_prints_the_answer_alone(answers, document):
    result = invoke("ask", str(document), "-q", QUESTIONS[1], "--chunk-tokens", "60")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Rome\n"


def test_memagent_reads_each_chunk_for_every_question_before_the_next(answers, document):
    result = ask_both(document, "--chunk-tokens", "60", "--section-first")
    assert result.exit_code == 0, result.stderr
    calls = answers.calls
    assert len(calls) % 2 == 0 and calls == list(QUESTIONS) * (len(calls) // 2)


def test_json_prints_one_object_per_question_and_traces_go_one_file_each(
    server, document, tmp_path
):
    trace = tmp_path / "trace.json"
    result = ask_both(document, "--chunk-tokens", "60", "--json", "--trace", str(trace),
                      *server_args(server))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["question"] for line in lines] == list(QUESTIONS)
    assert not trace.exists()
    for number, (line, question) in enumerate(zip(lines, QUESTIONS, strict=True), 1):
        data = json.loads((tmp_path / f"trace-q{number}.json").read_text())
        assert data["run_id"] == line["run_id"] and data["question"] == question
        assert len(data["steps"]) == line["calls"]
        assert all(question in s["messages"][0]["content"] for s in data["steps"])
        assert data["config"]["section_first"] is False  # the paper's order by default
    assert sum(line["calls"] for line in lines) == len(server.requests_to(CHAT))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-q", "fine?", "-q", "  "], "must not be empty (question 2 of 2)"),
        (["-q", "fine?", "--agent", "rag", "--section-first"], "--section-first"),
    ],
)
def test_bad_input_gets_one_error_line_and_exit_2(server, document, args, message):
    result = invoke("ask", str(document), *args, *server_args(server))
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if "rror" in line]
    assert len(errors) == 1 and message in errors[0]
    assert server.requests_to(CHAT) == []
