"""ServerTokenizer counting many texts against a real HTTP server on 127.0.0.1: the same counts
as one request per text, in fewer requests (a server that takes a list, or llama.cpp's mixed
texts and ids) or several at once (one that does not), and never a blocked event loop while a
document is chunked."""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest

from longread.agents.base import CallContext
from longread.errors import BackendError
from longread.llm.base import SamplingParams
from longread.text import ServerTokenizer, achunk_text, chunk_text
from longread.text._server_tokenizer import BATCH_TEXTS, map_concurrently
from longread.text.chunking import _GUESSED_CHUNKS

from .scripted import ScriptedBackend
from .text_helpers import document, server_ids

TEXTS = [*document(120, seed=2).split("\n\n"), "", " ", "Ünïcödé 😀 42."]
STYLES = ["vllm", "sglang", "llama.cpp", "llama-cpp-python"]
BATCHING = ("sglang", "llama.cpp")  # many texts to a request


class OneByOne:
    """A tokenizer without ``count_many``: what chunking did before, one request a paragraph."""

    def __init__(self, tokenizer: ServerTokenizer) -> None:
        self.name = tokenizer.name
        self.encode = tokenizer.encode
        self.count = tokenizer.count


@pytest.mark.parametrize("style", STYLES)
def test_count_many_gives_each_texts_own_count(serve, style):
    server = serve(style)
    with ServerTokenizer(server.url + "/v1") as tok:
        assert tok.count_many(TEXTS) == [len(server_ids(t)) for t in TEXTS]
        assert tok.encode_many(TEXTS) == [server_ids(t) for t in TEXTS]
        assert tok.count_many([]) == []
        assert tok.batches is (style in BATCHING)


def test_a_server_that_takes_a_list_gets_many_texts_per_request(serve):
    server = serve("sglang")
    texts = [t for t in TEXTS if t] * 3  # more than one batch
    with ServerTokenizer(server.url) as tok:
        assert tok.count_many(texts[:2]) == [len(server_ids(t)) for t in texts[:2]]
        # Learning that the server takes lists: a probe, the check that a list answers what
        # single requests do, one batch.
        assert len(server.requests) <= 10
        probed = len(server.requests)
        assert tok.count_many(texts) == [len(server_ids(t)) for t in texts]
    batches = [body["prompt"] for _, body in server.requests[probed:]]
    assert len(batches) == math.ceil(len(texts) / BATCH_TEXTS) < len(texts)
    # The batches go out several at a time, and arrive in any order.
    assert sorted(t for batch in batches for t in batch) == sorted(texts)


def test_llama_cpp_gets_many_texts_per_request_between_separator_ids(serve):
    server = serve("llama.cpp")
    texts = [t for t in TEXTS if t] * 3  # more than one batch
    with ServerTokenizer(server.url) as tok:
        tok.count_many(texts[:2])
        probed = len(server.requests)
        assert tok.count_many(texts) == [len(server_ids(t)) for t in texts]
    contents = [body["content"] for _, body in server.requests[probed:]]
    assert len(contents) == math.ceil(len(texts) / BATCH_TEXTS) < len(texts)
    # Each request: the texts, one separator id between each two.
    assert all(c[0::2] == [t for t in c if isinstance(t, str)] for c in contents)
    assert sorted(t for c in contents for t in c[0::2]) == sorted(texts)


def test_a_text_that_holds_the_separator_is_still_counted_alone(serve):
    # BEL tokenises as the separator id: that batch's answer cannot be split for sure, so its
    # texts are asked for one at a time, and every count is still the text's own.
    server = serve("llama.cpp")
    texts = ["One text.", "A bell \x07 rings, twice \x07.", "Three."]
    with ServerTokenizer(server.url) as tok:
        assert tok.count_many(texts) == [len(server_ids(t)) for t in texts]
        assert tok.batches


def test_a_server_without_lists_gets_requests_in_parallel_within_the_bound(serve):
    server = serve("vllm", delay=0.02)
    texts = [t for t in TEXTS if t]
    with ServerTokenizer(server.url, concurrency=4) as tok:
        tok.count_many(["probe", "lists"])  # vLLM refuses a list of prompts
        before = len(server.requests)
        assert tok.count_many(texts) == [len(server_ids(t)) for t in texts]
    assert len(server.requests) - before == len(texts)  # no batches: one request a text
    assert server.most_in_flight == 4


def test_a_failed_request_fails_the_whole_count(serve):
    server = serve("llama.cpp")
    with ServerTokenizer(server.url) as tok:
        tok.count("probe")
        server.stop()
        with pytest.raises(BackendError, match="tokenize request") as gone:
            tok.count_many(TEXTS)
    assert gone.value.transient


@pytest.mark.parametrize("style", ["sglang", "llama.cpp"])
def test_a_dropped_connection_is_asked_again(serve, style):
    """A server that resets connections now and then (as llama-cpp-python's did under the
    integration tests) costs retries, not the run: every text still gets its own count."""
    server = serve(style)
    texts = [t for t in TEXTS if t]

    def requests_for_the_texts(drop: int) -> int:
        with ServerTokenizer(server.url, concurrency=4) as tok:
            tok.count("probe")
            sent = len(server.requests)
            server.drop = drop
            assert tok.count_many(texts) == [len(server_ids(t)) for t in texts]
        assert server.drop == 0
        return len(server.requests) - sent

    assert requests_for_the_texts(drop=3) == requests_for_the_texts(drop=0) + 3


