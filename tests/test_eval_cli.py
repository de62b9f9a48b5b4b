"""``longread eval run`` as a user runs it: a subprocess against a real HTTP server, killed
for real in the middle, then resumed."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from longread.cli import cli
from longread.view import create_app

from .fake_openai_server import (
    COUNTED,
    FakeOpenAIServer,
    Reply,
    completion_body,
    error_body,
    models_body,
)

CHAT = "/v1/chat/completions"


def eval_command(*args: str) -> list[str]:
    """The installed command once the main CLI registers ``eval``, else the group itself."""
    if "eval" in cli.commands:
        return [sys.executable, "-m", "longread.cli", "eval", *args]
    code = "import sys; from longread.cli.eval import eval_group; eval_group.main(sys.argv[1:])"
    return [sys.executable, "-c", code, *args]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        fake.always(CHAT, Reply(body=completion_body("noted \\boxed{7}", prompt_tokens=COUNTED)))
        yield fake


def write_data(path: Path, n: int, prefix: str = "s") -> Path:
    """``n`` samples; the even ones have gold 7 (what the server answers), the odd ones 8."""
    lines = []
    for i in range(n):
        record = {
            "id": f"{prefix}{i:02d}",
            "question": f"What is value number {i}?",
            "context": f"Paragraph {i} says the value is {7 + i % 2}.",
            "answers": [str(7 + i % 2)],
            "meta": {"dataset": "toy", "context_tokens": 1000},
        }
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def run_args(server: FakeOpenAIServer, data: Path, out: Path, *extra: str) -> list[str]:
    base = ["run", "--data", str(data), "--out", str(out), "--base-url", f"{server.url}/v1"]
    return eval_command(*base, "--model", "m", "--retries", "0", *extra)


def rows(out: Path) -> list[tuple[str, str]]:
    """(sample id, status) of every row, read the way a second process would."""
    if not (out / "results.sqlite").exists():
        return []
    db = sqlite3.connect(f"file:{out / 'results.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT sample_id, status FROM results").fetchall()
    except sqlite3.OperationalError:  # the table is not created yet
        return []
    finally:
        db.close()


def wait_for_rows(out: Path, count: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while len(rows(out)) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run recorded too few samples in a minute"
        time.sleep(0.05)


@contextlib.contextmanager
def sigint_not_ignored() -> Iterator[None]:
    """Let a child started here take Ctrl-C. A shell starts background jobs (``make test &``,
    some CI runners) with SIGINT ignored, and an ignored signal stays ignored across exec, so
    the child would never see it; a handled one is reset to the default instead."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_killed_run_resumes_without_duplicates_or_gaps(server, tmp_path, sig):
    # Slow enough that the run is still going when the signal lands, even on a busy machine.
    server.always(
        CHAT, Reply(body=completion_body("noted \\boxed{7}", prompt_tokens=COUNTED), delay=0.3)
    )
    data, out = write_data(tmp_path / "data.jsonl", 16), tmp_path / "run"
    args = run_args(server, data, out, "--agent", "memagent", "--concurrency", "2")
    with sigint_not_ignored():
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_rows(out, 4, process)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    if sig == signal.SIGINT:
        assert process.returncode == 130 and "interrupted" in stderr
    elif sig == signal.SIGTERM:
        assert process.returncode == 143 and "terminated" in stderr
    else:
        assert process.returncode == -signal.SIGKILL
    survived = rows(out)
    assert 4 <= len(survived) < 16

    resumed = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    final = rows(out)
    assert sorted(i for i, _ in final) == [f"s{i:02d}" for i in range(16)]
    assert {s for _, s in final} == {"done"}
    # Only the samples without a row were run again: two calls each (one chunk, one answer),
    # as the resumed session counts its own calls. (Not the server's total: a request the
    # killed process had sent can reach the server's log after the kill on a busy machine.)
    sessions = [json.loads(x) for x in (out / "sessions.jsonl").read_text().splitlines()]
    assert sessions[-1]["calls"] == 2 * (16 - len(survived))
    assert len(list((out / "traces").glob("*.json"))) == 16
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["done"], summary["skipped"], summary["accuracy"]) == (16, len(survived), 0.5)
    assert "16/16 done, 0 failed, accuracy 50.0%" in resumed.stdout
    if sig != signal.SIGKILL:  # the interrupted session's time is kept for the run's totals
        assert [s["interrupted"] for s in sessions] == [True, False]
        assert sessions[0]["ran"] == len(survived) and sessions[0]["wall_seconds"] > 0
        assert sum(s["ran"] for s in sessions) == 16
    else:  # a killed process writes nothing more
        assert [s["interrupted"] for s in sessions] == [False]
        assert sessions[0]["ran"] == 16 - len(survived)


