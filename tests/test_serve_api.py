"""``longread serve`` answers OpenAI clients: models, answers, streamed progress, usage, and the
three ways a document can come (the real openai client and curl against a real server)."""

from __future__ import annotations

import base64
import json

import pytest
from openai import BadRequestError

from longread.trace import Run

from .scripted import ScriptedBackend
from .serve_helpers import QUESTION, client, curl, document, scripted_reader

ANSWER = "4720519"
AGENTS = {"memagent", "rememr1", "memreread", "full", "rag"}


def ask(server, messages, **kwargs):
    """A non-streamed request; the raw response (headers) and the parsed completion."""
    raw = client(server).chat.completions.with_raw_response.create(
        model=kwargs.pop("model", "longread-memagent"), messages=messages, **kwargs
    )
    return raw, raw.parse()


def test_models_list_one_model_per_agent_and_health_answers(start):
    server = start()
    ids = [m.id for m in client(server).models.list()]
    assert set(ids) == {f"longread-{a}" for a in AGENTS}
    assert all(ids)
    status, _, body = curl(server.url + "/health")
    assert status == 200
    assert json.loads(body)["status"] == "ok"


def test_the_extension_field_carries_the_document_and_the_run_is_named(start):
    server = start()
    raw, reply = ask(
        server,
        [{"role": "user", "content": QUESTION}],
        extra_body={"longread": {"document": document()}},
    )
    assert reply.choices[0].message.content == ANSWER
    assert reply.choices[0].finish_reason == "stop"
    info = reply.model_extra["longread"]
    assert info["split"]["source"] == "longread.document"
    assert info["question"] == QUESTION
    run_id = raw.headers["x-longread-run"]
    assert info["run_id"] == run_id
    assert raw.headers["x-longread-split"].startswith("source=longread.document")
    # The trace of the run is in the runs folder under the name the response gave.
    trace = Run.load(server.settings.runs_dir / f"{run_id}.json")
    assert trace.run_id == run_id
    assert trace.answer == ANSWER
    assert all(step.run_id == run_id for step in trace.steps)
    # Usage: the backend's own token counts over every call, plus calls, chunks, seconds.
    usage = reply.usage
    assert usage.prompt_tokens == sum(s.prompt_tokens for s in trace.steps) > 0
    assert usage.completion_tokens == sum(s.completion_tokens for s in trace.steps) > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    extra = usage.model_extra
    assert extra["calls"] == len(trace.steps) == extra["chunks"] + 1
    assert extra["chunks"] > 1
    assert extra["seconds"] >= 0


def test_file_parts_carry_the_document_as_base64_or_plain_text(start):
    server = start(keep_finished=0)
    text = document()
    encoded = "data:text/plain;base64," + base64.b64encode(text.encode()).decode()
    for file_data in (encoded, text):
        raw, reply = ask(server, [{"role": "user", "content": [
            {"type": "file", "file": {"file_data": file_data, "filename": "report.txt"}},
            {"type": "text", "text": QUESTION},
        ]}])  # fmt: skip
        assert reply.choices[0].message.content == ANSWER
        split = reply.model_extra["longread"]["split"]
        assert split["source"] == "file"
        assert split["names"] == ["report.txt"]
        assert raw.headers["x-longread-split"].startswith("source=file; parts=1")


def test_several_files_are_read_in_order_as_one_document(start):
    server = start()
    first, second = document(111, needle_at=1), document(222, needle_at=2)
    _, reply = ask(server, [{"role": "user", "content": [
        {"type": "file", "file": {"file_data": first, "filename": "a.txt"}},
        {"type": "file", "file": {"file_data": second, "filename": "b.txt"}},
        {"type": "text", "text": QUESTION},
    ]}])  # fmt: skip
    # The test-double model answers the last number it read: b.txt was read after a.txt.
    assert reply.choices[0].message.content == "222"
    assert reply.model_extra["longread"]["split"]["names"] == ["a.txt", "b.txt"]


def test_earlier_messages_are_the_document_for_clients_that_send_only_messages(start):
    server = start()
    raw, reply = ask(server, [
        {"role": "user", "content": document()},
        {"role": "assistant", "content": "I have read it."},
        {"role": "user", "content": QUESTION},
    ])  # fmt: skip
    assert reply.choices[0].message.content == ANSWER
    split = reply.model_extra["longread"]["split"]
    assert (split["source"], split["parts"]) == ("messages", 2)
    assert raw.headers["x-longread-split"].startswith("source=messages; parts=2")


def test_a_question_with_no_document_is_refused_with_the_ways_to_send_one(start):
    server = start()
    with pytest.raises(BadRequestError) as caught:
        ask(server, [{"role": "user", "content": QUESTION}])
    error = caught.value.body
    assert "no document" in error["message"]
    assert "longread.document" in error["message"]
    assert "file content part" in error["message"]
    assert server.traces() == []  # nothing ran


