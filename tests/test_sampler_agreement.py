"""Both rollout engines draw from the policy's own distribution (issue 25, one sampler spec).

The trainer's loss describes the policy's full softmax at temperature 1.0. Here the first token
of one short chat prompt is drawn a few hundred times, each draw seeded, by each engine with the
training preset (``TRAINING_SAMPLING``), and the counts are held against the policy's softmax
(transformers, fp32, the bundled SmolLM2) with a chi-square test. The threshold is a p-value of
1e-6, so an engine that samples the right distribution fails about once in a million runs; one
that cuts the tail (llama-cpp-python's chat defaults, top-k 40 and min-p 0.05, which drop about
40% of this prompt's first-token mass) failed here with a p-value of 2e-37.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the 'train' extra; `make install` always installs it

from longread.llm.base import TRAINING_SAMPLING, Completion, Message  # noqa: E402
from longread.train.config import ModelSection  # noqa: E402
from longread.train.engines import LlamaCppEngine, lora_moves_anything  # noqa: E402
from longread.train.policy import Policy, pick  # noqa: E402
from longread.train.session import load_policy  # noqa: E402

pytestmark = pytest.mark.model

# An open request: its first token is spread over many ids, with a long tail.
PROMPT: list[Message] = [{"role": "user", "content": "Name an animal."}]
DRAWS = 300
LEAST_P_VALUE = 1e-6


@pytest.fixture(scope="module")
def policy() -> Policy:
    """The bundled model with a fresh LoRA, as a training run starts (lora_B all zero)."""
    return load_policy(ModelSection(path="smollm2", lora=True), seed=0)


@pytest.fixture(scope="module")
def softmax(policy: Policy) -> np.ndarray:
    """The policy's first-token distribution for ``PROMPT`` at temperature 1."""
    ids = torch.tensor([policy.prompt_ids(PROMPT)])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0, -1].double()
    return torch.softmax(logits, -1).numpy()


@pytest.fixture(scope="module")
def engine_backend(policy: Policy, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """The llamacpp rollout engine's backend: the bundled weights in F16 plus the policy's
    LoRA, exported as the trainer exports it before every step."""
    folder: Path = tmp_path_factory.mktemp("engine")
    backend = LlamaCppEngine(policy, None, folder, window=512).open()
    yield backend
    asyncio.run(backend.aclose())


def chi_square_p_value(drawn: list[int], probs: np.ndarray) -> float:
    """The p-value of ``drawn`` under ``probs``: one bin per id expected at least 5 times, one
    pooled bin for all the others (where a cut tail shows)."""
    from scipy.stats import chi2

    expected_counts = probs * len(drawn)
    own = np.flatnonzero(expected_counts >= 5)
    counts = Counter(drawn)
    observed = [counts[int(i)] for i in own]
    expected = list(expected_counts[own])
    observed.append(len(drawn) - sum(observed))
    expected.append(len(drawn) - sum(expected))
    assert expected[-1] >= 20, "the prompt's tail is too light to tell a cut one"
    statistic = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))
    return float(chi2.sf(statistic, len(observed) - 1))


def test_the_llamacpp_engine_draws_from_the_policy_softmax(
    policy: Policy, softmax: np.ndarray, engine_backend
) -> None:
    params = replace(TRAINING_SAMPLING, max_tokens=1, record_tokens=True)

    async def draw_all() -> list[Completion]:
        return [await engine_backend.chat(PROMPT, replace(params, seed=s)) for s in range(DRAWS)]

    completions = asyncio.run(draw_all())
    # Both engines read the same prompt ids, and llama.cpp's raw distribution is the policy's.
    assert completions[0].prompt_ids == policy.prompt_ids(PROMPT)
    drawn = [c.token_ids[0] for c in completions]  # type: ignore[index]
    recorded = np.array([c.logprobs[0] for c in completions])  # type: ignore[index]
    np.testing.assert_allclose(recorded, np.log(softmax[drawn]), atol=0.05)
    assert chi_square_p_value(drawn, softmax) > LEAST_P_VALUE


def test_the_transformers_engine_draws_from_the_policy_softmax(
    policy: Policy, softmax: np.ndarray
) -> None:
    """The policy backend's own draw (``pick``, what ``sample`` calls at every position)."""
    logits = torch.log(torch.from_numpy(softmax)).float()
    generator = torch.Generator().manual_seed(0)
    drawn = [pick(logits, TRAINING_SAMPLING, generator=generator) for _ in range(DRAWS)]
    assert chi_square_p_value(drawn, softmax) > LEAST_P_VALUE


def test_a_lora_moves_the_model_only_once_trained(policy: Policy) -> None:
    """The engine checks the exported adapter moved a logit only when it should have."""
    assert not lora_moves_anything(policy.model)  # lora_B starts at zero
    name, parameter = next((n, p) for n, p in policy.model.named_parameters() if "lora_B" in n)
    saved = parameter.detach().clone()
    try:
        with torch.no_grad():
            parameter[0, 0] = 1e-3
        assert lora_moves_anything(policy.model), name
    finally:
        with torch.no_grad():
            parameter.copy_(saved)


def test_an_exported_lora_that_moves_nothing_is_refused_when_checked(engine_backend) -> None:
    """The engine's untrained LoRA, written by the project's own exporter, loaded with the
    adapter check on: llama.cpp applies it and no logit moves, so loading fails loudly."""
    from longread.errors import BackendError
    from longread.llm.llamacpp import LlamaCppBackend

    checked = LlamaCppBackend(quant="f16", n_ctx=512, adapter=engine_backend.adapter_path)
    with pytest.raises(BackendError, match="changed no logit"):
        checked.llama  # noqa: B018  # loading runs the check
