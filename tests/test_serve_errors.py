"""Every refusal and failure reaches the client in OpenAI's error shape with a clear message:
keys (401), sizes (413), busy (429 + Retry-After), bad bodies (400, never FastAPI's 422),
unknown models and routes, a failing backend, a run past its time limit."""

from __future__ import annotations

import json
import threading

import openai
import pytest

from .serve_helpers import (
    QUESTION,
    SlowBackend,
    client,
    curl,
    document,
    wait_for,
)

CHAT = "/chat/completions"


def request(question: str = QUESTION, doc: str | None = None, **fields) -> dict:
    return {
        "model": "longread-memagent",
        "messages": [{"role": "user", "content": question}],
        "longread": {"document": doc if doc is not None else document()},
        **fields,
    }


def post(server, body: str | bytes, *headers: str) -> tuple[int, dict[str, str], dict]:
    args = ["-H", "Content-Type: application/json"]
    for header in headers:
        args += ["-H", header]
    status, response_headers, raw = curl(*args, server.base_url + CHAT, data=body)
    return status, response_headers, json.loads(raw)


def assert_openai_error(body: dict, code: str | None = None) -> dict:
    """OpenAI's shape, nothing else: no FastAPI ``detail``, no traceback."""
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"] and "Traceback" not in error["message"]
    if code is not None:
        assert error["code"] == code
    return error


def test_keys_are_required_when_set_and_health_stays_open(start):
    server = start(keys=("sekrit", "other"))
    with pytest.raises(openai.AuthenticationError) as caught:
        client(server, api_key="wrong").models.list()
    assert caught.value.status_code == 401
    assert caught.value.body["code"] == "invalid_api_key"
    status, _, body = curl(server.base_url + "/models")
    assert status == 401
    assert (
        "Authorization: Bearer"
        in assert_openai_error(json.loads(body), "invalid_api_key")["message"]
    )
    assert len(client(server, api_key="other").models.list().data) == 5
    reply = client(server, api_key="sekrit").chat.completions.create(
        model="longread-memagent",
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"longread": {"document": document()}},
    )
    assert reply.choices[0].message.content == "4720519"
    assert curl(server.url + "/health")[0] == 200


def test_the_viewer_asks_browsers_for_the_key(start):
    pytest.importorskip("longread.view.app")
    server = start(keys=("sekrit",))
    status, headers, _ = curl(server.url + "/view/")
    assert status == 401
    assert headers["www-authenticate"].startswith("Basic")
    assert curl("-u", "me:sekrit", server.url + "/view/")[0] == 200
    assert curl("-H", "Authorization: Bearer sekrit", server.url + "/view/")[0] == 200


def test_a_body_over_the_limit_is_413(start):
    server = start(max_body_bytes=2000)
    status, _, body = post(server, json.dumps(request(doc="word " * 2000)))
    assert status == 413
    assert "--max-body-mb" in assert_openai_error(body, "request_too_large")["message"]


def test_a_document_over_the_limit_is_413(start):
    server = start(max_document_bytes=300)
    with pytest.raises(openai.APIStatusError) as caught:
        client(server).chat.completions.create(
            model="longread-memagent",
            messages=[
                {"role": "user", "content": "x " * 200},
                {"role": "user", "content": QUESTION},
            ],
        )
    assert caught.value.status_code == 413
    assert caught.value.body["code"] == "document_too_large"
    assert "--max-document-mb" in caught.value.body["message"]


def test_a_new_run_past_the_limit_is_429_with_retry_after(start):
    backend = SlowBackend(gated=True)
    server = start(backend, max_runs=1, retry_after=7)
    first: dict = {}
    thread = threading.Thread(target=lambda: first.update(post(server, json.dumps(request()))[2]))
    thread.start()
    wait_for(lambda: backend.started >= 1, "the first run to call the backend")
    status, headers, body = post(server, json.dumps(request(question="Another question?")))
    assert status == 429
    assert headers["retry-after"] == "7"
    assert "--max-runs" in assert_openai_error(body, "too_many_runs")["message"]
    with pytest.raises(openai.RateLimitError):
        client(server).chat.completions.create(
            model="longread-memagent",
            messages=[{"role": "user", "content": "A third question?"}],
            extra_body={"longread": {"document": document()}},
        )
    backend.gate.set()
    thread.join(timeout=30)
    assert first["choices"][0]["message"]["content"] == "4720519"


