"""Runs and their clients: a client that goes away stops its run (no orphaned backend calls);
identical requests, retries after a client's own timeout included, share one run."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import openai
import pytest
from openai import OpenAI

from longread.trace import Run

from .serve_helpers import (
    QUESTION,
    SlowBackend,
    client,
    curl,
    document,
    start_servers,
    wait_for,
)

ANSWER = "4720519"


def create(openai_client: OpenAI, doc: str, **kwargs):
    return openai_client.chat.completions.create(
        model="longread-memagent",
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"longread": {"document": doc}},
        **kwargs,
    )


def health(server) -> dict:
    return json.loads(curl(server.url + "/health")[2])


def in_thread(function) -> tuple[threading.Thread, dict]:
    """Run ``function`` in a thread; its result (or error) lands in the returned dict."""
    out: dict = {}

    def target() -> None:
        try:
            out["result"] = function()
        except Exception as exc:
            out["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, out


def test_a_client_that_disconnects_mid_stream_cancels_its_run(start):
    backend = SlowBackend(delay=0.02)
    server = start(backend, cancel_after=0)
    long_document = document(paragraphs=60, needle_at=59)
    stream = create(client(server), long_document, stream=True)
    for chunk in stream:
        reasoning = chunk.choices[0].delta.model_extra.get("reasoning_content") or ""
        if reasoning.startswith("chunk 1/"):
            chunks = int(reasoning.split("/")[1].split(":")[0])
            break
    stream.close()  # the user pressed stop
    # The run ends as cancelled and leaves its trace: the calls it made before the stop.
    wait_for(lambda: server.traces(), "the cancelled run's trace")
    trace = Run.load(server.traces()[0])
    assert "every client went away" in trace.notes[0]
    calls = backend.started
    assert calls < chunks + 1  # it never read the whole document
    time.sleep(0.5)  # 25 backend calls' worth: none may start now
    assert backend.started == calls
    assert health(server)["runs"] == 0


def test_identical_requests_in_flight_share_one_run(start):
    backend = SlowBackend(gated=True)
    server = start(backend, max_runs=1)  # a second run would be refused: only sharing works
    doc = document()
    first, first_out = in_thread(lambda: create(client(server), doc))
    wait_for(lambda: backend.started >= 1, "the run to start")
    second, second_out = in_thread(lambda: create(client(server), doc))
    wait_for(lambda: health(server)["clients"] == 2, "the second request to join the run")
    backend.gate.set()
    first.join(timeout=30)
    second.join(timeout=30)
    replies = [first_out["result"], second_out["result"]]
    assert [r.choices[0].message.content for r in replies] == [ANSWER, ANSWER]
    infos = [r.model_extra["longread"] for r in replies]
    assert infos[0]["run_id"] == infos[1]["run_id"]
    assert sorted(i["shared"] for i in infos) == [False, True]
    calls = replies[0].usage.model_extra["calls"]
    assert backend.started == calls  # one run's calls, not two
    assert len(server.traces()) == 1


def test_a_client_retrying_after_its_own_timeout_joins_the_run_it_started(start):
    backend = SlowBackend(gated=True)  # slower than the client's patience
    server = start(backend, cancel_after=30)
    doc = document()
    impatient = client(server, timeout=0.3, max_retries=2)
    with pytest.raises(openai.APITimeoutError):
        create(impatient, doc)  # three attempts, each given up after 0.3 s
    assert health(server)["runs"] == 1  # the run goes on for the retry to come
    backend.gate.set()
    reply = create(client(server), doc)  # the user's next retry
    assert reply.choices[0].message.content == ANSWER
    assert reply.model_extra["longread"]["shared"] is True
    assert backend.started == reply.usage.model_extra["calls"]  # one run for all attempts
    assert len(server.traces()) == 1


def test_a_stream_and_a_plain_request_for_the_same_answer_share_a_run(start):
    backend = SlowBackend(gated=True)
    server = start(backend)
    doc = document()
    plain, plain_out = in_thread(lambda: create(client(server), doc))
    wait_for(lambda: backend.started >= 1, "the run to start")
    streamed, streamed_out = in_thread(lambda: list(create(client(server), doc, stream=True)))
    wait_for(lambda: health(server)["clients"] == 2, "the stream to join the run")
    backend.gate.set()
    plain.join(timeout=30)
    streamed.join(timeout=30)
    content = "".join(c.choices[0].delta.content or "" for c in streamed_out["result"] if c.choices)
    assert content == plain_out["result"].choices[0].message.content == ANSWER
    assert len(server.traces()) == 1


def test_callers_with_different_keys_never_share_a_run(start):
    server = start(keys=("alice", "bob"))
    doc = document()
    alice = create(client(server, api_key="alice"), doc)
    bob = create(client(server, api_key="bob"), doc)
    assert alice.model_extra["longread"]["run_id"] != bob.model_extra["longread"]["run_id"]
    assert bob.model_extra["longread"]["shared"] is False


def test_a_failed_run_is_not_given_to_the_next_identical_request(start):
    server = start(SlowBackend(fail_at=1))
    doc = document()
    with pytest.raises(openai.APIStatusError) as caught:
        create(client(server), doc)
    assert caught.value.status_code == 502
    reply = create(client(server), doc)  # a fresh run, which the backend now answers
    assert reply.choices[0].message.content == ANSWER
    assert reply.model_extra["longread"]["shared"] is False
    assert len(server.traces()) == 2


def test_a_different_question_about_the_same_document_is_its_own_run(start):
    server = start()
    doc = document()
    first = create(client(server), doc)
    second = client(server).chat.completions.create(
        model="longread-memagent",
        messages=[{"role": "user", "content": "And what is the special magic number again?"}],
        extra_body={"longread": {"document": doc}},
    )
    assert second.model_extra["longread"]["run_id"] != first.model_extra["longread"]["run_id"]


def test_a_plain_request_given_up_by_its_client_stops_its_run_when_nobody_retries(start):
    backend = SlowBackend(gated=True)
    server = start(backend, cancel_after=0)
    with pytest.raises(openai.APITimeoutError):
        create(client(server, timeout=0.3), document())
    wait_for(lambda: server.traces(), "the abandoned run's trace")
    assert "every client went away" in Run.load(server.traces()[0]).notes[0]
    backend.gate.set()  # the model would answer now: nobody may ask it
    time.sleep(0.3)
    assert backend.started == 1


def test_a_quiet_stream_sends_keepalive_comments_until_the_answer(start):
    backend = SlowBackend(gated=True)
    server = start(backend, keepalive=0.05)
    body = {
        "model": "longread-memagent",
        "stream": True,
        "messages": [{"role": "user", "content": QUESTION}],
        "longread": {"document": document()},
    }
    url = server.base_url + "/chat/completions"
    command = ["curl", "-sS", "-N", "-H", "Content-Type: application/json", url]
    command += ["-d", json.dumps(body)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        lines = []
        while ": keepalive" not in lines:  # the first call is held: nothing else to send
            lines.append(process.stdout.readline().rstrip("\n"))
        backend.gate.set()
        lines += process.stdout.read().split("\n")
    frames = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert [line for line in lines if line][-1] == "data: [DONE]"
    assert any(f["choices"] and f["choices"][0]["delta"].get("content") == ANSWER for f in frames)


def test_stopping_the_server_cancels_its_runs_and_keeps_their_traces(tmp_path):
    backend = SlowBackend(gated=True)
    start, stop = start_servers(tmp_path)
    server = start(backend)
    thread, _ = in_thread(lambda: create(client(server), document()))
    wait_for(lambda: backend.started >= 1, "the run to start")
    stop()
    thread.join(timeout=30)
    backend.gate.set()
    assert "the server is shutting down" in Run.load(server.traces()[0]).notes[0]
    time.sleep(0.3)
    assert backend.started == 1
