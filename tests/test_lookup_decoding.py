"""Prompt-lookup decoding (``llm.lookup_decoding``): the drafts, and greedy calls on the real
embedded model checked against a second model instance that reads the reply one id at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from longread.errors import UsageError
from longread.llm.base import Completion, Message, SamplingParams
from longread.llm.factory import BackendSettings
from longread.llm.llamacpp import LlamaCppBackend
from longread.llm.lookup_decoding import propose

# -- the drafts ----------------------------------------------------------------------------


def test_the_draft_is_what_followed_the_suffix_earlier() -> None:
    history = [5, 6, 7, 8, 9, 1, 2, 6, 7]
    assert propose(history, draft=3) == [8, 9, 1]


def test_a_longer_match_wins_over_a_later_shorter_one() -> None:
    # "3 4" recurs at 0 (followed by 5) and "4" alone later; the suffix 2-3-4 matches at 1.
    history = [2, 3, 4, 5, 9, 4, 7, 2, 3, 4]
    assert propose(history, max_ngram=3, min_ngram=1, draft=2) == [5, 9]


def test_the_latest_occurrence_gives_the_draft() -> None:
    history = [1, 2, 3, 1, 2, 4, 1, 2]
    assert propose(history, draft=1) == [4]


def test_no_draft_without_a_recurring_ngram_of_the_least_length() -> None:
    assert propose([1, 2, 3, 4]) == []
    # Only the last id recurs: too weak with the default minimum of two ids...
    assert propose([7, 1, 2, 7]) == []
    # ...enough when one id is allowed.
    assert propose([7, 1, 2, 7], min_ngram=1, draft=2) == [1, 2]


def test_the_draft_stops_at_the_end_of_the_history() -> None:
    assert propose([4, 5, 6, 4, 5], draft=10) == [6, 4, 5]


# -- settings ------------------------------------------------------------------------------


def test_a_run_config_records_lookup_decoding() -> None:
    from longread.eval.provenance import backend_record

    assert backend_record(BackendSettings(lookup_decoding=True))["lookup_decoding"] is True
    assert backend_record(BackendSettings(lookup_decoding=False))["lookup_decoding"] is False


def test_lookup_decoding_is_on_by_default_only_where_it_can_act(monkeypatch) -> None:
    """Since stop 78 the embedded model decodes greedy calls with lookup drafts unless told
    otherwise; batched decoding and a server never do, and neither refuses the default."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert BackendSettings().resolved_lookup_decoding() is True
    assert BackendSettings(lookup_decoding=False).resolved_lookup_decoding() is False
    assert BackendSettings(parallel=2).resolved_lookup_decoding() is False
    served = BackendSettings(base_url="http://127.0.0.1:1/v1")
    assert served.resolved_lookup_decoding() is False


@pytest.mark.parametrize(
    ("flags", "expected"),
    [([], None), (["--lookup-decoding"], True), (["--lookup-decoding", "on"], True),
     (["--lookup-decoding", "off"], False)],
)  # fmt: skip
def test_the_flag_takes_on_and_off_and_alone_means_on(flags, expected) -> None:
    import click
    from click.testing import CliRunner

    from longread.cli.options import backend_options, backend_settings

    @click.command()
    @backend_options
    def show(**options: Any) -> None:
        click.echo(repr(backend_settings(options).lookup_decoding))

    result = CliRunner().invoke(show, flags)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == repr(expected)


def test_a_run_resumes_only_decoding_the_way_it_began(tmp_path) -> None:
    """A folder made one token a step (every folder before stop 78) is refused with the flag
    that resumes it, since lookup decoding may flip a near-tie; a server's run is not compared."""
    from longread.eval.resume import check_resume

    def config(backend: dict[str, Any]) -> dict[str, Any]:
        return {"agent": "memagent", "agent_config": {}, "record_tokens": False,
                "data_hash": "d", "backend": backend}  # fmt: skip

    before = config({"backend": "llamacpp", "lookup_decoding": False})
    with pytest.raises(UsageError, match="without lookup decoding; resume with "
                       "--lookup-decoding off or pass a new --out folder"):  # fmt: skip
        check_resume(before, config({"backend": "llamacpp", "lookup_decoding": True}), tmp_path)
    older = config({"backend": "llamacpp"})  # from before the setting was recorded
    with pytest.raises(UsageError, match="--lookup-decoding off"):
        check_resume(older, config({"backend": "llamacpp", "lookup_decoding": True}), tmp_path)
    check_resume(before, config({"backend": "llamacpp", "lookup_decoding": False}), tmp_path)
    made_with = config({"backend": "llamacpp", "lookup_decoding": True})
    with pytest.raises(UsageError, match="with lookup decoding; resume with --lookup-decoding on"):
        check_resume(made_with, config({"backend": "llamacpp", "lookup_decoding": False}), tmp_path)
    served = config({"backend": "openai"})
    check_resume(served, config({"backend": "openai"}), tmp_path)


def test_lookup_decoding_is_refused_for_a_server_and_for_batched_calls() -> None:
    with pytest.raises(UsageError, match="embedded model"):
        BackendSettings(base_url="http://127.0.0.1:1/v1", lookup_decoding=True).resolved_backend()
    with pytest.raises(UsageError, match="one call at a time"):
        BackendSettings(parallel=2, lookup_decoding=True).resolved_backend()


# -- on the real model ---------------------------------------------------------------------

