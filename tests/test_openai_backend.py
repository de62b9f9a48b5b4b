"""OpenAIBackend against a real, scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from longread.errors import BackendError, UsageError
from longread.llm import openai as openai_module
from longread.llm.base import Completion, LLMBackend, Message, SamplingParams
from longread.llm.loops import cut_loop
from longread.llm.openai import OpenAIBackend, check_prompt_truncation

from .fake_openai_server import (
    FakeOpenAIServer,
    Reply,
    completion_body,
    error_body,
    models_body,
    unused_port,
)

CHAT = "/v1/chat/completions"
MODELS = "/v1/models"
MESSAGES: list[Message] = [
    {"role": "system", "content": "You read long documents."},
    {"role": "user", "content": "What is the answer?"},
]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the backoff waits the backend asks for instead of sleeping through them."""
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(openai_module, "_sleep", record)
    return waits


def make_backend(server: FakeOpenAIServer, **kwargs: Any) -> OpenAIBackend:
    options: dict[str, Any] = {"base_url": server.url, "model": "test-model", "backoff_base": 0.01}
    options.update(kwargs)
    return OpenAIBackend(**options)


async def chat(backend: OpenAIBackend, params: SamplingParams | None = None) -> Completion:
    return await backend.chat(MESSAGES, params or SamplingParams())


