"""Token recording on the real embedded model (llama.cpp + SmolLM2-135M).

Every check here is made against something the recording code does not compute: llama.cpp's
own tokenizer on an independently rendered template, the ids the plain chat path fed the
model, and a second model instance that scores prompt + completion in one forward pass.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from longread.errors import BudgetError
from longread.llm.base import Completion, Message, SamplingParams
from longread.llm.llamacpp import LlamaCppBackend
from longread.llm.loops import cut_loop

pytestmark = pytest.mark.model

# A question SmolLM2-135M answers in a few tokens and then ends on <|im_end|>.
MESSAGES: list[Message] = [
    {"role": "user", "content": "What is the capital of France? Answer with one word."}
]
# An open request, so that sampling has real choices to make.
OPEN_MESSAGES: list[Message] = [{"role": "user", "content": "Write one sentence about the sea."}]
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def backend() -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend(base_model=True)  # the engine, not the shipped adapter's effect
    yield backend
    asyncio.run(backend.aclose())


def chat(backend: LlamaCppBackend, messages: list[Message] = MESSAGES, **params: Any) -> Completion:
    params.setdefault("max_tokens", MAX_TOKENS)
    return asyncio.run(backend.chat(messages, SamplingParams(**params)))


@pytest.fixture(scope="module")
def recorded(backend: LlamaCppBackend) -> Completion:
    """Greedy, with token recording, its prompt read from an empty context: a test run before
    it (the order is random) leaves the chat template's prefix cached, and a prompt read in
    two pieces runs other kernels than the reference's one batch (up to 0.01 nats apart)."""
    backend.llama.reset()
    return chat(backend, record_tokens=True)


@pytest.fixture(scope="module")
def plain(backend: LlamaCppBackend, recorded: Completion) -> tuple[Completion, list[int]]:
    """Greedy through create_chat_completion, and the ids that call evaluated."""
    completion = chat(backend)
    return completion, [int(i) for i in backend.llama.input_ids[: backend.llama.n_tokens]]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@pytest.fixture(scope="module")
def reference_logprobs(backend: LlamaCppBackend, recorded: Completion) -> np.ndarray:
    """Log-softmax of the logits at every completion position, from a separate model instance
    that reads the prompt, then the completion one id at a time (logits_all), and samples
    nothing. One id at a time as the sampler read them: reading the completion in one batch
    runs other kernels, whose logits differ by up to 0.01 nats on an AVX2 machine."""
    assert recorded.prompt_ids is not None and recorded.token_ids is not None
    import llama_cpp  # the model tests need longread[local]; imported here, not at collection

    checker = llama_cpp.Llama(
        model_path=str(backend.model_path), n_ctx=512, logits_all=True, verbose=False
    )
    try:
        ids = recorded.prompt_ids + recorded.token_ids
        checker.eval(recorded.prompt_ids)
        for token in recorded.token_ids[:-1]:  # the last sampled id is never read by the model
            checker.eval([token])
        first = len(recorded.prompt_ids) - 1  # the logits row that predicts completion id 0
        return log_softmax(np.asarray(checker.scores[first : len(ids) - 1]))
    finally:
        checker.close()


def test_completion_ids_end_with_eos_and_detokenise_to_the_reply(
    backend: LlamaCppBackend, recorded: Completion
) -> None:
    llama = backend.llama
    assert recorded.token_ids is not None
    assert recorded.finish_reason == "stop"
    assert recorded.token_ids[-1] == llama.token_eos()  # kept so a trainer learns to stop
    assert llama.token_eos() not in recorded.token_ids[:-1]
    text = llama.detokenize(recorded.token_ids[:-1]).decode("utf-8")
    assert text == recorded.text
    assert "Paris" in text
    assert recorded.completion_tokens == len(recorded.token_ids)


def test_prompt_ids_are_the_rendered_chat_template(
    backend: LlamaCppBackend, recorded: Completion, plain: tuple[Completion, list[int]]
) -> None:
    from llama_cpp import llama_chat_format

    llama = backend.llama
    # The GGUF's template rendered here, not through the backend's formatter lookup.
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=llama.metadata["tokenizer.chat_template"],
        eos_token=llama._model.token_get_text(llama.token_eos()),
        bos_token=llama._model.token_get_text(llama.token_bos()),
    )
    rendered = formatter(messages=MESSAGES).prompt
    assert rendered.endswith("<|im_start|>assistant\n")
    expected = llama.tokenize(rendered.encode("utf-8"), add_bos=False, special=True)
    assert recorded.prompt_ids == expected
    assert recorded.prompt_tokens == len(expected)
    # And exactly what create_chat_completion fed the model for the same messages.
    plain_completion, plain_ids = plain
    assert plain_completion.prompt_tokens == len(expected)
    assert plain_ids[: len(expected)] == expected


