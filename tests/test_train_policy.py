"""The policy backend (transformers): the token records training relies on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")  # the 'train' extra; `make install` always installs it

from longread.errors import BudgetError  # noqa: E402
from longread.llm.base import SamplingParams  # noqa: E402
from longread.train.config import ModelSection  # noqa: E402
from longread.train.policy import Policy, PolicyBackend, sample  # noqa: E402
from longread.train.session import load_policy  # noqa: E402

from .tiny_policy import build_tiny_policy_folder  # noqa: E402

MESSAGES = [{"role": "user", "content": "What is the special magic number? It is 4817."}]


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Policy:
    folder = build_tiny_policy_folder(tmp_path_factory.mktemp("tiny") / "model", window=512)
    return load_policy(ModelSection(path=str(folder), lora=False), seed=0)


def chat(backend: PolicyBackend, **params: object) -> object:
    return asyncio.run(backend.chat(MESSAGES, SamplingParams(**params)))  # type: ignore[arg-type]


def test_records_template_ids_sampled_ids_and_their_logprobs(policy: Policy) -> None:
    completion = chat(PolicyBackend(policy), max_tokens=12, temperature=1.0, seed=5)
    prompt = policy.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True)
    assert completion.prompt_ids == list(prompt["input_ids"])
    assert len(completion.token_ids) == completion.completion_tokens == 12
    assert completion.finish_reason == "length"
    # Each logprob is log-softmax of the model's logits at that position (temperature 1).
    ids = torch.tensor([completion.prompt_ids + completion.token_ids])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0].double()
    start = len(completion.prompt_ids) - 1
    expected = [
        torch.log_softmax(logits[start + t], -1)[token].item()
        for t, token in enumerate(completion.token_ids)
    ]
    assert completion.logprobs == pytest.approx(expected, abs=1e-4)
    assert completion.text == policy.tokenizer.decode(completion.token_ids)


def test_a_seeded_call_is_reproducible_and_seeds_differ(policy: Policy) -> None:
    backend = PolicyBackend(policy)
    first = chat(backend, max_tokens=16, temperature=1.0, seed=1)
    again = chat(backend, max_tokens=16, temperature=1.0, seed=1)
    other = chat(backend, max_tokens=16, temperature=1.0, seed=2)
    assert first.token_ids == again.token_ids
    assert first.token_ids != other.token_ids


def test_greedy_follows_the_argmax_and_stops_at_eos(policy: Policy) -> None:
    prompt = policy.prompt_ids(MESSAGES)
    with torch.no_grad():
        logits = policy.model(input_ids=torch.tensor([prompt])).logits[0, -1]
    top = int(torch.argmax(logits))
    drawn = sample(policy.model, prompt, SamplingParams(), max_tokens=5, eos_ids=frozenset({top}))
    assert drawn.ids == [top] and drawn.finish_reason == "stop"


def test_a_prompt_longer_than_the_window_is_a_budget_error(policy: Policy) -> None:
    long = [{"role": "user", "content": "filler " * 2000}]
    with pytest.raises(BudgetError, match="does not fit the 512-token window"):
        asyncio.run(PolicyBackend(policy).chat(long, SamplingParams(max_tokens=4)))


def test_a_model_folder_without_chat_template_is_refused(tmp_path: Path) -> None:
    folder = build_tiny_policy_folder(tmp_path / "model")
    config = (folder / "tokenizer_config.json").read_text()
    (folder / "tokenizer_config.json").write_text(config.replace('"chat_template"', '"unused"'))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    from longread.errors import UsageError

    with pytest.raises(UsageError, match="no chat template"):
        load_policy(ModelSection(path=str(folder), lora=False), seed=0)
