"""Batched decoding on the embedded model (``LlamaCppBackend(parallel=N)``, llamacpp_batch).

Every batched result is checked against the serial path (one call at a time, llama-cpp-python's
own generation) on the same prompt: the batch must not change what a call gets.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longread.errors import UsageError
from longread.llm.base import Completion, Message, SamplingParams
from longread.llm.llamacpp import LlamaCppBackend
from longread.llm.memory_adapter import bundled_memory_adapter

WINDOW = 1024  # per call; keeps each test context's KV cache small


def ask(content: str) -> list[Message]:
    return [{"role": "user", "content": content}]


# Calls that end in different ways: on <|im_end|>, on the token cap, on a stop string (cut or
# kept), on a loop (the model as released writes "a" to the cap); one sampled with a seed.
# More calls than seats, so one waits for a freed sequence.
CALLS: list[tuple[list[Message], SamplingParams]] = [
    (ask("What is the capital of France? Answer with one word."), SamplingParams(max_tokens=24)),
    (ask("Write one sentence about the sea."), SamplingParams(max_tokens=9)),
    (ask("List three colours, one per line."), SamplingParams(max_tokens=40, stop=("\n",))),
    # the stop string kept in the text (rememr1's format stop)
    (ask("Name two fruits."), SamplingParams(max_tokens=40, stop=(" apple",), include_stop=True)),
    (ask("Tell me about dogs."), SamplingParams(max_tokens=30, temperature=0.8, seed=7)),
    # rememr1's loop stop
    (
        ask("Write the letter a 300 times: " + "a" * 36),
        SamplingParams(max_tokens=120, loop_stop=True),
    ),
]
PARALLEL = 3


@pytest.fixture(scope="module")
def serial() -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend(n_ctx=WINDOW, base_model=True)  # the engine, not the adapter
    yield backend
    asyncio.run(backend.aclose())


@pytest.fixture(scope="module")
def batched() -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend(n_ctx=WINDOW, parallel=PARALLEL, base_model=True)
    yield backend
    asyncio.run(backend.aclose())


def recorded(params: SamplingParams) -> SamplingParams:
    return SamplingParams(**{**params.__dict__, "record_tokens": True})


def one_at_a_time(backend: LlamaCppBackend, calls: list[tuple[Any, SamplingParams]]) -> list:
    """Each call read from an empty context. The serial path reuses the prompt prefix cached by
    whatever ran before (another test, in a random order): its prompt is then read in other
    batch shapes, and logprobs move by up to 0.01, so the reference would depend on the order."""

    async def run() -> list[Completion]:
        completions = []
        for messages, params in calls:
            backend.llama.reset()
            completions.append(await backend.chat(messages, params))
        return completions

    return asyncio.run(run())


def all_at_once(backend: LlamaCppBackend, calls: list[tuple[Any, SamplingParams]]) -> list:
    async def run() -> list[Completion]:
        return list(await asyncio.gather(*(backend.chat(m, p) for m, p in calls)))

    return asyncio.run(run())


@pytest.mark.model
@pytest.mark.parametrize("record", [True, False], ids=["recorded", "plain"])
def test_concurrent_calls_get_what_the_serial_path_gives_each(
    serial: LlamaCppBackend, batched: LlamaCppBackend, record: bool
) -> None:
    calls = [(m, recorded(p) if record else p) for m, p in CALLS]
    expected = one_at_a_time(serial, calls)
    got = all_at_once(batched, calls)
    assert [c.finish_reason for c in expected] == [
        "stop",
        "length",
        "stop",
        "stop",
        "length",
        "loop",
    ]
    assert expected[3].text.endswith(" apple")  # the kept stop string
    for want, have in zip(expected, got, strict=True):
        assert (have.text, have.finish_reason) == (want.text, want.finish_reason)
        assert (have.prompt_tokens, have.completion_tokens) == (
            want.prompt_tokens,
            want.completion_tokens,
        )
        assert have.token_ids == want.token_ids
        assert have.prompt_ids == want.prompt_ids
        if record:
            assert have.logprobs == pytest.approx(want.logprobs, abs=1e-4)
        else:
            assert have.logprobs is None
    assert batched._scheduler is not None
    assert all(batched._scheduler.kv_cells(seat) == 0 for seat in range(PARALLEL))


@pytest.mark.model
def test_recorded_ids_spell_the_text(batched: LlamaCppBackend) -> None:
    got = all_at_once(batched, [(m, recorded(p)) for m, p in CALLS])
    llama = batched.llama
    for completion in got:
        assert completion.token_ids is not None and completion.prompt_ids is not None
        assert len(completion.token_ids) == len(completion.logprobs or []) > 0
        spelled = llama.detokenize(completion.token_ids, completion.prompt_ids).decode()
        if completion.finish_reason == "length":
            assert spelled == completion.text
        else:  # cut at a stop string (or kept to its end) or a loop, or ended on <|im_end|>
            assert spelled.startswith(completion.text)
            ended_on_eos = completion.token_ids[-1] == llama.token_eos()
            kept_stop = spelled == completion.text and completion.text.endswith(" apple")
            looped = completion.finish_reason == "loop"  # cut inside its last token, or after
            assert len(spelled) > len(completion.text) or ended_on_eos or kept_stop or looped


@pytest.mark.model
def test_a_cancelled_call_leaves_the_batch_and_frees_its_sequence(
    serial: LlamaCppBackend, batched: LlamaCppBackend
) -> None:
    long = SamplingParams(max_tokens=200, record_tokens=True)
    other = (ask("Write a long story about a lighthouse keeper."), long)
    (expected,) = one_at_a_time(serial, [other])

    async def run() -> Completion:
        victim = asyncio.ensure_future(batched.chat(ask("Write a long poem about rain."), long))
        survivor = asyncio.ensure_future(batched.chat(*other))
        scheduler = await asyncio.to_thread(batched._start_scheduler)
        while len(scheduler._active) < 2:
            await asyncio.sleep(0.005)
        seat = next(s.seat for s in scheduler._active if "rain" in s.call.messages[0]["content"])
        victim.cancel()
        with pytest.raises(asyncio.CancelledError):
            await victim
        while any(s.seat == seat for s in list(scheduler._active)):
            await asyncio.sleep(0.005)
        assert scheduler.kv_cells(seat) == 0
        return await survivor

    got = asyncio.run(run())
    assert (got.text, got.token_ids) == (expected.text, expected.token_ids)
    assert got.logprobs == pytest.approx(expected.logprobs, abs=1e-4)


@pytest.mark.model
@pytest.mark.skipif(bundled_memory_adapter() is None, reason="this build ships no adapter")
def test_the_adapter_is_applied_in_the_batched_path(serial: LlamaCppBackend) -> None:
    call = (CALLS[1][0], recorded(CALLS[1][1]))
    (base,) = one_at_a_time(serial, [call])
    with_adapter = LlamaCppBackend(n_ctx=WINDOW, adapter="memory")
    batched_adapter = LlamaCppBackend(n_ctx=WINDOW, adapter="memory", parallel=2)
    try:
        (want,) = one_at_a_time(with_adapter, [call])
        have, again = all_at_once(batched_adapter, [call, call])
    finally:
        asyncio.run(with_adapter.aclose())
        asyncio.run(batched_adapter.aclose())
    assert want.logprobs != pytest.approx(base.logprobs, abs=1e-3)  # the adapter changes it
    # With the adapter, batched decode steps (two sequences a step) are not bit-identical to
    # serial ones on AVX-512 machines: llama.cpp picks other kernels for the LoRA matmuls by
    # batch size (seen: 0.04 apart, where the base model's logprobs are 0.83 from the
    # adapter's). So: the same tokens, and ten times closer to the adapter's than the base is
    # (over the shorter reply: the base model's may be another length).
    adapter_effect = max(abs(a - b) for a, b in zip(want.logprobs, base.logprobs, strict=False))
    for completion in (have, again):
        assert completion.token_ids == want.token_ids
        assert completion.logprobs == pytest.approx(want.logprobs, abs=adapter_effect / 10)


@pytest.mark.model
def test_a_bug_in_the_worker_reaches_every_caller(
    batched: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody waits forever on a worker that died; the next calls get a fresh one."""

    def broken(*args: object) -> None:
        raise RuntimeError("bug")

    with monkeypatch.context() as patch:
        patch.setattr("longread.llm.llamacpp_chat.Stopping.add", broken)

        async def run() -> list[BaseException | Completion]:
            calls = (batched.chat(m, p) for m, p in CALLS)
            return list(await asyncio.gather(*calls, return_exceptions=True))

        failed = asyncio.run(run())
    assert all(isinstance(f, RuntimeError) for f in failed)
    assert [c.text for c in all_at_once(batched, CALLS[:2])] == [
        c.text for c in one_at_a_time(batched, CALLS[:2])
    ]