def error_lines(stderr: str) -> list[str]:
    """The error report at the end of stderr (after warnings such as the estimated counts')."""
    return stderr[stderr.index("longread: error:") :].splitlines()


def test_failed_calls_are_recorded_counted_and_retried(server, tmp_path):
    server.script(CHAT, *[Reply(500, error_body("overloaded", 500))] * 2)
    data, out = write_data(tmp_path / "data.jsonl", 4), tmp_path / "run"
    args = run_args(server, data, out, "--agent", "full", "--concurrency", "1", "--no-progress")
    first = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert first.returncode == 3, first.stderr  # server trouble: rerunning may help
    assert sorted(rows(out)) == [
        ("s00", "failed"),
        ("s01", "failed"),
        ("s02", "done"),
        ("s03", "done"),
    ]
    summary = json.loads((out / "summary.json").read_text())
    # s02 (gold 7) is right, s03 (gold 8) wrong, the two failures count as wrong.
    assert (summary["done"], summary["failed"], summary["accuracy"]) == (2, 2, 0.25)
    assert "2/4 done, 2 failed" in first.stdout
    lines = error_lines(first.stderr)
    assert lines[0] == (
        "longread: error: 2 of 4 samples failed, 2 of them on server trouble (transient: rerun "
        "the same command to retry the failed samples)"
    )
    assert lines[1].startswith("  2 x transient: BackendError: ") and "HTTP 500" in lines[1]
    db = sqlite3.connect(out / "results.sqlite")
    errors = [e for (e,) in db.execute("SELECT error FROM results WHERE status = 'failed'")]
    db.close()
    assert len(errors) == 2 and all("500" in e and "overloaded" in e for e in errors)

    calls_before = len(server.requests_to(CHAT))
    second = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert len(server.requests_to(CHAT)) - calls_before == 2  # only the failed two
    assert {s for _, s in rows(out)} == {"done"}
    assert "4/4 done, 0 failed, accuracy 50.0%" in second.stdout