@pytest.mark.parametrize("style", ["sglang", "llama.cpp"])
def test_chunks_are_those_of_one_request_per_paragraph_in_fewer_requests(serve, style):
    text = document(400, seed=6)
    server = serve(style)
    with ServerTokenizer(server.url) as tok:
        fast = chunk_text(text, tok, max_tokens=1500)
        batched = len(server.requests)
        slow = chunk_text(text, OneByOne(tok), max_tokens=1500)
    one_by_one = len(server.requests) - batched
    assert fast == slow
    assert all(c.tokens == len(server_ids(c.text)) <= 1500 for c in fast)
    # The paragraphs in a few batches; what is left is a count a chunk.
    assert batched < one_by_one / 4


def test_a_long_document_costs_far_fewer_requests_than_chunks(serve):
    """``ask`` against llama.cpp's /tokenize sent a request a paragraph, and one a chunk
    (27,037 for a 2M-token document). Now the paragraphs go ``BATCH_TEXTS`` to a request, and
    each chunk's count comes with the next chunks' guesses, ``_GUESSED_CHUNKS`` a request."""
    server = serve("llama.cpp")
    text = document(3000, seed=3)
    paragraphs = text.count("\n\n") + 1
    with ServerTokenizer(server.url) as tok:
        chunks = chunk_text(text, tok, max_tokens=2000)
    assert all(c.tokens == len(server_ids(c.text)) <= 2000 for c in chunks)
    sent = len(server.requests)
    expected = math.ceil(paragraphs / BATCH_TEXTS) + math.ceil(len(chunks) / _GUESSED_CHUNKS)
    assert sent <= 1.5 * expected + 8  # 8: probing the server
    assert sent < len(chunks) < paragraphs / 25


async def test_an_agents_prompt_of_several_messages_is_one_request(serve):
    server = serve("llama.cpp")
    with ServerTokenizer(server.url) as tok:
        tok.count_many(["learn", "batching"])
        before = len(server.requests)
        ctx = CallContext(ScriptedBackend(["a reply"]), tok)
        messages = [
            {"role": "system", "content": "You read long documents."},
            {"role": "user", "content": "Read this section and keep notes."},
        ]
        counted = await ctx.count_prompt(messages)
    assert counted == sum(len(server_ids(m["content"])) for m in messages)
    assert len(server.requests) - before == 1


async def test_the_event_loop_runs_while_a_document_is_counted(serve):
    server = serve("llama.cpp")
    with ServerTokenizer(server.url) as tok:
        tok.count("probe")
        # Every tokenize request waits until a coroutine on the loop has run: a loop blocked
        # by the counting would leave the request waiting for good.
        loop_ran = threading.Event()
        answered_after_loop_ran: list[bool] = []
        original = tok._post

        def post(style: Any, texts: Any) -> Any:
            answered_after_loop_ran.append(loop_ran.wait(timeout=10))
            return original(style, texts)

        tok._post = post  # type: ignore[method-assign]
        chunking = asyncio.create_task(achunk_text(document(60, seed=1), tok, max_tokens=200))
        await asyncio.sleep(0)
        loop_ran.set()
        chunks = await chunking
    assert chunks and all(c.tokens == len(server_ids(c.text)) for c in chunks)
    assert answered_after_loop_ran and all(answered_after_loop_ran)


async def test_an_agents_prompt_count_leaves_the_event_loop_free(serve):
    # After each call an agent counts the prompt it sent (the truncation check); with a server
    # tokenizer that is a round trip, which must not stall the other runs of an evaluation.
    server = serve("llama.cpp")
    with ServerTokenizer(server.url) as tok:
        tok.count("probe")
        loop_ran = threading.Event()
        answered_after_loop_ran: list[bool] = []
        original = tok._post

        def post(style: Any, texts: Any) -> Any:
            answered_after_loop_ran.append(loop_ran.wait(timeout=10))
            return original(style, texts)

        tok._post = post  # type: ignore[method-assign]
        ctx = CallContext(ScriptedBackend(["a reply"]), tok)
        messages = [{"role": "user", "content": "Read this section and keep notes."}]
        call = asyncio.create_task(ctx.call("final", 0, messages, SamplingParams(max_tokens=8)))
        await asyncio.sleep(0.05)
        loop_ran.set()
        step = await call
    assert step.reply == "a reply"
    assert answered_after_loop_ran and all(answered_after_loop_ran)


def test_map_concurrently_keeps_order_and_raises_the_first_failure():
    assert map_concurrently(lambda x: x * x, list(range(50)), limit=8) == [x * x for x in range(50)]
    started: list[int] = []

    def work(x: int) -> int:
        started.append(x)
        if x == 3:
            raise ValueError("three")
        return x

    with pytest.raises(ValueError, match="three"):
        map_concurrently(work, list(range(1000)), limit=4)
    assert len(started) < 1000  # nothing new starts after a failure
