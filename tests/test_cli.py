"""The ``longread`` command line: exit codes, messages and output, against a real HTTP server."""

from __future__ import annotations

import contextlib
import importlib
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from longread import __version__
from longread.cli import cli

from .eval_helpers import AnswerBackend
from .fake_openai_server import (
    COUNTED,
    FakeOpenAIServer,
    Reply,
    completion_body,
    counted_prompt_tokens,
    unused_port,
)
from .scripted import WordTokenizer

CHAT = "/v1/chat/completions"


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


def invoke(*args: str, input: str | bytes | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def server_args(server: FakeOpenAIServer) -> list[str]:
    return ["--base-url", f"{server.url}/v1", "--model", "m", "--retries", "0"]


def test_ask_json_reports_answer_and_costs(server, document):
    result = invoke(
        "ask",
        str(document),
        "-q",
        "What is the value?",
        "--chunk-tokens",
        "60",
        "--json",
        *server_args(server),
    )
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    chats = server.requests_to(CHAT)
    updates = [r for r in chats if "Paragraph" in r.body["messages"][0]["content"]]
    assert out["answer"] == "7"
    assert out["supported"] is True
    assert [c["quote"] for c in out["citations"]] == ["Paragraph 7 says the value is 7."]
    assert out["calls"] == len(chats) == len(updates) + 1
    assert len(updates) >= 3
    assert out["prompt_tokens"] == sum(map(counted_prompt_tokens, chats))  # the server's usage
    assert out["completion_tokens"] == 3 * len(chats)
    assert out["seconds"] >= 0


def test_ask_prints_the_answer_and_writes_the_trace(server, document, tmp_path):
    trace = tmp_path / "trace.json"
    result = invoke(
        "ask",
        str(document),
        "-q",
        "What is the value?",
        "--chunk-tokens",
        "60",
        "--trace",
        str(trace),
        *server_args(server),
    )
    assert result.exit_code == 0, result.stderr
    answer, sources = result.stdout.splitlines()
    assert answer == "7"
    # Under the answer, the characters of the document that hold it (a text file has no pages).
    start, end = map(int, sources.removeprefix("Sources: chars ").split("-"))
    assert document.read_text()[start:end] == "Paragraph 7 says the value is 7."
    data = json.loads(trace.read_text())
    kinds = [c["kind"] for c in data["steps"]]
    assert kinds[-1] == "final" and set(kinds[:-1]) == {"update"}
    assert len(kinds) == len(server.requests_to(CHAT))
    # Every paragraph was read once, in order.
    prompts = [c["messages"][0]["content"] for c in data["steps"][:-1]]
    where = [
        next(i for i, p in enumerate(prompts) if f"Paragraph {n} says" in p) for n in range(40)
    ]
    assert where == sorted(where) and where[-1] == len(prompts) - 1


def test_ask_reads_stdin(server):
    result = invoke(
        "ask", "-", "-q", "What is the value?", *server_args(server), input="The value is 7.\n"
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "7\nSources: chars 0-15\n"  # "The value is 7."
    assert "The value is 7." in server.requests_to(CHAT)[0].body["messages"][0]["content"]


def test_extra_body_fields_reach_the_server(server):
    result = invoke(
        "ask",
        "-",
        "-q",
        "q",
        *server_args(server),
        "--extra-body",
        '{"repeat_penalty": 1.0, "top_k": 5}',
        input="text\n",
    )
    assert result.exit_code == 0, result.stderr
    body = server.requests_to(CHAT)[0].body
    assert body["repeat_penalty"] == 1.0 and body["top_k"] == 5


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]"])
def test_extra_body_must_be_a_json_object(document, bad):
    result = invoke("ask", str(document), "-q", "q", "--extra-body", bad)
    assert result.exit_code == 2 and "--extra-body" in result.stderr


def test_unreachable_server_exits_3_with_one_line(document):
    url = f"http://127.0.0.1:{unused_port()}/v1"
    result = invoke("ask", str(document), "-q", "q", "--base-url", url, "--retries", "0")
    assert result.exit_code == 3
    assert result.stderr.startswith("longread: error:")
    assert url.removesuffix("/v1") in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_server_failing_after_retries_exits_3(document):
    with FakeOpenAIServer() as fake:
        fake.always(CHAT, Reply(503, {"error": {"message": "overloaded"}}))
        result = invoke("ask", str(document), "-q", "q", *server_args(fake))
    assert result.exit_code == 3
    assert "503" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ask", "missing.txt", "-q", "q"], "does not exist"),
        (["ask", ".", "-q", "q"], "is a directory"),
        (["ask", "{doc}", "-q", "  "], "must not be empty"),
        (["ask", "{doc}"], "--question"),
        (["ask", "{doc}", "-q", "q", "--chunk-tokens", "0"], "chunk-tokens"),
        (["ask", "{doc}", "-q", "q", "--temperature", "-1"], "temperature"),
        (["ask", "{doc}", "-q", "q", "--agent", "nope"], "agent"),
    ],
)
def test_usage_errors_exit_2(document, args, message):
    result = invoke(*[a.replace("{doc}", str(document)) for a in args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_binary_file_is_refused(server, tmp_path):
    path = tmp_path / "image.bin"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10)
    result = invoke("ask", str(path), "-q", "q", *server_args(server))
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("longread: error:")]
    assert len(errors) == 1 and "binary" in errors[0]
    assert server.requests_to(CHAT) == []


