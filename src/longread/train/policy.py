"""The policy being trained, as a longread backend: transformers (+ peft) on the CPU.

Rollouts run the real agents on ``PolicyBackend``, so training reads the same step records as
``ask`` and ``eval``. The backend applies the model's own chat template, samples with the
temperature the agent asks for (training configs use 1.0), and returns the prompt ids, the sampled
ids and their logprobs: the loss is computed on exactly those ids, never on re-tokenised text.
It honours the whole sampling spec (``SamplingParams``: top-k, min-p, penalties) the way the
llama.cpp engine does, so both rollout engines draw from one distribution.

Sampling is seeded per call from the agent's seed and the prompt ids, so a rollout does not
depend on the order in which concurrent rollouts reach the model (which keeps a resumed training
run identical to an uninterrupted one).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import BudgetError, UsageError
from ..llm import compute_thread
from ..llm.base import Completion, Message, SamplingParams


@dataclass
class Policy:
    """A causal LM (possibly wrapped by peft) and its tokenizer."""

    model: Any  # transformers PreTrainedModel or peft PeftModel
    tokenizer: Any  # transformers PreTrainedTokenizerBase with a chat template
    name: str = "policy"

    def __post_init__(self) -> None:
        if not getattr(self.tokenizer, "chat_template", None):
            raise UsageError(f"the tokenizer of {self.name} has no chat template")

    @property
    def context_window(self) -> int:
        return int(self.model.config.max_position_embeddings)

    @property
    def eos_ids(self) -> frozenset[int]:
        """Ids that end a completion: the tokenizer's EOS and the generation config's."""
        ids: set[int] = set()
        for value in (
            self.tokenizer.eos_token_id,
            getattr(getattr(self.model, "generation_config", None), "eos_token_id", None),
        ):
            if isinstance(value, int):
                ids.add(value)
            elif value:
                ids.update(int(v) for v in value)
        return frozenset(ids)

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The ids the model reads for ``messages``: its chat template, generation prompt on."""
        encoded = self.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=True, return_dict=True
        )
        return list(encoded["input_ids"])


@dataclass
class SampledTokens:
    """The ids one call sampled, their logprobs (temperature 1, raw logits) and why it ended."""

    ids: list[int]
    logprobs: list[float]
    finish_reason: str