def test_samples_failing_on_a_bad_configuration_fail_the_run(server, tmp_path):
    # A window too small for any chunk: every sample fails the same way, before any call.
    data, out = write_data(tmp_path / "data.jsonl", 5), tmp_path / "run"
    args = run_args(server, data, out, "--agent", "memagent", "--context-window", "512")
    result = subprocess.run([*args, "--no-progress"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "0/5 done, 5 failed" in result.stdout
    lines = error_lines(result.stderr)
    assert lines[0] == (
        "longread: error: 5 of 5 samples failed, 5 of them on a configuration error "
        "(permanent: a rerun fails the same way until it is fixed)"
    )
    assert len(lines) == 2  # one line per distinct error
    assert lines[1].startswith("  5 x permanent: BudgetError: a 512-token window leaves")
    assert server.requests_to(CHAT) == []
    # A rerun still retries them (here failing the same way), and still says so.
    again = subprocess.run([*args, "--no-progress"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and error_lines(again.stderr)[0] == lines[0]
    attempts = sqlite3.connect(out / "results.sqlite").execute("SELECT attempts FROM results")
    assert {a for (a,) in attempts} == {2}


def test_a_corrupt_results_database_is_a_one_line_error(server, tmp_path):
    data, out = write_data(tmp_path / "data.jsonl", 2), tmp_path / "run"
    args = run_args(server, data, out, "--agent", "full", "--no-progress")
    run_ok(args)
    for name in ("results.sqlite-wal", "results.sqlite-shm"):
        (out / name).unlink(missing_ok=True)
    (out / "results.sqlite").write_bytes(b"\x00garbage, not a database\n" * 200)
    calls = len(server.requests_to(CHAT))
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"longread: error: {out / 'results.sqlite'} is not a readable results database"
    )
    assert len(result.stderr.splitlines()) == 1
    assert len(server.requests_to(CHAT)) == calls


def test_a_row_with_bad_json_is_run_again(server, tmp_path):
    data, out = write_data(tmp_path / "data.jsonl", 3), tmp_path / "run"
    args = run_args(server, data, out, "--agent", "full", "--no-progress")
    run_ok(args)
    db = sqlite3.connect(out / "results.sqlite")
    with db:
        db.execute("UPDATE results SET cost = '{\"calls\": ' WHERE sample_id = 's01'")
    db.close()
    calls = len(server.requests_to(CHAT))
    result = run_ok(args)
    assert "skipped 1 unreadable row" in result.stderr and "s01" in result.stderr
    assert len(server.requests_to(CHAT)) - calls == 1  # s01 alone, run again
    assert "3/3 done, 0 failed" in result.stdout
    assert sorted(rows(out)) == [("s00", "done"), ("s01", "done"), ("s02", "done")]


def test_a_second_run_on_a_busy_folder_is_refused_until_the_first_ends(server, tmp_path):
    # Slow replies keep the first run busy for longer than the second takes to start.
    server.always(
        CHAT, Reply(body=completion_body("noted \\boxed{7}", prompt_tokens=COUNTED), delay=1.5)
    )
    data, out = write_data(tmp_path / "data.jsonl", 8), tmp_path / "run"
    args = run_args(server, data, out, "--agent", "full", "--concurrency", "1", "--no-progress")
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_rows(out, 1, first)
    second = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert first.poll() is None, "the first run ended too soon for this test"
    assert second.returncode == 2
    assert f"{out} is in use by another 'longread eval run'" in second.stderr
    assert first.wait(timeout=120) == 0
    assert sorted(i for i, _ in rows(out)) == [f"s{i:02d}" for i in range(8)]
    assert len(server.requests_to(CHAT)) == 8  # each sample ran once, by the first run
    again = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr  # the lock went with the first run


def test_resuming_with_another_agent_is_refused(server, tmp_path):
    data, out = write_data(tmp_path / "data.jsonl", 2), tmp_path / "run"
    first = subprocess.run(
        run_args(server, data, out, "--agent", "full", "--no-progress"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert first.returncode == 0, first.stderr
    calls = len(server.requests_to(CHAT))
    refused = subprocess.run(
        run_args(server, data, out, "--agent", "full", "--final-tokens", "64", "--no-progress"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert "different agent_config.final_tokens (saved 1024, now 64)" in refused.stderr
    assert len(server.requests_to(CHAT)) == calls


def test_no_more_requests_in_flight_than_the_concurrency(server, tmp_path):
    server.always(CHAT, Reply(body=completion_body("\\boxed{7}", prompt_tokens=COUNTED), delay=0.3))
    data, out = write_data(tmp_path / "data.jsonl", 9), tmp_path / "run"
    args = run_args(server, data, out, "--agent", "full", "--concurrency", "3", "--no-progress")
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert 2 <= server.max_in_flight <= 3
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["done"], summary["concurrency"], summary["calls"]) == (9, 3, 9)
    # Where the time went is reported: overhead is the wall time with no call in flight.
    assert summary["overhead_seconds"] == pytest.approx(
        summary["wall_seconds"] - summary["backend_busy_seconds"]
    )
    assert "overhead" in result.stdout


def test_a_folder_is_every_data_file_in_it_and_limit_takes_the_first(server, tmp_path):
    data, out = tmp_path / "data", tmp_path / "run"
    (data / "sub").mkdir(parents=True)
    write_data(data / "b.jsonl", 2, prefix="b")
    write_data(data / "a.jsonl", 2, prefix="a")
    write_data(data / "sub" / "c.jsonl", 2, prefix="c")
    memagent = [{"_id": "m0", "input": "What?", "context": "Text.", "answers": ["7"]}]
    (data / "m.json").write_text(json.dumps(memagent))
    (data / "notes.txt").write_text("not data")
    (data / ".cache").mkdir()
    (data / ".cache" / "scratch.jsonl").write_text("not a sample\n")  # hidden: left out
    args = run_args(server, data, out, "--agent", "full", "--limit", "6", "--no-progress")
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"reading 4 data file(s) from {data}" in result.stderr
    # Sorted by path: a.jsonl, b.jsonl, m.json, sub/c.jsonl.
    assert sorted(i for i, _ in rows(out)) == ["a00", "a01", "b00", "b01", "c00", "m0"]
    config = json.loads((out / "config.json").read_text())
    assert config["agent"] == "full" and config["data"] == str(data.resolve())
    assert config["backend"]["max_concurrency"] == 4 and "api_key" not in config["backend"]


def test_data_errors_are_one_line_and_exit_2(server, tmp_path):
    (tmp_path / "empty").mkdir()
    args = run_args(server, tmp_path / "empty", tmp_path / "run", "--agent", "full")
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    expected = "holds no data files (.jsonl, .json, .parquet, .pq)"
    assert result.stderr == f"longread: error: {tmp_path / 'empty'} {expected}\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "data.jsonl: holds no records"),
        ("\n \n", "data.jsonl: holds no records"),
        (
            '{"id": "a", "question": "q?", "context": "c", "answers": ["x"]}\n{"id": ',
            "data.jsonl:2: not valid JSON",
        ),
        (
            '{"id": "a", "question": "q?", "context": "  \\n ", "answers": ["x"]}\n',
            "sample 'a' has an empty context (no document to read)",
        ),
        (
            '{"id": "a", "question": " ", "context": "text", "answers": ["x"]}\n',
            "data.jsonl:1: 'question' is empty",
        ),
        (
            '{"id": "a", "question": "q?", "context": "c", "answers": ["x"]}\n' * 2,
            "data.jsonl:2: id 'a' was already used",
        ),
    ],
    ids=["empty", "blank", "cut-short", "empty-context", "empty-question", "duplicate"],
)
def test_bad_data_is_refused_before_the_server_is_asked_anything(
    server, tmp_path, content, message
):
    data = tmp_path / "data.jsonl"
    data.write_text(content)
    args = run_args(server, data, tmp_path / "run", "--agent", "full", "--no-progress")
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("longread: error: ") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert server.requests == []


def run_ok(args: list[str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def test_a_moved_run_folder_resumes_skipping_its_finished_samples(server, tmp_path):
    out = tmp_path / "first" / "run"
    (out / "input").mkdir(parents=True)
    data = write_data(out / "input" / "data.jsonl", 4)  # the data travels with the run folder
    run_ok(run_args(server, data, out, "--agent", "full", "--limit", "2", "--no-progress"))
    shutil.move(tmp_path / "first", tmp_path / "second")
    out, data = tmp_path / "second" / "run", tmp_path / "second" / "run" / "input" / "data.jsonl"
    calls = len(server.requests_to(CHAT))
    resumed = run_ok(run_args(server, data, out, "--agent", "full", "--no-progress"))
    assert len(server.requests_to(CHAT)) - calls == 2  # s00 and s01 were done before the move
    assert sorted(rows(out)) == [(f"s{i:02d}", "done") for i in range(4)]
    assert "4/4 done, 0 failed" in resumed.stdout
    config = json.loads((out / "config.json").read_text())
    assert config["data"] == "input/data.jsonl"  # inside the folder: relative to it
    assert config["resumed"][0]["data"] == "input/data.jsonl"
    assert config["samples"] == 4 and config["data_hash"].startswith("sha256:")
    backend = config["backend"]
    assert (backend["backend"], backend["requested"], backend["model"]) == ("openai", "auto", "m")
    assert backend["base_url"] == f"{server.url}/v1" and "api_key" not in backend


def test_the_same_data_under_another_name_and_format_resumes(server, tmp_path):
    data, out = write_data(tmp_path / "data.jsonl", 3), tmp_path / "run"
    run_ok(run_args(server, data, out, "--agent", "full", "--no-progress"))
    records = [json.loads(line) for line in data.read_text().splitlines()]
    memagent = [
        {"_id": r["id"], "input": r["question"], "context": r["context"], "answers": r["answers"]}
        for r in reversed(records)
    ]
    renamed = tmp_path / "elsewhere" / "copy.json"
    renamed.parent.mkdir()
    renamed.write_text(json.dumps(memagent))
    data.unlink()
    calls = len(server.requests_to(CHAT))
    resumed = run_ok(run_args(server, renamed, out, "--agent", "full", "--no-progress"))
    assert len(server.requests_to(CHAT)) == calls  # nothing left to run
    assert "3/3 done, 0 failed" in resumed.stdout


def test_a_checkout_copied_elsewhere_resumes_and_shows_its_gold_answers(server, tmp_path):
    # A repository holding run folders and their data side by side, as results/ does.
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "data").mkdir()
    data, out = write_data(checkout / "data" / "set.jsonl", 3), checkout / "runs" / "full"
    run_ok(run_args(server, data, out, "--agent", "full", "--limit", "2", "--no-progress"))
    assert json.loads((out / "config.json").read_text())["data"] == "../../data/set.jsonl"
    shutil.copytree(checkout, tmp_path / "clone")
    shutil.rmtree(checkout)  # nothing may lead back to the original
    out, data = tmp_path / "clone" / "runs" / "full", tmp_path / "clone" / "data" / "set.jsonl"
    calls = len(server.requests_to(CHAT))
    resumed = run_ok(run_args(server, data, out, "--agent", "full", "--no-progress"))
    assert len(server.requests_to(CHAT)) - calls == 1  # only s02 was left
    assert "3/3 done, 0 failed" in resumed.stdout
    page = TestClient(create_app(out)).get("/traces/s00.json").text
    assert re.search(r'<div class="gold">.*?<li class="text">7</li>', page, re.S)


@pytest.mark.parametrize(
    ("prefix", "what"),
    [("s", "the same sample ids with changed content"), ("new", "other sample ids")],
)
def test_resuming_on_changed_data_is_refused_in_one_line(server, tmp_path, prefix, what):
    data, out = write_data(tmp_path / "data.jsonl", 2), tmp_path / "run"
    args = run_args(server, data, out, "--agent", "full", "--no-progress")
    run_ok(args)
    calls = len(server.requests_to(CHAT))
    write_data(data, 2, prefix=prefix)
    if prefix == "s":  # the same ids: change one answer
        data.write_text(data.read_text().replace('"answers": ["7"]', '"answers": ["9"]', 1))
    refused = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"longread: error: {out} holds a run on different data ({what}: saved 2 samples from "
        f"{str(data.resolve())!r}, now 2 from {str(data.resolve())!r}); resume with the same "
        "data or pass a new --out folder\n"
    )
    assert len(server.requests_to(CHAT)) == calls


def test_a_folder_from_before_data_hashes_resumes_and_notes_results_of_other_ids(server, tmp_path):
    data, out = tmp_path / "data.jsonl", tmp_path / "run"
    write_data(data, 2, prefix="old")
    args = run_args(server, data, out, "--agent", "full", "--no-progress")
    run_ok(args)
    config = json.loads((out / "config.json").read_text())
    for key in ("data_hash", "sample_ids_hash", "samples"):  # as written before data hashes
        del config[key]
    (out / "config.json").write_text(json.dumps(config))
    write_data(data, 2, prefix="new")  # the same file name, rebuilt with other ids
    resumed = run_ok(args)
    assert (
        "none of the 2 results in" in resumed.stderr and "every sample runs again" in resumed.stderr
    )
    assert sorted(i for i, _ in rows(out)) == ["new00", "new01", "old00", "old01"]
    config = json.loads((out / "config.json").read_text())
    assert config["data_hash"] and config["resumed"][0]["adopted_data_hash"] is True


def test_a_committed_run_folder_from_before_prompt_sets_is_refused(server, tmp_path):
    results = Path(__file__).resolve().parents[1] / "results"
    old = results / "runs" / "full-hotpotqa-2048"
    # The committed results were made before prompt sets; this test needs one such folder.
    assert "prompt_set" not in (old / "config.json").read_text()
    out, data = tmp_path / "run", tmp_path / "data" / "hotpotqa_2048.jsonl"
    shutil.copytree(old, out)
    data.parent.mkdir()
    shutil.copy(results / "data" / "hotpotqa_2048.jsonl", data)
    refused = subprocess.run(
        run_args(server, data, out, "--agent", "full", "--no-progress"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert refused.stderr == (
        f"longread: error: {out} was made by an older longread without agent_config.prompt_set "
        "(now 'paper'), so its results may not match this run; pass a new --out folder\n"
    )
    assert server.requests_to(CHAT) == []


def test_config_records_the_model_and_window_the_server_reported(server, tmp_path):
    server.always("/v1/models", Reply(body=models_body("served-model", max_model_len=4096)))
    data, out = write_data(tmp_path / "data.jsonl", 1), tmp_path / "run"
    args = ["run", "--data", str(data), "--out", str(out), "--base-url", f"{server.url}/v1"]
    run_ok(eval_command(*args, "--agent", "full", "--retries", "0", "--no-progress"))
    backend = json.loads((out / "config.json").read_text())["backend"]
    assert (backend["model"], backend["context_window"]) == ("served-model", 4096)


def test_record_tokens_is_saved_and_a_resume_must_match_it(server, tmp_path):
    data, out = write_data(tmp_path / "data.jsonl", 2), tmp_path / "run"
    run_ok(run_args(server, data, out, "--agent", "full", "--limit", "1", "--no-progress"))
    assert json.loads((out / "config.json").read_text())["record_tokens"] is False
    mixed = subprocess.run(
        run_args(server, data, out, "--agent", "full", "--record-tokens", "--no-progress"),
        capture_output=True,
        text=True,
    )
    assert mixed.returncode == 2 and "record_tokens" in mixed.stderr