@pytest.mark.parametrize("text", ["", " \n\n\t  \n\n   "], ids=["empty", "whitespace"])
def test_an_empty_file_is_refused_before_the_server_is_asked_anything(server, tmp_path, text):
    path = tmp_path / "empty.txt"
    path.write_text(text)
    result = invoke("ask", str(path), "-q", "q", *server_args(server))
    assert result.exit_code == 2, result.output
    assert result.stderr == f"longread: error: {path} is empty (no text to read)\n"
    assert server.requests == []  # not even the model list or a tokenize probe


def test_empty_standard_input_is_refused_before_the_server_is_asked_anything(server):
    result = invoke("ask", "-", "-q", "q", *server_args(server), input="  \n\n ")
    assert result.exit_code == 2, result.output
    assert result.stderr == "longread: error: stdin is empty (no text to read)\n"
    assert server.requests == []


def test_an_empty_file_is_refused_without_waiting_for_an_unreachable_server(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("\n")
    url = f"http://127.0.0.1:{unused_port()}/v1"
    result = invoke("ask", str(path), "-q", "q", "--base-url", url, "--retries", "3")
    assert result.exit_code == 2, result.output  # not 3: the server was never tried
    assert "is empty" in result.stderr


def test_non_utf8_bytes_are_replaced_with_a_warning(server, tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("Caf\xe9 value is 7.\n".encode("latin-1"))
    result = invoke("ask", str(path), "-q", "q", *server_args(server))
    assert result.exit_code == 0, result.stderr
    assert "replaced" in result.stderr
    assert "Caf\ufffd value is 7." in server.requests_to(CHAT)[0].body["messages"][0]["content"]


def test_version_and_help_from_the_installed_command():
    version = subprocess.run(
        [sys.executable, "-m", "longread.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert __version__ in version.stdout
    help_text = subprocess.run(
        [sys.executable, "-m", "longread.cli", "ask", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for flag in (
        "--question",
        "--agent",
        "--base-url",
        "--gguf",
        "--chunk-tokens",
        "--memory-tokens",
        "--json",
        "--trace",
        "--seed",
        "--temperature",
    ):
        assert flag in help_text


@pytest.mark.parametrize("agent", ["memagent", "rememr1", "memreread", "full", "rag"])
def test_every_agent_runs_from_the_cli_against_a_server(server, document, agent):
    result = invoke("ask", str(document), "-q", "What is the value?", "--agent", agent,
                    "--json", *server_args(server))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["agent"] == agent and out["answer"] == "7"
    assert out["calls"] == len(server.requests_to(CHAT)) >= 1
    assert out["prompt_tokens"] == sum(map(counted_prompt_tokens, server.requests_to(CHAT)))


@pytest.mark.parametrize(
    ("agent", "flag", "value"),
    [("memagent", "--rag-k", "3"), ("rag", "--chunk-tokens", "100"),
     ("full", "--max-reread", "1"), ("memreread", "--recall-top-k", "2")],
)  # fmt: skip
def test_a_flag_the_agent_does_not_use_is_refused(document, agent, flag, value):
    result = invoke("ask", str(document), "-q", "q", "--agent", agent, flag, value)
    assert result.exit_code == 2
    assert flag in result.stderr and agent in result.stderr


def test_agent_specific_flags_reach_the_agent(server, document, tmp_path):
    trace = tmp_path / "t.json"
    rag = ["--agent", "rag", "--rag-k", "2", "--rag-chunk-tokens", "40"]
    result = invoke("ask", str(document), "-q", "value?", *rag, "--trace", str(trace),
                    *server_args(server))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    data = json.loads(trace.read_text())
    assert data["config"]["rag_k"] == 2
    assert len(data["steps"][0]["retrieval"]["chunks"]) == 2


def long_document(path: Path, tokens: int) -> Path:
    """About ``tokens`` tokens of plain English by the 4-characters-per-token estimate."""
    paragraph = "The ledger on page twelve records that the value is seven. " * 8
    path.write_text("\n\n".join([paragraph] * (4 * tokens // len(paragraph) + 1)))
    return path


def test_silent_truncation_is_caught_with_estimated_token_counts(tmp_path):
    # No tokenize endpoint on this server, so token counts are estimated; the server says it
    # read 2,048 prompt tokens of a prompt of about 5,000 (Ollama cuts prompts to num_ctx).
    document = long_document(tmp_path / "doc.txt", 12000)
    with FakeOpenAIServer() as fake:
        fake.always(CHAT, Reply(body=completion_body("noted", prompt_tokens=2048)))
        result = invoke("ask", str(document), "-q", "What is the value?", *server_args(fake))
        calls = len(fake.requests_to(CHAT))
    assert result.exit_code == 3, result.output
    assert "reported 2048 prompt tokens" in result.stderr and "truncated" in result.stderr
    assert calls == 1  # the first call already gave it away
    assert result.stdout == ""  # no answer read from a document the model never saw


def test_estimated_counts_that_a_real_tokenizer_could_give_pass(tmp_path):
    # Real tokenizers count English text at down to about 0.64 of the estimate
    # (bench/estimate_error.py); such a server must not be accused of truncating.
    document = long_document(tmp_path / "doc.txt", 12000)
    with FakeOpenAIServer() as fake:
        fake.always(CHAT, Reply(body=completion_body("noted \\boxed{7}", prompt_tokens=3300)))
        result = invoke(
            "ask", str(document), "-q", "What is the value?", "--no-sources", *server_args(fake)
        )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "7"


def test_a_prompt_that_filled_the_servers_window_is_caught(tmp_path):
    # The window is known (8192) and the server read more than our estimate (dense text), so
    # much that the 1024 reply tokens no longer fit: the prompt was cut to the window.
    document = long_document(tmp_path / "doc.txt", 12000)
    with FakeOpenAIServer() as fake:
        fake.always(CHAT, Reply(body=completion_body("noted", prompt_tokens=8192)))
        result = invoke("ask", str(document), "-q", "What is the value?",
                        "--context-window", "8192", *server_args(fake))  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "8192-token window" in result.stderr and "truncated" in result.stderr


@pytest.mark.parametrize(
    ("where", "message"),
    [("missing/trace.json", "does not exist"), ("doc.txt/trace.json", "is not a folder")],
)
def test_a_trace_path_that_cannot_be_written_is_refused_before_any_call(
    server, document, tmp_path, where, message
):
    trace = tmp_path / where
    result = invoke("ask", str(document), "-q", "q", "--trace", str(trace), *server_args(server))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("longread: error: --trace") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert server.requests == []  # nothing was asked, nothing paid for


def test_an_answer_is_printed_even_when_the_trace_cannot_be_written(document, tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    with FakeOpenAIServer() as fake:
        # The trace's folder disappears while the document is being read.
        gone = Reply(
            body=completion_body("noted", prompt_tokens=COUNTED),
            action=lambda: shutil.rmtree(folder),
        )
        fake.script(CHAT, gone)
        fake.always(CHAT, Reply(body=completion_body("noted \\boxed{7}", prompt_tokens=COUNTED)))
        result = invoke("ask", str(document), "-q", "What is the value?", "--chunk-tokens", "60",
                        "--trace", str(folder / "t.json"), *server_args(fake))  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stdout.splitlines()[0] == "7"  # paid for, so never lost
    errors = [line for line in result.stderr.splitlines() if line.startswith("longread: error:")]
    assert len(errors) == 1 and "could not write the trace" in errors[0]
    assert str(folder / "t.json") in errors[0]


@contextlib.contextmanager
def sigint_not_ignored() -> Iterator[None]:
    """Let a child started here take Ctrl-C (a shell starts background jobs with SIGINT
    ignored, and an ignored signal stays ignored across exec)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_signal_while_a_document_is_being_chunked_ends_the_run(tmp_path, sig, code, said):
    # Exact counts from the server's tokenize endpoint, one request per paragraph and each
    # slow: cutting this document into chunks would take many minutes.
    document = tmp_path / "big.txt"
    paragraph = "Paragraph {} of a long report, which says nothing much at some length."
    document.write_text("\n\n".join(paragraph.format(i) for i in range(20000)))
    with FakeOpenAIServer() as fake:
        fake.script("/tokenize", Reply(body={"tokens": [1, 2, 3]}), Reply(body={"tokens": []}))
        fake.always("/tokenize", Reply(body={"tokens": [1] * 16}, delay=0.05))
        args = [sys.executable, "-m", "longread.cli", "ask", str(document), "-q", "q",
                *server_args(fake)]  # fmt: skip
        with sigint_not_ignored():
            process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while len(fake.requests_to("/tokenize")) < 10:  # past the probe, chunking
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "chunking never started"
            time.sleep(0.05)
        process.send_signal(sig)
        try:
            _, stderr = process.communicate(timeout=60)  # a hang guard, not a timing test
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            pytest.fail(f"{sig.name} did not end a run that was chunking its document")
        assert fake.requests_to(CHAT) == []
    assert process.returncode == code
    assert stderr.decode().strip().endswith(f"longread: {said}")


# --- several questions about one file: ask -q Q1 -q Q2 ----------------------------------------

# The module, not the ``main`` function that longread.cli exports under the same name.
cli_main = importlib.import_module("longread.cli.main")
QUESTIONS = ("Who wrote the letter?", "Where was it sent?")


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> AnswerBackend:
    """``ask``'s backend replaced by one that answers by question (any call order)."""
    backend = AnswerBackend({QUESTIONS[0]: "\\boxed{Ann}", QUESTIONS[1]: "\\boxed{Rome}"})

    async def tokenizer(*args: Any) -> WordTokenizer:
        return WordTokenizer()

    # ... and the backends of calls with adapters of their own (the shipped exit probe's)
    factory = importlib.import_module("longread.llm.factory")
    for module in (cli_main, factory):
        monkeypatch.setattr(module, "make_backend", lambda settings: backend)
    monkeypatch.setattr(cli_main, "make_tokenizer", tokenizer)
    return backend


def ask_both(document: Path, *extra: str) -> Any:
    return invoke("ask", str(document), "-q", QUESTIONS[0], "-q", QUESTIONS[1], *extra)


# memagent reads the questions together; rag, which cannot, answers one after another.
@pytest.mark.parametrize("agent", [("memagent", "--chunk-tokens", "60"), ("rag", "--rag-k", "2")])
def test_each_answer_is_printed_under_its_question(answers, document, agent):
    result = ask_both(document, "--agent", *agent, "--no-sources")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (f"Q1: {QUESTIONS[0]}\nA1: Ann\n\nQ2: {QUESTIONS[1]}\nA2: Rome\n")


def test_each_answer_is_followed_by_its_sources_line(answers, document):
    # Neither answer is in the document: each is flagged under its own answer.
    result = ask_both(document, "--chunk-tokens", "60")
    assert result.exit_code == 0, result.stderr
    unsupported = "Sources: none found in the document (unsupported answer)"
    assert result.stdout == (
        f"Q1: {QUESTIONS[0]}\nA1: Ann\n{unsupported}\n\n"
        f"Q2: {QUESTIONS[1]}\nA2: Rome\n{unsupported}\n"
    )


def test_one_question_prints_the_answer_alone(answers, document):
    result = invoke(
        "ask", str(document), "-q", QUESTIONS[1], "--chunk-tokens", "60", "--no-sources"
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Rome\n"


def test_memagent_reads_each_chunk_for_every_question_before_the_next(answers, document):
    # the updates' order: the exit probe's calls (a backend of their own on the embedded
    # model, so they never break the updates' shared prefix) are left out
    result = ask_both(document, "--chunk-tokens", "60", "--section-first", "--exit-probe", "off")
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
