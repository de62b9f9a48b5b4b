"""Test doubles for the evaluation harness: a backend that answers by question, and samples."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longread.agents.registry import make_agent
from longread.data.records import Sample
from longread.eval.store import RunStore, run_config
from longread.llm.base import Completion, Message, SamplingParams
from longread.llm.factory import BackendSettings

from .scripted import WordTokenizer

# A reply: the text to send back, or an exception to raise for that question.
Reply = str | BaseException


class AnswerBackend:
    """Answers each call by the question found in its prompt, so any call order works.

    Tracks how many calls it held at once. ``prompt_tokens`` fixes the usage reported per
    question (the default counts words)."""

    name = "answers"
    context_window = None

    def __init__(
        self,
        replies: dict[str, Reply],
        *,
        delay: float = 0.0,
        prompt_tokens: dict[str, int] | None = None,
    ) -> None:
        self.replies = replies
        self.delay = delay
        self.prompt_tokens = prompt_tokens or {}
        self.calls: list[str] = []  # the question of each call, in arrival order
        self.in_flight = 0
        self.max_in_flight = 0
        self.tokenizer = WordTokenizer()

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        prompt = messages[-1]["content"]
        question = next(q for q in self.replies if q in prompt)
        self.calls.append(question)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        reply = self.replies[question]
        if isinstance(reply, BaseException):
            raise reply
        tokens = self.prompt_tokens.get(question, self.tokenizer.count(prompt))
        return Completion(reply, "stop", tokens, self.tokenizer.count(reply), 0.001)

    async def aclose(self) -> None:
        pass


def sample(sample_id: str, answers: list[str], **meta: Any) -> Sample:
    """A sample whose question is ``What is item <id>?`` (unique per id, for AnswerBackend)."""
    return Sample(
        id=sample_id,
        question=question(sample_id),
        context=f"Some document text about item {sample_id}.",
        answers=answers,
        meta=meta,
    )


def question(sample_id: str) -> str:
    return f"What is item {sample_id}?"


def factory(backend: AnswerBackend, agent: str = "full") -> Any:
    """An agent factory for run_eval around ``backend``."""
    return lambda progress: make_agent(agent, backend, backend.tokenizer, None, progress)


def open_store(run_dir: Path, agent: str = "full", data: str = "data.jsonl") -> RunStore:
    """A store whose config.json says ``agent`` ran on ``data`` (as the CLI writes it)."""
    store = RunStore(run_dir)
    # The model as released: no shipped adapter recorded in the config (labels stay bare).
    store.save_config(run_config(agent, {}, BackendSettings(base_model=True), data))
    return store