@pytest.mark.model
def test_every_model_step_runs_on_one_thread(
    serial: LlamaCppBackend, batched: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp's OpenMP team belongs to the thread that decodes: once a second thread has
    decoded, libgomp sleeps at its barriers and a step took 3-4x as long on 2 cores, so both
    paths, however called, must decode on the one compute thread."""
    import llama_cpp
    import llama_cpp.llama_cpp as bindings

    threads: set[int] = set()
    decode = bindings.llama_decode

    def watched(*args: Any) -> int:
        threads.add(threading.get_ident())
        return int(decode(*args))

    monkeypatch.setattr(bindings, "llama_decode", watched)  # what Llama.eval calls
    monkeypatch.setattr(llama_cpp, "llama_decode", watched)  # what the batch scheduler calls

    async def run() -> None:
        await asyncio.gather(*(serial.chat(m, p) for m, p in CALLS[:2]))
        await asyncio.gather(*(batched.chat(m, p) for m, p in CALLS))

    asyncio.run(run())
    for _ in range(2):  # each in a fresh event loop, as separate `ask` runs would be
        asyncio.run(serial.chat(*CALLS[0]))
    assert len(threads) == 1 and threading.get_ident() not in threads


@pytest.mark.model
def test_closing_waits_for_a_cancelled_calls_sequence() -> None:
    backend = LlamaCppBackend(n_ctx=512, parallel=2)

    async def run() -> None:
        call = asyncio.ensure_future(backend.chat(ask("Count to a thousand."), SamplingParams()))
        scheduler = await asyncio.to_thread(backend._start_scheduler)
        while not scheduler._active:
            await asyncio.sleep(0.005)
        worker = scheduler._worker
        call.cancel()
        await backend.aclose()
        assert worker is not None and worker.done()
        assert not scheduler._active and backend._llama is None

    asyncio.run(run())


@pytest.mark.parametrize("parallel", [0, 65])
def test_parallel_out_of_range_is_refused(tmp_path: Path, parallel: int) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF not loaded")
    with pytest.raises(UsageError, match="parallel must be between 1 and 64"):
        LlamaCppBackend(model, parallel=parallel)


def test_parallel_with_a_server_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from longread.llm.factory import BackendSettings, make_backend

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UsageError, match="--parallel batches calls on the embedded model"):
        BackendSettings(base_url="http://127.0.0.1:9/v1", parallel=2).resolved_backend()
    backend = make_backend(BackendSettings(parallel=2))  # the embedded model: accepted
    assert isinstance(backend, LlamaCppBackend) and backend._parallel == 2


def test_the_parallel_flag_reaches_the_saved_run_config() -> None:
    from longread.eval.store import backend_record
    from longread.llm.factory import BackendSettings

    assert backend_record(BackendSettings(parallel=4))["parallel"] == 4
    assert backend_record(BackendSettings())["parallel"] is None


def test_eval_keeps_no_more_samples_in_flight_than_the_model_works_on() -> None:
    """`eval run --concurrency N` on the embedded model: as many samples as it decodes calls
    at once (one, or --parallel's N); more would only take turns, each sample's seconds then
    counting the others' calls. A server's backend keeps what was asked."""
    from longread.cli.eval import samples_at_once
    from longread.llm.openai import OpenAIBackend

    assert samples_at_once(LlamaCppBackend(), 4, explicit=False) == (1, None)
    kept, note = samples_at_once(LlamaCppBackend(), 8, explicit=True)
    assert kept == 1 and note is not None and "--parallel" in note
    assert samples_at_once(LlamaCppBackend(parallel=3), 8, explicit=False) == (3, None)
    assert samples_at_once(LlamaCppBackend(parallel=3), 2, explicit=True) == (2, None)
    server = OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="m")
    assert samples_at_once(server, 8, explicit=True) == (8, None)