TEXT = (
    "The old lighthouse keeper wrote down the number of ships that passed the harbour every "
    "night, and on the longest night of the winter he counted forty-two ships before the "
    "morning came."
)
# A reply that copies: the draft has something to guess from.
COPY: list[Message] = [
    {"role": "user", "content": f"Repeat this text exactly, word for word: {TEXT}"}
]
# A reply that copies in part: some drafts are cut short and leave the cache.
ANSWER: list[Message] = [
    {
        "role": "user",
        "content": f"Text: {TEXT}\nQuestion: How many ships did the keeper count on the "
        "longest night? Answer in a full sentence.",
    }
]


@pytest.fixture(scope="module")
def backend() -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend(base_model=True, lookup_decoding=True)
    yield backend
    asyncio.run(backend.aclose())


def chat(backend: LlamaCppBackend, messages: list[Message] = COPY, **params: Any) -> Completion:
    params.setdefault("max_tokens", 64)
    return asyncio.run(backend.chat(messages, SamplingParams(**params)))


@pytest.fixture
def steps(backend: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of ids in each ``llama_decode`` step of the backend's context from now on,
    its cache emptied first (each test's calls start from nothing)."""
    llama = backend.llama
    llama.reset()
    counts: list[int] = []
    decode = llama._ctx.decode

    def counted(batch: Any) -> None:
        counts.append(batch.n_tokens())
        decode(batch)

    monkeypatch.setattr(llama._ctx, "decode", counted)
    return counts


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def reference_rows(model_path: Any, prompt: list[int], reply: list[int]) -> np.ndarray:
    """Log-softmax rows predicting each reply id, from another instance that reads the prompt
    and then the reply one id at a time (no drafts, no batched verification)."""
    import llama_cpp

    checker = llama_cpp.Llama(model_path=str(model_path), n_ctx=512, logits_all=True, verbose=False)
    try:
        checker.eval(prompt)
        for token in reply[:-1]:
            checker.eval([token])
        first = len(prompt) - 1
        return log_softmax(np.asarray(checker.scores[first : len(prompt) + len(reply) - 1]))
    finally:
        checker.close()


@pytest.mark.model
def test_a_copying_reply_takes_fewer_steps_than_ids(
    backend: LlamaCppBackend, steps: list[int]
) -> None:
    reply = chat(backend)
    assert "forty-two ships before the morning came" in reply.text  # it did copy
    # The prompt is one step (it fits one n_batch); the reply took far fewer steps than ids.
    assert len(steps) - 1 < reply.completion_tokens / 2


@pytest.mark.model
def test_a_reply_with_cut_drafts_is_the_greedy_one(
    backend: LlamaCppBackend, steps: list[int]
) -> None:
    reply = chat(backend, ANSWER, record_tokens=True)
    assert reply.prompt_ids is not None and reply.token_ids is not None
    assert reply.logprobs is not None
    assert "forty-two" in reply.text
    # Some drafted ids were decoded and then dropped: more ids decoded than kept.
    assert sum(steps[1:]) > len(reply.token_ids)
    rows = reference_rows(backend.model_path, reply.prompt_ids, reply.token_ids)
    ids = np.array(reply.token_ids)
    ordered = np.sort(rows, axis=1)
    # not a near-tie that rounding may flip: the batched kernels moved a margin of 0.39 nats
    # on an AVX2-only CPU (stop 74; 0.1 held on an AVX512 one)
    clear = ordered[:, -1] - ordered[:, -2] > 0.5
    assert clear.mean() > 0.7
    assert (rows.argmax(axis=1)[clear] == ids[clear]).all()
    # The logprobs come from rows whose KV cache held exactly the kept ids: a rejected draft
    # left behind would move them far more than the batched kernels' rounding (up to 0.07
    # nats on an AVX512 CPU, 0.24 on an AVX2-only one; most rows within 0.01).
    gaps = np.abs(np.array(reply.logprobs) - rows[np.arange(len(ids)), ids])
    assert gaps.max() < 0.4
    assert np.median(gaps) < 0.02


@pytest.mark.model
def test_the_cache_record_holds_what_was_kept(backend: LlamaCppBackend) -> None:
    backend.llama.reset()
    reply = chat(backend, ANSWER, record_tokens=True)
    assert reply.prompt_ids is not None and reply.token_ids is not None
    llama = backend.llama
    read = reply.prompt_ids + reply.token_ids
    # Every reply id but possibly the last was read; nothing drafted beyond them is recorded.
    assert len(read) - 1 <= llama.n_tokens <= len(read)
    assert llama.input_ids[: llama.n_tokens].tolist() == read[: llama.n_tokens]
    # The next call reuses that cache and still reads as a call from an empty one reads, up to
    # the kernels' rounding at a near-tie (a prompt read in two pieces runs other kernels: on
    # an AVX2-only CPU the last word differed); a draft left in the cache would derail it early.
    again = chat(backend, ANSWER)
    shared = next(
        (i for i, (a, b) in enumerate(zip(again.text, reply.text, strict=False)) if a != b),
        min(len(again.text), len(reply.text)),
    )
    assert shared >= 0.8 * len(reply.text)


@pytest.mark.model
def test_sampled_calls_decode_one_id_a_step(backend: LlamaCppBackend, steps: list[int]) -> None:
    sampled = chat(backend, temperature=1.0, seed=3, max_tokens=16)
    # The plain path: the prompt's step(s), then one step per id after the first.
    assert len(steps) >= sampled.completion_tokens