def options(**fields) -> str:
    """A body whose ``longread`` extension holds a short document and ``fields``."""
    return json.dumps(request(longread={"document": "d", **fields}))


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ('{"model": "longread-memagent", "messages": [', None, "not valid JSON"),
        ("[1, 2]", None, "JSON object"),
        ('{"model": "longread-memagent"}', "messages", "Field required"),
        ('{"model": "longread-memagent", "messages": []}', "messages", "at least 1"),
        (
            '{"model": "longread-memagent", "messages": [{"role": "wizard", "content": "hi"}]}',
            "messages.0.role",
            "user",
        ),
        (json.dumps(request(n=2)), "n", "n must be 1"),
        (options(rag_k=3), "longread.rag_k", "does not apply"),
        (options(chunk_tokens="big"), "longread.chunk_tokens", "integer"),
        (options(chunk_tokens=0), "longread", "positive"),
        (options(prompt_dir="/etc"), "longread.prompt_dir", "server setting"),
        (options(reasoning="loud"), "longread.reasoning", "progress, memory, none"),
        (json.dumps(request(longread={"document": 3})), "longread.document", "string"),
    ],
)
def test_bad_bodies_are_400_in_openai_shape_never_422(start, body, param, words):
    server = start()
    status, _, reply = post(server, body)
    assert status == 400
    error = assert_openai_error(reply)
    assert error["param"] == param
    assert words in error["message"]


def file_part(**file) -> dict:
    return {"type": "file", "file": file}


QUESTION_PART = {"type": "text", "text": "Q?"}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ([{"type": "image_url", "image_url": {"url": "http://x/y.png"}}], "'image_url' is not"),
        ([file_part(file_id="file-abc"), QUESTION_PART], "file_data"),
        ([file_part(file_data="data:application/pdf;base64,JVBERi0x"), QUESTION_PART], "PDF"),
        ([file_part(file_data="data:text/plain;base64,@@@"), QUESTION_PART], "base64"),
        ([file_part(file_data="data:text/plain;base64,AAAA"), QUESTION_PART], "binary"),
        ([file_part(file_data="doc")], "no question"),
    ],
)
def test_parts_longread_cannot_read_are_refused_with_a_reason(start, content, words):
    server = start()
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(
            model="longread-memagent", messages=[{"role": "user", "content": content}]
        )
    assert words in caught.value.body["message"]


def test_a_document_sent_two_ways_is_refused(start):
    server = start()
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(
            model="longread-memagent",
            messages=[{"role": "user", "content": [
                {"type": "file", "file": {"file_data": document()}},
                {"type": "text", "text": QUESTION},
            ]}],
            extra_body={"longread": {"document": document()}},
        )  # fmt: skip
    assert "send it one way" in caught.value.body["message"]


def test_unknown_models_routes_and_methods_answer_in_openai_shape(start):
    server = start()
    with pytest.raises(openai.NotFoundError) as caught:
        client(server).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.body["code"] == "model_not_found"
    assert "longread-memagent" in caught.value.body["message"]
    status, _, body = curl(server.base_url + "/embeddings")
    assert status == 404
    assert assert_openai_error(json.loads(body), "not_found")
    status, _, body = curl(server.base_url + CHAT)  # GET
    assert status == 405
    assert assert_openai_error(json.loads(body), "method_not_allowed")


def test_a_backend_failing_mid_stream_sends_an_error_frame_then_done(start):
    server = start(SlowBackend(fail_at=2), keep_finished=0)
    with pytest.raises(openai.APIError) as caught:
        list(
            client(server).chat.completions.create(
                model="longread-memagent",
                messages=[{"role": "user", "content": QUESTION}],
                extra_body={"longread": {"document": document()}},
                stream=True,
            )
        )
    assert "the GPU caught fire" in caught.value.message
    # The raw stream: progress for the first call, then the error frame, then [DONE].
    server.backend.started = 0
    status, _, raw = curl(
        "-N", "-H", "Content-Type: application/json", server.base_url + CHAT,
        data=json.dumps(request(stream=True)),
    )  # fmt: skip
    assert status == 200
    lines = [line for line in raw.split("\n") if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    error = assert_openai_error(json.loads(lines[-2][6:]), "backend_error")
    assert "the GPU caught fire" in error["message"]
    assert any("chunk 1/" in line for line in lines[:-2])


def test_a_backend_failing_without_streaming_is_502_not_to_be_retried(start):
    server = start(SlowBackend(fail_at=1))
    status, headers, body = post(server, json.dumps(request()))
    assert status == 502
    assert headers["x-should-retry"] == "false"
    assert headers["x-longread-run"]  # its trace names the failure
    assert "the GPU caught fire" in assert_openai_error(body, "backend_error")["message"]


def test_a_run_past_its_time_limit_is_stopped_with_504(start):
    backend = SlowBackend(gated=True)  # never answers
    server = start(backend, run_timeout=0.5)
    status, headers, body = post(server, json.dumps(request()))
    assert status == 504
    assert "--run-timeout" in assert_openai_error(body, "run_timeout")["message"]
    trace = json.loads((server.settings.runs_dir / f"{headers['x-longread-run']}.json").read_text())
    assert "run-timeout" in trace["notes"][0]


class Broken:
    """A backend with a bug in it."""

    name = "broken"
    context_window = None

    async def chat(self, messages, params):
        raise RuntimeError("secret internal detail")

    async def aclose(self) -> None:
        pass


def test_an_unexpected_error_is_a_500_without_details(start):
    server = start(Broken())
    status, _, body = post(server, json.dumps(request()))
    assert status == 500
    error = assert_openai_error(body, "internal_error")
    assert "secret internal detail" not in error["message"]