def test_streaming_sends_progress_as_reasoning_then_the_answer_then_usage(start):
    server = start()
    stream = client(server).chat.completions.create(
        model="longread-memagent",
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"longread": {"document": document()}},
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    reasoning = "".join(
        c.choices[0].delta.model_extra.get("reasoning_content") or "" for c in chunks if c.choices
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == ANSWER
    usage = chunks[-1].usage
    assert chunks[-1].choices == []
    chunk_count = usage.model_extra["chunks"]
    assert usage.model_extra["calls"] == chunk_count + 1
    assert usage.prompt_tokens > 0
    # One progress line per chunk read, then the answer call.
    for i in range(1, chunk_count + 1):
        assert f"chunk {i}/{chunk_count}: memory of" in reasoning
    assert "final: answer of" in reasoning
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish[-1].choices[0].finish_reason == "stop"
    assert finish[-1].model_extra["longread"]["run_id"] == chunks[0].id.removeprefix("chatcmpl-")


def test_reasoning_can_show_each_memory_or_nothing(start):
    server = start(keep_finished=0)
    messages = [{"role": "user", "content": QUESTION}]
    _, shown = ask(
        server, messages, extra_body={"longread": {"document": document(), "reasoning": "memory"}}
    )
    assert (
        "The magic number is 4720519." in shown.choices[0].message.model_extra["reasoning_content"]
    )
    _, quiet = ask(
        server, messages, extra_body={"longread": {"document": document(), "reasoning": "none"}}
    )
    assert quiet.choices[0].message.content == ANSWER
    assert "reasoning_content" not in (quiet.choices[0].message.model_extra or {})


def test_request_options_override_the_servers_agent_settings(start):
    server = start()
    document_text = document()
    _, reply = ask(
        server,
        [{"role": "user", "content": QUESTION}],
        extra_body={"longread": {"document": document_text, "chunk_tokens": 5000}},
    )
    assert reply.usage.model_extra["chunks"] == 1  # the whole document in one chunk
    assert reply.usage.model_extra["calls"] == 2


def test_other_agents_answer_under_their_model_names(start):
    server = start()
    _, reply = ask(
        server,
        [{"role": "user", "content": QUESTION}],
        model="longread-rag",
        extra_body={"longread": {"document": document(), "rag_k": 2}},
    )
    assert reply.choices[0].message.content == ANSWER
    assert reply.model == "longread-rag"
    assert reply.model_extra["longread"]["agent"] == "rag"


def test_an_agent_with_an_adapter_of_its_own_reads_with_its_own_backend(start):
    """An agent that ships its own adapter runs on the model with that adapter; the others
    share the server's backend (longread serve builds one per adapter)."""
    shared, own = scripted_reader(), scripted_reader()
    server = start(shared, agent_backends={"memreread": own})
    extension = {"longread": {"document": document()}}
    message = [{"role": "user", "content": QUESTION}]
    ask(server, message, model="longread-memreread", extra_body=extension)
    assert own.requests and not shared.requests
    _, reply = ask(server, message, model="longread-memagent", extra_body=extension)
    assert reply.choices[0].message.content == ANSWER
    assert shared.requests


def test_a_decision_adapter_s_backend_takes_memreread_s_decisions(start):
    """serve --decision-adapter: memreread's decide calls go to the model with it."""
    shared, decider = scripted_reader(), ScriptedBackend(["<stop/>"] * 5)
    server = start(shared, call_backends={"memreread": {"decide": decider, "integrate": decider}})
    extension = {"longread": {"document": document()}}
    message = [{"role": "user", "content": QUESTION}]
    _, reply = ask(server, message, model="longread-memreread", extra_body=extension)
    assert reply.choices[0].message.content == ANSWER
    assert len(decider.requests) == 1  # <stop/> at once: one decision
    assert "Decide whether the memory is enough" in decider.requests[0][0][0]["content"]
    assert shared.requests and all(
        "Decide whether" not in messages[0]["content"] for messages, _ in shared.requests
    )


def test_curl_gets_a_plain_sse_stream_ending_in_done(start):
    server = start()
    body = {
        "model": "longread-memagent",
        "stream": True,
        "messages": [{"role": "user", "content": QUESTION}],
        "longread": {"document": document()},
    }
    status, headers, raw = curl(
        "-N", "-H", "Content-Type: application/json", server.base_url + "/chat/completions",
        data=json.dumps(body),
    )  # fmt: skip
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["x-longread-run"]
    lines = [line for line in raw.split("\n") if line]
    assert lines[-1] == "data: [DONE]"
    assert all(line.startswith("data: ") or line.startswith(":") for line in lines)
    frames = [json.loads(line[6:]) for line in lines[:-1] if line.startswith("data: ")]
    assert {f["object"] for f in frames} == {"chat.completion.chunk"}
    assert any(f["choices"] and f["choices"][0]["delta"].get("content") == ANSWER for f in frames)


def test_the_trace_opens_in_the_viewer_mounted_at_view(start):
    pytest.importorskip("longread.view.app")
    server = start()
    raw, reply = ask(
        server,
        [{"role": "user", "content": QUESTION}],
        extra_body={"longread": {"document": document()}},
    )
    url = raw.headers["x-longread-trace-url"]
    assert url == reply.model_extra["longread"]["trace_url"]
    assert url.startswith(server.url + "/view/")
    status, headers, page = curl(url)
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    assert QUESTION in page
