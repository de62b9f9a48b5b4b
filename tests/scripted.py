"""A scripted test-double backend for unit tests of agent control flow (never used for results)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from longread.llm.base import Completion, Message, SamplingParams

_WORD = re.compile(r"\w+|[^\w\s]")


class WordTokenizer:
    """One token per word or punctuation mark: predictable counts for budget tests."""

    name = "words"
    exact = True

    def encode(self, text: str) -> list[int]:
        return [hash(t) % 50000 for t in _WORD.findall(text)]

    def count(self, text: str) -> int:
        return len(_WORD.findall(text))


Reply = str | Callable[[Sequence[Message]], str]


class ScriptedBackend:
    """Answers each call with the next scripted reply (a string, or a function of the messages).

    Records every request so tests can assert what the agent sent.
    """

    name = "scripted"

    def __init__(
        self,
        replies: Sequence[Reply],
        *,
        context_window: int | None = None,
        finish_reasons: Sequence[str] | None = None,
        with_tokens: bool = False,
    ) -> None:
        self._replies = list(replies)
        self._finish = list(finish_reasons or [])
        self._window = context_window
        self.requests: list[tuple[list[Message], SamplingParams]] = []
        self.tokenizer = WordTokenizer()
        self.with_tokens = with_tokens  # answer record_tokens requests with (made-up) ids

    @property
    def context_window(self) -> int | None:
        return self._window

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        index = len(self.requests)
        self.requests.append((list(messages), params))
        if index >= len(self._replies):
            raise AssertionError(f"unexpected call {index + 1}: only {len(self._replies)} scripted")
        reply = self._replies[index]
        text = reply(messages) if callable(reply) else reply
        finish = self._finish[index] if index < len(self._finish) else "stop"
        prompt = sum(self.tokenizer.count(m["content"]) for m in messages)
        completion = Completion(text, finish, prompt, self.tokenizer.count(text), 0.001)
        if params.record_tokens and self.with_tokens:
            completion.prompt_ids = [
                i for m in messages for i in self.tokenizer.encode(m["content"])
            ]
            completion.token_ids = self.tokenizer.encode(text)
            completion.logprobs = [-0.5] * len(completion.token_ids)
        return completion

    async def aclose(self) -> None:
        pass