def test_logprobs_are_the_raw_distribution_the_ids_were_sampled_from(
    recorded: Completion, reference_logprobs: np.ndarray
) -> None:
    assert recorded.token_ids is not None and recorded.logprobs is not None
    ids = np.array(recorded.token_ids)
    logprobs = np.array(recorded.logprobs)
    assert len(logprobs) == len(ids) == len(reference_logprobs)
    assert (logprobs <= 0).all()
    # Greedy: each sampled id is the argmax of the raw distribution at its position...
    assert (reference_logprobs.argmax(axis=1) == ids).all()
    # ...and its logprob is that distribution's value (temperature 1, nothing truncated).
    expected = reference_logprobs[np.arange(len(ids)), ids]
    np.testing.assert_allclose(logprobs, expected, atol=1e-2)
    # A truncated/renormalised distribution would put the top id near log(1) = 0 everywhere.
    assert min(logprobs) < math.log(0.9)


def test_greedy_text_is_the_same_with_and_without_recording(
    recorded: Completion, plain: tuple[Completion, list[int]]
) -> None:
    plain_completion, _ = plain
    assert plain_completion.token_ids is None  # the plain path records nothing
    assert recorded.text == plain_completion.text
    assert recorded.finish_reason == plain_completion.finish_reason
    # The plain path does not count the end-of-sequence id; the record does, as vLLM does.
    assert recorded.completion_tokens == plain_completion.completion_tokens + 1


def test_seeded_sampling_is_the_same_with_and_without_recording(
    backend: LlamaCppBackend,
) -> None:
    # Same seed and sampling spec (llamacpp_chat.build_sampler on both): same draws. Each
    # call reads the whole prompt afresh: a call that reuses the cached prompt evaluates only
    # its last id, in other kernels, and logits that differ in the last digits can flip a draw.
    params: dict[str, Any] = {"temperature": 1.0, "top_p": 0.9, "seed": 11, "max_tokens": 12}
    backend.llama.reset()
    with_ids = chat(backend, OPEN_MESSAGES, record_tokens=True, **params)
    backend.llama.reset()
    without = chat(backend, OPEN_MESSAGES, **params)
    assert with_ids.text == without.text
    assert with_ids.finish_reason == without.finish_reason


def test_stop_string_trims_the_text_and_token_cap_says_length(
    backend: LlamaCppBackend, plain: tuple[Completion, list[int]]
) -> None:
    greedy_text = plain[0].text
    stopped = chat(backend, record_tokens=True, stop=("Paris",))
    assert stopped.finish_reason == "stop"
    assert stopped.text == greedy_text[: greedy_text.index("Paris")]
    assert stopped.token_ids is not None and stopped.logprobs is not None
    assert len(stopped.token_ids) == len(stopped.logprobs)

    capped = chat(backend, record_tokens=True, max_tokens=3)
    assert capped.finish_reason == "length"
    assert capped.token_ids is not None and len(capped.token_ids) == 3
    assert capped.completion_tokens == 3


def test_a_kept_stop_string_ends_the_text_where_the_model_wrote_it(
    backend: LlamaCppBackend, plain: tuple[Completion, list[int]]
) -> None:
    # rememr1's format stop reads the closing tag its stop string starts with.
    greedy_text = plain[0].text
    kept = chat(backend, stop=("Paris",), include_stop=True)
    assert kept.finish_reason == "stop"
    assert kept.text == greedy_text[: greedy_text.index("Paris") + len("Paris")]
    assert kept.token_ids is None  # ids only where recording asks for them
    assert kept.completion_tokens == len(
        chat(backend, record_tokens=True, stop=("Paris",)).token_ids or []
    )


# A prompt SmolLM2-135M as released answers by writing "a" to the cap.
LOOPING_MESSAGES: list[Message] = [
    {"role": "user", "content": "Write the letter a 300 times: " + "a" * 36}
]


def test_a_loop_stop_ends_the_reply_where_its_loop_became_certain(
    backend: LlamaCppBackend,
) -> None:
    # rememr1's loop stop: the greedy reply as it would run to the cap, cut where
    # llm/loops.py cuts a server's whole reply; fewer tokens decoded
    to_the_cap = chat(backend, LOOPING_MESSAGES, max_tokens=120)
    stopped = chat(backend, LOOPING_MESSAGES, max_tokens=120, loop_stop=True)
    assert to_the_cap.finish_reason == "length"
    assert stopped.finish_reason == "loop" and stopped.text == cut_loop(to_the_cap.text)
    assert stopped.completion_tokens < to_the_cap.completion_tokens
    # a reply that does not loop ends as it would have
    assert chat(backend, loop_stop=True).text == chat(backend).text


def test_prompt_over_the_window_is_a_budget_error(backend: LlamaCppBackend) -> None:
    # Refused after tokenising, before any evaluation, like the plain path.
    too_long: list[Message] = [{"role": "user", "content": "word " * backend.context_window}]
    with pytest.raises(BudgetError, match="does not fit"):
        chat(backend, too_long, record_tokens=True)