def assert_one_line(exc: pytest.ExceptionInfo[BackendError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# -- normal completions --------------------------------------------------------------------


async def test_completion_returns_text_and_usage_and_sends_the_params(
    server: FakeOpenAIServer,
) -> None:
    server.script(CHAT, Reply(body=completion_body("The answer is 42.", finish_reason="length")))
    params = SamplingParams(max_tokens=64, temperature=0.7, top_p=0.9, seed=7, stop=("</s>",))
    async with make_backend(server) as backend:
        assert isinstance(backend, LLMBackend)
        result = await chat(backend, params)

    assert result.text == "The answer is 42."
    assert result.finish_reason == "length" and result.truncated
    assert (result.prompt_tokens, result.completion_tokens) == (12, 3)
    assert result.model == "test-model"
    assert result.seconds > 0
    [request] = server.requests_to(CHAT)
    assert request.method == "POST"
    assert request.body == {
        "model": "test-model",
        "messages": MESSAGES,
        "max_tokens": 64,
        "temperature": 0.7,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["</s>"],
    }


async def test_unset_seed_stop_and_logprobs_are_not_sent(server: FakeOpenAIServer) -> None:
    # Some servers reject "seed": null or "stop": [], so leave them out entirely.
    server.script(CHAT, Reply(body=completion_body()))
    async with make_backend(server) as backend:
        await chat(backend)
    [request] = server.requests_to(CHAT)
    unset = {"seed", "stop", "logprobs", "return_token_ids", "include_stop_str_in_output"}
    assert not (unset | {"no_stop_trim"}) & set(request.body)


async def test_a_kept_stop_string_is_asked_under_vllm_and_sglang_names(
    server: FakeOpenAIServer,
) -> None:
    # rememr1's format stop reads where the reply was cut; OpenAI's own API would cut it off.
    server.script(CHAT, Reply(body=completion_body()))
    async with make_backend(server) as backend:
        await chat(backend, SamplingParams(stop=("</update><update>",), include_stop=True))
    body = server.requests_to(CHAT)[0].body
    assert body["stop"] == ["</update><update>"]
    assert (body["include_stop_str_in_output"], body["no_stop_trim"]) == (True, True)


async def test_a_grammar_is_sent_under_llama_cpp_vllm_and_sglang_names(
    server: FakeOpenAIServer,
) -> None:
    # rememr1's --format-grammar through a server: each reads its own field
    grammar = 'root ::= "yes" | "no"\n'
    server.script(CHAT, Reply(body=completion_body()))
    server.script(CHAT, Reply(body=completion_body()))
    async with make_backend(server) as backend:
        await chat(backend, SamplingParams(grammar=grammar))
        await chat(backend)
    constrained, free = (request.body for request in server.requests_to(CHAT))
    assert constrained["grammar"] == constrained["ebnf"] == grammar
    assert constrained["structured_outputs"] == {"grammar": grammar}
    assert not {"grammar", "ebnf", "structured_outputs"} & set(free)  # OpenAI's API refuses them


async def test_a_reply_that_looped_to_the_cap_is_cut_where_the_embedded_model_stops(
    server: FakeOpenAIServer,
) -> None:
    # no server stops on a loop: the reply is cut when it comes back, to the same text
    looped = "<update>The locker" + "_finally" * 40
    server.script(CHAT, Reply(body=completion_body(looped, finish_reason="length")))
    server.script(CHAT, Reply(body=completion_body(looped, finish_reason="length")))
    async with make_backend(server) as backend:
        cut = await chat(backend, SamplingParams(loop_stop=True))
        whole = await chat(backend)
    assert cut.finish_reason == "loop" and cut.text == cut_loop(looped)
    assert len(cut.text) < len(looped) and looped.startswith(cut.text)
    assert (whole.text, whole.finish_reason) == (looped, "length")  # not asked: untouched
    # nothing is sent for it: the servers have no such field
    assert server.requests_to(CHAT)[0].body == server.requests_to(CHAT)[1].body


async def test_null_content_and_missing_usage_do_not_crash(server: FakeOpenAIServer) -> None:
    server.script(CHAT, Reply(body=completion_body(None, usage=False)))
    async with make_backend(server) as backend:
        result = await chat(backend)
    assert (result.text, result.prompt_tokens, result.completion_tokens) == ("", 0, 0)


# -- recording tokens ----------------------------------------------------------------------


async def test_recording_asks_for_logprobs_and_token_ids(server: FakeOpenAIServer) -> None:
    server.script(CHAT, Reply(body=completion_body(token_ids=[5])))
    async with make_backend(server) as backend:
        await chat(backend, SamplingParams(record_tokens=True))
    body = server.requests_to(CHAT)[0].body
    assert (body["logprobs"], body["return_token_ids"]) == (True, True)


async def test_vllm_prompt_and_completion_ids_are_parsed(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    logprobs = [
        {"token": "Par", "logprob": -0.25},
        {"token": "is", "logprob": -0.5},
        {"token": "<|im_end|>", "logprob": -1.5},
    ]
    body = completion_body(
        "Paris",
        logprobs=logprobs,
        token_ids=[3400, 285, 2],  # the end-of-sequence id included, as vLLM returns it
        prompt_token_ids=[1, 9690, 198, 2683],
    )
    server.script(CHAT, Reply(body=body))
    async with make_backend(server) as backend:
        result = await chat(backend, SamplingParams(record_tokens=True))
    assert result.text == "Paris"
    assert result.prompt_ids == [1, 9690, 198, 2683]
    assert result.token_ids == [3400, 285, 2]
    assert result.logprobs == [-0.25, -0.5, -1.5]
    assert "prompt_token_ids" not in caplog.text


async def test_token_id_spelling_of_older_vllm_is_parsed(server: FakeOpenAIServer) -> None:
    # vLLM before return_token_ids: --return-tokens-as-token-ids spells tokens "token_id:N".
    tokens = [{"token": "token_id:17", "logprob": -0.5}, {"token": "token_id:4", "logprob": -1.25}]
    server.script(CHAT, Reply(body=completion_body("ab", logprobs=tokens)))
    async with make_backend(server) as backend:
        result = await chat(backend, SamplingParams(record_tokens=True))
    assert result.logprobs == [-0.5, -1.25]
    assert result.token_ids == [17, 4]
    assert result.prompt_ids is None


async def test_missing_prompt_ids_warn_once_per_backend(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = [{"token": "token_id:17", "logprob": -0.5}]
    server.always(CHAT, Reply(body=completion_body("a", logprobs=tokens)))
    async with make_backend(server) as backend:
        for _ in range(3):
            result = await chat(backend, SamplingParams(record_tokens=True))
            assert (result.token_ids, result.prompt_ids) == ([17], None)
    warnings = [r for r in caplog.records if "prompt_token_ids" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelname == "WARNING"
    assert server.url in warnings[0].getMessage()


@pytest.mark.parametrize(
    "logprobs",
    [None, [{"token": "a", "logprob": -0.1}]],  # an OpenAI-like server; logprobs without ids
)
async def test_server_without_token_ids_cannot_record(
    server: FakeOpenAIServer, logprobs: list[dict[str, Any]] | None
) -> None:
    server.script(CHAT, Reply(body=completion_body("a", logprobs=logprobs)))
    async with make_backend(server) as backend:
        with pytest.raises(BackendError) as exc:
            await chat(backend, SamplingParams(record_tokens=True))
    message = assert_one_line(exc)
    assert message.startswith(f"{server.url}{CHAT} cannot record tokens")
    assert "vLLM" in message and "without --record-tokens" in message


async def test_ids_and_logprobs_of_different_lengths_are_refused(
    server: FakeOpenAIServer,
) -> None:
    tokens = [{"token": "a", "logprob": -0.1}]
    server.script(CHAT, Reply(body=completion_body("ab", logprobs=tokens, token_ids=[7, 8])))
    async with make_backend(server) as backend:
        with pytest.raises(BackendError, match="2 token ids but 1 logprobs"):
            await chat(backend, SamplingParams(record_tokens=True))


async def test_ids_are_ignored_when_not_recording(server: FakeOpenAIServer) -> None:
    body = completion_body("a", token_ids=[7], prompt_token_ids=[1, 2])
    server.script(CHAT, Reply(body=body))
    async with make_backend(server) as backend:
        result = await chat(backend)
    assert (result.token_ids, result.logprobs, result.prompt_ids) == (None, None, None)


async def test_api_key_is_sent_as_bearer_token(server: FakeOpenAIServer) -> None:
    server.script(CHAT, Reply(body=completion_body()))
    async with make_backend(server, api_key="sk-test") as backend:
        await chat(backend)
    assert server.requests_to(CHAT)[0].headers["authorization"] == "Bearer sk-test"


# -- retries -------------------------------------------------------------------------------


async def test_429_is_retried_and_retry_after_is_honoured(
    server: FakeOpenAIServer, sleeps: list[float]
) -> None:
    server.script(
        CHAT,
        Reply(429, error_body("slow down", 429), headers={"Retry-After": "2"}),
        Reply(body=completion_body("ok")),
    )
    # A backoff base of 30s would wait at least 30s: 2.0 can only come from the header.
    async with make_backend(server, backoff_base=30.0) as backend:
        result = await chat(backend)
    assert result.text == "ok"
    assert len(server.requests_to(CHAT)) == 2
    assert sleeps == [2.0]


async def test_retry_after_is_capped(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    server.script(
        CHAT,
        Reply(503, "overloaded", headers={"Retry-After": "3600"}),
        Reply(body=completion_body()),
    )
    async with make_backend(server) as backend:
        await chat(backend)
    assert sleeps == [openai_module.MAX_WAIT_SECONDS]


async def test_backoff_grows_exponentially(server: FakeOpenAIServer, sleeps: list[float]) -> None:
    server.always(CHAT, Reply(500, error_body("boom", 500)))
    async with make_backend(server, backoff_base=1.0, max_retries=4) as backend:
        with pytest.raises(BackendError):
            await chat(backend)
    assert len(sleeps) == 4
    for n, wait in enumerate(sleeps):
        assert 2**n <= wait <= 2**n + 1  # base * 2**n plus up to one base of jitter


async def test_5xx_errors_are_retried_until_success(server: FakeOpenAIServer) -> None:
    server.script(
        CHAT,
        Reply(500, error_body("internal error", 500)),
        Reply(502, "Bad Gateway"),
        Reply(body=completion_body("finally")),
    )
    async with make_backend(server) as backend:
        result = await chat(backend)
    assert result.text == "finally"
    assert len(server.requests_to(CHAT)) == 3


async def test_timeout_is_retried(server: FakeOpenAIServer) -> None:
    server.script(
        CHAT, Reply(body=completion_body("late"), delay=5.0), Reply(body=completion_body())
    )
    async with make_backend(server, timeout=0.2) as backend:
        result = await chat(backend)
    assert result.text == "hello"
    assert len(server.requests_to(CHAT)) == 2


@pytest.mark.parametrize(
    "broken",
    [
        Reply(body=json.dumps(completion_body("lost"))[:45]),  # complete, but not whole JSON
        Reply(body=completion_body("lost"), cut_at=45),  # cut off on the wire
    ],
    ids=["garbled", "cut"],
)
async def test_a_200_with_a_broken_body_is_retried_with_backoff(
    server: FakeOpenAIServer, sleeps: list[float], broken: Reply
) -> None:
    server.script(CHAT, broken, Reply(body=completion_body("whole")))
    async with make_backend(server) as backend:
        result = await chat(backend)
    assert result.text == "whole"
    assert len(server.requests_to(CHAT)) == 2
    assert len(sleeps) == 1  # one backoff wait, as for a dropped connection


async def test_a_200_that_never_parses_gives_up_after_max_retries(
    server: FakeOpenAIServer, sleeps: list[float]
) -> None:
    server.always(CHAT, Reply(body='{"id": "cmpl-1", "choices": [{"mess'))
    async with make_backend(server, max_retries=2) as backend:
        with pytest.raises(BackendError) as exc:
            await chat(backend)
    assert len(server.requests_to(CHAT)) == 3
    message = assert_one_line(exc)
    assert "200" in message and "not valid JSON" in message and "gave up after 3" in message
    assert exc.value.transient  # server trouble, not a configuration to fix


async def test_persistent_5xx_gives_up_after_max_retries(server: FakeOpenAIServer) -> None:
    server.always(CHAT, Reply(500, error_body("CUDA out of memory", 500)))
    async with make_backend(server, max_retries=3) as backend:
        with pytest.raises(BackendError) as exc:
            await chat(backend)
    assert len(server.requests_to(CHAT)) == 4
    message = assert_one_line(exc)
    assert server.url + CHAT in message
    assert "HTTP 500" in message and "CUDA out of memory" in message


async def test_persistent_timeout_gives_up_naming_the_timeout(server: FakeOpenAIServer) -> None:
    server.always(CHAT, Reply(body=completion_body(), delay=5.0))
    async with make_backend(server, timeout=0.1, max_retries=1) as backend:
        with pytest.raises(BackendError) as exc:
            await chat(backend)
    assert len(server.requests_to(CHAT)) == 2
    assert "within 0.1s" in assert_one_line(exc)


async def test_connection_refused_names_the_url() -> None:
    url = f"http://127.0.0.1:{unused_port()}"
    async with OpenAIBackend(base_url=url, model="m", max_retries=1, backoff_base=0.01) as backend:
        with pytest.raises(BackendError) as exc:
            await chat(backend)
    message = assert_one_line(exc)
    assert message.startswith(f"cannot reach OpenAI-compatible server at {url}/v1")
    assert "connection refused" in message


# -- errors that are not retried -----------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "server_message"),
    [
        (404, "The model `test-model` does not exist."),  # vLLM, OpenAI
        (400, 'model "test-model" not found, try pulling it first'),  # Ollama-style
    ],
)
async def test_unknown_model_lists_the_available_models(
    server: FakeOpenAIServer, status: int, server_message: str
) -> None:
    server.script(CHAT, Reply(status, error_body(server_message, status)))
    server.script(MODELS, Reply(body=models_body("qwen2.5-7b", "llama-3-8b")))
    async with make_backend(server) as backend:
        with pytest.raises(BackendError) as exc:
            await chat(backend)
    message = assert_one_line(exc)
    assert "'test-model' not found" in message
    assert "qwen2.5-7b, llama-3-8b" in message
    assert len(server.requests_to(CHAT)) == 1


async def test_unknown_model_without_model_list_still_names_the_model(
    server: FakeOpenAIServer,
) -> None:
    server.script(CHAT, Reply(404, error_body("The model `test-model` does not exist.", 404)))
    async with make_backend(server) as backend:  # /v1/models answers 404 too
        with pytest.raises(BackendError) as exc:
            await chat(backend)
    message = assert_one_line(exc)
    assert "'test-model' not found" in message and "--model" in message


async def test_unrelated_400_fails_at_once_with_the_server_message(
    server: FakeOpenAIServer,
) -> None:
    too_long = "This model's maximum context length is 4096 tokens. However, you requested 5000."
    server.script(CHAT, Reply(400, error_body(too_long)))
    async with make_backend(server) as backend:
        with pytest.raises(BackendError) as exc:
            await chat(backend)
    assert len(server.requests_to(CHAT)) == 1
    assert server.requests_to(MODELS) == []
    message = assert_one_line(exc)
    assert "HTTP 400" in message and "maximum context length is 4096" in message


@pytest.mark.parametrize("status", [401, 403])
async def test_rejected_api_key_says_so(server: FakeOpenAIServer, status: int) -> None:
    server.script(CHAT, Reply(status, error_body("Incorrect API key provided", status)))
    async with make_backend(server, api_key="wrong") as backend:
        with pytest.raises(BackendError) as exc:
            await chat(backend)
    assert "server rejected the API key" in assert_one_line(exc)
    assert len(server.requests_to(CHAT)) == 1


# -- model and context-window discovery ----------------------------------------------------


async def test_model_and_window_are_discovered_from_the_model_list(
    server: FakeOpenAIServer,
) -> None:
    server.script(MODELS, Reply(body=models_body("served-model", max_model_len=32768)))
    server.always(CHAT, Reply(body=completion_body(model="served-model")))
    async with make_backend(server, model=None) as backend:
        assert backend.context_window is None  # nothing fetched until asked
        results = await asyncio.gather(*(chat(backend) for _ in range(3)))
        assert backend.context_window == 32768
    assert [r.model for r in results] == ["served-model"] * 3
    assert {r.body["model"] for r in server.requests_to(CHAT)} == {"served-model"}
    assert len(server.requests_to(MODELS)) == 1  # concurrent first calls share one lookup


async def test_llama_cpp_training_context_is_used_as_window(server: FakeOpenAIServer) -> None:
    server.script(MODELS, Reply(body=models_body("model.gguf", meta={"n_ctx_train": 8192})))
    async with make_backend(server, model=None) as backend:
        await backend.discover()
        assert (backend.model, backend.context_window) == ("model.gguf", 8192)


async def test_window_given_to_the_constructor_wins(server: FakeOpenAIServer) -> None:
    server.script(MODELS, Reply(body=models_body("test-model", max_model_len=32768)))
    async with make_backend(server, context_window=4096) as backend:
        await backend.discover()
        assert backend.context_window == 4096


async def test_window_is_taken_from_the_chosen_models_card(server: FakeOpenAIServer) -> None:
    cards = {
        "data": [
            {"id": "other", "max_model_len": 2048},
            {"id": "test-model", "max_model_len": 8192},
        ]
    }
    server.script(MODELS, Reply(body=cards))
    async with make_backend(server) as backend:
        await backend.discover()
        assert backend.context_window == 8192


async def test_discover_tolerates_missing_model_list_when_model_is_known(
    server: FakeOpenAIServer,
) -> None:
    async with make_backend(server) as backend:  # /v1/models answers 404
        await backend.discover()
        assert (backend.model, backend.context_window) == ("test-model", None)


@pytest.fixture
def warned(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    """``warned()``: the warnings longread has logged so far in the test. The handler sits on
    the ``longread`` logger itself: an in-process CLI run earlier in the session stops that
    logger propagating to the root, where caplog listens."""
    logger = logging.getLogger("longread")
    logger.addHandler(caplog.handler)

    def warnings() -> list[str]:
        # A propagating logger hands each record to the handler twice: count it once.
        records = {id(r): r for r in caplog.records if r.levelno == logging.WARNING}
        return [r.getMessage() for r in records.values()]

    try:
        yield warnings
    finally:
        logger.removeHandler(caplog.handler)


TRUNCATED_MODELS = json.dumps(models_body("test-model", max_model_len=4096))[:40]


async def test_a_truncated_model_list_is_asked_for_again(
    server: FakeOpenAIServer, sleeps: list[float], warned: Callable[[], list[str]]
) -> None:
    """A 200 whose JSON is cut short (a proxy, a server under strain) is retried as a chat
    reply is: the window it then reports is the one prompts are checked against."""
    server.script(
        MODELS,
        Reply(body=TRUNCATED_MODELS),
        Reply(body=models_body("test-model", max_model_len=4096)),
    )
    async with make_backend(server) as backend:
        await backend.discover()
        assert backend.context_window == 4096
    assert len(server.requests_to(MODELS)) == 2
    assert len(sleeps) == 1  # one backoff wait, as for a chat reply
    assert warned() == []


async def test_a_model_list_that_never_parses_warns_once_naming_the_flag(
    server: FakeOpenAIServer, sleeps: list[float], warned: Callable[[], list[str]]
) -> None:
    server.always(MODELS, Reply(body=TRUNCATED_MODELS))
    server.always(CHAT, Reply(body=completion_body()))
    async with make_backend(server, max_retries=2) as backend:
        await backend.discover()
        await backend.discover()  # discovery is done once: no second warning
        assert backend.context_window is None
        assert (await chat(backend)).text == "hello"  # the run goes on, warned
    assert len(server.requests_to(MODELS)) == 3  # the --retries policy: 1 + 2 retries
    (warning,) = warned()
    assert "context window" in warning and "unknown" in warning
    assert "--context-window" in warning and "not valid JSON" in warning


async def test_a_model_list_without_a_window_warns(
    server: FakeOpenAIServer, warned: Callable[[], list[str]]
) -> None:
    server.script(MODELS, Reply(body=models_body("test-model")))  # OpenAI's cards: no length
    async with make_backend(server) as backend:
        await backend.discover()
    (warning,) = warned()
    assert "--context-window" in warning


async def test_a_given_window_needs_no_warning(
    server: FakeOpenAIServer, sleeps: list[float], warned: Callable[[], list[str]]
) -> None:
    server.always(MODELS, Reply(body=TRUNCATED_MODELS))
    async with make_backend(server, context_window=4096, max_retries=1) as backend:
        await backend.discover()
        assert backend.context_window == 4096
    assert warned() == []


async def test_a_model_list_that_never_parses_without_a_model_asks_for_one(
    server: FakeOpenAIServer, sleeps: list[float]
) -> None:
    server.always(MODELS, Reply(body=TRUNCATED_MODELS))
    async with make_backend(server, model=None, max_retries=1) as backend:
        with pytest.raises(BackendError) as exc:
            await backend.discover()
    message = assert_one_line(exc)
    assert "not valid JSON" in message and "--model" in message
    assert exc.value.transient


async def test_no_model_and_no_model_list_asks_for_model(server: FakeOpenAIServer) -> None:
    async with make_backend(server, model=None) as backend:
        with pytest.raises(BackendError) as exc:
            await chat(backend)
    assert "--model" in assert_one_line(exc)
    assert server.requests_to(CHAT) == []


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_base_url_with_or_without_v1_reaches_the_same_endpoint(
    server: FakeOpenAIServer, suffix: str
) -> None:
    server.script(CHAT, Reply(body=completion_body()))
    async with make_backend(server, base_url=server.url + suffix) as backend:
        assert backend.base_url == server.url + "/v1"
        await chat(backend)
    assert len(server.requests_to(CHAT)) == 1


def test_base_url_without_scheme_gets_http() -> None:
    assert OpenAIBackend(base_url="localhost:8000").base_url == "http://localhost:8000/v1"


async def test_environment_supplies_url_and_key(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server.script(CHAT, Reply(body=completion_body()))
    async with OpenAIBackend(model="test-model") as backend:
        await chat(backend)
    assert server.requests_to(CHAT)[0].headers["authorization"] == "Bearer sk-env"


def test_missing_url_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UsageError, match="--base-url or set OPENAI_BASE_URL"):
        OpenAIBackend(model="m")


async def test_concurrency_is_limited_per_backend(server: FakeOpenAIServer) -> None:
    server.always(CHAT, Reply(body=completion_body(), delay=0.3))
    async with make_backend(server, max_concurrency=2) as backend:
        results = await asyncio.gather(*(chat(backend) for _ in range(5)))
    assert len(results) == 5
    assert len(server.requests_to(CHAT)) == 5
    assert server.max_in_flight == 2


# -- silent truncation ---------------------------------------------------------------------


def completion_with_prompt_tokens(prompt_tokens: int) -> Completion:
    return Completion("x", "stop", prompt_tokens, 1, 0.1)


def test_truncated_prompt_is_reported() -> None:
    with pytest.raises(BackendError, match="2048 prompt tokens but the prompt has about 8000"):
        check_prompt_truncation(completion_with_prompt_tokens(2048), expected_tokens=8000)


@pytest.mark.parametrize("reported", [8000, 7000, 9000, 0])
def test_plausible_or_unknown_prompt_counts_pass(reported: int) -> None:
    # Within the tolerance (tokenizers differ), above the estimate, or not reported at all.
    check_prompt_truncation(completion_with_prompt_tokens(reported), expected_tokens=8000)