def call_seed(seed: int, prompt_ids: Sequence[int]) -> int:
    """A sampling seed for one call: the agent's seed mixed with what the call reads."""
    digest = hashlib.sha256(f"{seed}:{','.join(map(str, prompt_ids))}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


@torch.no_grad()
def sample(
    model: Any,
    prompt_ids: Sequence[int],
    params: SamplingParams,
    *,
    max_tokens: int,
    eos_ids: frozenset[int],
    generator: torch.Generator | None = None,
) -> SampledTokens:
    """Sample up to ``max_tokens`` ids after ``prompt_ids`` with a KV cache, as ``params``
    says (``SamplingParams``: penalties, temperature, top-k, top-p, min-p, in that order, as
    every backend applies them; ``temperature == 0`` is greedy).

    ``logprobs[i]`` is log-softmax of the raw logits ``ids[i]`` was drawn from (temperature 1,
    before any of that), the definition every longread backend records, so sampler and
    trainer logprobs can be compared."""
    ids: list[int] = []
    logprobs: list[float] = []
    inputs = torch.tensor([list(prompt_ids)], dtype=torch.long)
    past = None
    for _ in range(max_tokens):
        out = model(input_ids=inputs, past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1].float()
        token = pick(logits, params, ids, generator)
        ids.append(token)
        logprobs.append(float(torch.log_softmax(logits, dim=-1)[token]))
        if token in eos_ids:
            return SampledTokens(ids, logprobs, "stop")
        inputs = torch.tensor([[token]], dtype=torch.long)
    return SampledTokens(ids, logprobs, "length")


def pick(
    logits: torch.Tensor,
    params: SamplingParams,
    sampled: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> int:
    """One id drawn from raw ``logits`` as ``params`` says, ``sampled`` being the ids this
    completion drew before (what the penalties count)."""
    logits = _penalised(logits, params, sampled)
    if params.temperature <= 0.0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits / params.temperature, dim=-1)
    if 0 < params.top_k < probs.numel():
        kth = torch.topk(probs, params.top_k).values[-1]
        probs = torch.where(probs >= kth, probs, 0.0)
    if params.top_p < 1.0:
        probs = probs / probs.sum()
        sorted_probs, order = torch.sort(probs, descending=True)
        # Keep the smallest prefix whose mass reaches top_p (the first token always stays).
        outside = torch.cumsum(sorted_probs, dim=-1) - sorted_probs >= params.top_p
        sorted_probs[outside] = 0.0
        probs = torch.zeros_like(probs).scatter(0, order, sorted_probs)
    if params.min_p > 0.0:
        probs = torch.where(probs >= params.min_p * probs.max(), probs, 0.0)
    return int(torch.multinomial(probs, 1, generator=generator))


def _penalised(
    logits: torch.Tensor, params: SamplingParams, sampled: Sequence[int]
) -> torch.Tensor:
    """``logits`` with the penalties applied to the ids already sampled (llama.cpp's and
    Hugging Face's repeat penalty; OpenAI's frequency and presence penalties)."""
    if not params.penalised or not sampled:
        return logits
    ids, counts = torch.unique(torch.tensor(list(sampled)), return_counts=True)
    seen = logits[ids]
    seen = torch.where(seen <= 0, seen * params.repeat_penalty, seen / params.repeat_penalty)
    seen = seen - counts * params.frequency_penalty - params.presence_penalty
    return logits.index_put((ids,), seen)


class PolicyBackend:
    """An ``LLMBackend`` over a ``Policy``: one call at a time, off the event loop.

    Token records are always returned (``prompt_ids``, ``token_ids``, ``logprobs``); a call with
    ``seed=None`` draws from the backend's own generator, seeded at construction. Stop strings
    cut the text but not generation (no agent uses them); ``token_ids`` are what was sampled."""

    name = "transformers"

    def __init__(self, policy: Policy, *, seed: int = 0, context_window: int | None = None):
        self.policy = policy
        self._window = context_window or policy.context_window
        self._generator = torch.Generator().manual_seed(seed)
        # A thread lock, not an asyncio one: the trainer runs each step in its own event loop.
        self._lock = threading.Lock()

    @property
    def context_window(self) -> int:
        return self._window

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        # The compute thread, where the trainer's updates run too (see compute_thread).
        return await compute_thread.run(self._chat_locked, list(messages), params)

    def _chat_locked(self, messages: list[Message], params: SamplingParams) -> Completion:
        with self._lock:
            return self._chat_blocking(messages, params)

    def _chat_blocking(self, messages: list[Message], params: SamplingParams) -> Completion:
        start = time.perf_counter()
        prompt = self.policy.prompt_ids(messages)
        room = self._window - len(prompt)
        if room <= 0:
            raise BudgetError(
                f"prompt of {len(prompt)} tokens does not fit the {self._window}-token window"
            )
        generator = self._generator
        if params.seed is not None:
            generator = torch.Generator().manual_seed(call_seed(params.seed, prompt))
        model = self.policy.model
        was_training = model.training
        model.eval()
        try:
            drawn = sample(
                model,
                prompt,
                params,
                max_tokens=min(params.max_tokens, room) if params.max_tokens > 0 else room,
                eos_ids=self.policy.eos_ids,
                generator=generator,
            )
        finally:
            model.train(was_training)
        text_ids = drawn.ids[:-1] if drawn.finish_reason == "stop" else drawn.ids
        text = self.policy.tokenizer.decode(text_ids, skip_special_tokens=True)
        return Completion(
            text=_cut_at_stop(text, params.stop),
            finish_reason=drawn.finish_reason,
            prompt_tokens=len(prompt),
            completion_tokens=len(drawn.ids),
            seconds=time.perf_counter() - start,
            token_ids=drawn.ids,
            logprobs=drawn.logprobs,
            prompt_ids=prompt,
            model=self.policy.name,
        )

    async def aclose(self) -> None:
        """Nothing to release: the trainer owns the model."""


def _cut_at_stop(text: str, stops: Sequence[str]) -> str:
    cuts = [text.index(stop) for stop in stops if stop in text]
    return text[: min(cuts)] if cuts else text
