"""``longread serve`` as users start it: the ask backend flags, here an upstream
OpenAI-compatible server (a scripted one on 127.0.0.1), and its errors in one line."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from click.testing import CliRunner
from openai import OpenAI

from longread.cli.main import cli
from longread.trace import Run

from .fake_openai_server import FakeOpenAIServer, Reply, completion_body, models_body, unused_port
from .serve_helpers import QUESTION, document, wait_for


def longread_serve(*args: str, runs_dir: Path, sigint: str = "default") -> subprocess.Popen[str]:
    """``longread serve`` in a child process that starts with SIGINT at its default disposition
    (Ctrl-C raises KeyboardInterrupt) or, ``sigint="ignored"``, ignored, as a shell starts a
    background job (``make test &``, some CI runners) and as every child of such a job inherits
    it. Either way it must stop on Ctrl-C."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LONGREAD_SERVE"))}
    with sigint_for_children(signal.SIG_IGN if sigint == "ignored" else signal.default_int_handler):
        return subprocess.Popen(
            [sys.executable, "-m", "longread", "serve", "--port", "0", "--runs-dir",
             str(runs_dir), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip


@contextlib.contextmanager
def sigint_for_children(handler: Any) -> Iterator[None]:
    """SIGINT set to ``handler`` here while a child is started: an ignored signal stays ignored
    across exec, a handled one starts at the default."""
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def ready_url(process: subprocess.Popen[str]) -> str:
    """The server's /v1 URL, from its ready line."""
    line = process.stdout.readline()
    assert line.startswith("longread serve: http://127.0.0.1:"), process.communicate()
    return line.split()[2]


def stop(process: subprocess.Popen[str], sig: signal.Signals) -> str:
    """Send ``sig``; the server's stderr once it has exited (a hang guard, not a timing)."""
    process.send_signal(sig)
    try:
        return process.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"{sig.name} did not stop the server")


def test_serve_answers_through_an_upstream_server(tmp_path):
    with FakeOpenAIServer() as upstream:
        upstream.always("/v1/models", Reply(body=models_body("upstream-model")))
        # Every call answers the same: memory updates and the final answer alike.
        upstream.always(
            "/v1/chat/completions",
            Reply(body=completion_body("\\boxed{42}", prompt_tokens=2000, completion_tokens=5)),
        )
        process = longread_serve(
            "--base-url", upstream.url + "/v1", "--chunk-tokens", "200",
            "--serve-api-key", "sekrit", runs_dir=tmp_path / "runs",
        )  # fmt: skip
        try:
            line = process.stdout.readline()
            assert line.startswith("longread serve: http://127.0.0.1:"), process.stderr.read()
            base_url = line.split()[2]
            assert base_url.endswith("/v1")
            reply = OpenAI(
                base_url=base_url, api_key="sekrit", max_retries=0
            ).chat.completions.create(
                model="longread-memagent",
                messages=[{"role": "user", "content": QUESTION}],
                extra_body={"longread": {"document": document()}},
            )
        finally:
            process.send_signal(signal.SIGINT)  # Ctrl-C
            process.wait(timeout=30)
    assert reply.choices[0].message.content == "42"
    calls = upstream.requests_to("/v1/chat/completions")
    assert len(calls) == reply.usage.model_extra["calls"] > 1
    assert {c.body["model"] for c in calls} == {"upstream-model"}
    assert reply.usage.prompt_tokens == 2000 * len(calls)  # the upstream's own counts
    run_id = reply.model_extra["longread"]["run_id"]
    # The trace lies in the key's own folder: runs/key-<digest of the key>/<run id>.json.
    (trace,) = (tmp_path / "runs").rglob(f"{run_id}.json")
    assert trace.parent.name.startswith("key-") and "sekrit" not in trace.parent.name
    assert process.returncode == 0
    assert "longread serve: stopped" in process.stderr.read()


# How a server is stopped: Ctrl-C in a terminal, Ctrl-C to a server whose parent ignored SIGINT
# (it inherits that; its own handler must still stop it), and what `kill` and service managers
# send. uvicorn alone raises the signal again after its shutdown: ignored, the server returned
# as if nothing had happened and never said "stopped"; SIGTERM killed it (exit -15).
STOPS = {
    "ctrl-c": (signal.SIGINT, "default"),
    "ctrl-c-with-sigint-ignored-by-the-parent": (signal.SIGINT, "ignored"),
    "sigterm": (signal.SIGTERM, "default"),
}


@pytest.mark.parametrize("how", STOPS)
def test_a_signal_after_the_ready_line_stops_the_server_cleanly(tmp_path, how):
    sig, sigint = STOPS[how]
    with FakeOpenAIServer() as upstream:
        upstream.always("/v1/models", Reply(body=models_body("upstream-model")))
        process = longread_serve(
            "--base-url", upstream.url + "/v1", runs_dir=tmp_path / "runs", sigint=sigint
        )
        ready_url(process)
        stderr = stop(process, sig)
    assert process.returncode == 0, stderr
    assert stderr.endswith("longread serve: stopped\n")
    assert "Traceback" not in stderr


def test_a_signal_during_a_run_stops_the_server_and_keeps_the_runs_trace(tmp_path):
    with FakeOpenAIServer() as upstream:
        upstream.always("/v1/models", Reply(body=models_body("upstream-model")))
        # The first model call is held until the upstream closes: the run is in progress, its
        # client waiting for the answer, when the signal lands.
        upstream.always("/v1/chat/completions", Reply(body=completion_body("x"), delay=600))
        process = longread_serve(
            "--base-url", upstream.url + "/v1", "--chunk-tokens", "200",
            runs_dir=tmp_path / "runs", sigint="ignored",
        )  # fmt: skip
        client = OpenAI(base_url=ready_url(process), api_key="none", max_retries=0, timeout=120)
        failed: list[openai.APIStatusError] = []

        def ask() -> None:
            try:
                client.chat.completions.create(
                    model="longread-memagent",
                    messages=[{"role": "user", "content": QUESTION}],
                    extra_body={"longread": {"document": document()}},
                )
            except openai.APIStatusError as exc:
                failed.append(exc)

        asking = threading.Thread(target=ask)
        asking.start()
        wait_for(lambda: upstream.requests_to("/v1/chat/completions"), "the first model call")
        stderr = stop(process, signal.SIGINT)
        asking.join(timeout=60)
    assert process.returncode == 0, stderr
    assert stderr.endswith("longread serve: stopped\n")
    assert "Traceback" not in stderr
    # The client heard at once why its answer will not come, rather than being cut off.
    (error,) = failed
    assert error.status_code == 503
    assert "the server is shutting down" in error.message
    (trace,) = (tmp_path / "runs").rglob("*.json")
    assert "the server is shutting down" in Run.load(trace).notes[0]


def test_an_unreachable_upstream_is_one_line_and_exit_3(tmp_path):
    process = longread_serve(
        "--base-url", f"http://127.0.0.1:{unused_port()}/v1", "--retries", "0",
        runs_dir=tmp_path / "runs",
    )  # fmt: skip
    out, err = process.communicate(timeout=60)
    assert process.returncode == 3
    assert out == ""
    assert err.startswith("longread: error: ")
    assert "Traceback" not in err


@pytest.mark.parametrize("keys", [(), ("sekrit",)], ids=["no-key", "key"])
def test_listening_beyond_this_machine_without_a_key_warns_that_anyone_reads_everything(
    tmp_path, monkeypatch, keys
):
    served = []
    # The server itself is not the point: it stops at once, having said where it listens.
    monkeypatch.setattr("longread.asgi.serve", lambda *args, **kwargs: served.append(args))
    flags = [f"--serve-api-key={key}" for key in keys]
    result = CliRunner().invoke(
        cli,
        ["serve", "--host", "0.0.0.0", "--port", "0", "--runs-dir", str(tmp_path), *flags,
         "--base-url", f"http://127.0.0.1:{unused_port()}/v1"],
        env={"LONGREAD_SERVE_API_KEYS": None},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(served) == 1
    warnings = [line for line in result.output.splitlines() if "no --serve-api-key" in line]
    if keys:
        assert warnings == []
    else:
        (warning,) = warnings
        assert "anyone who can reach this port can run the model" in warning
        assert "read every document" in warning


def test_a_taken_port_is_one_line_and_exit_2(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "longread", "serve", "--base-url", "http://127.0.0.1:1/v1",
             "--port", str(port), "--runs-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith(f"longread: error: cannot listen on 127.0.0.1:{port}")
