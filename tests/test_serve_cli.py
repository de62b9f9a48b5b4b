"""``longread serve`` as users start it: the ask backend flags, here an upstream
OpenAI-compatible server (a scripted one on 127.0.0.1), and its errors in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from openai import OpenAI

from .fake_openai_server import FakeOpenAIServer, Reply, completion_body, models_body, unused_port
from .serve_helpers import QUESTION, document


def longread_serve(*args: str, runs_dir: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LONGREAD_SERVE"))}
    return subprocess.Popen(
        [sys.executable, "-m", "longread", "serve", "--port", "0", "--runs-dir", str(runs_dir),
         *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip


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
    assert (tmp_path / "runs" / f"{run_id}.json").is_file()
    assert process.returncode == 0
    assert "longread serve: stopped" in process.stderr.read()


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
