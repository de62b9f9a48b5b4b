"""Typed records of every conversation of an agent run.

One ``Conversation`` per LLM call. The CLI, the evaluation store, the trace viewer and the RL
episode builder all read these same records, so they stay plain JSON-serialisable dataclasses.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .llm.base import Completion, Message

# Flags recorded when the model misbehaves; the run goes on.
MEMORY_TRUNCATED = "memory_truncated"  # memory reply hit the token cap and was cut
NO_BOXED_ANSWER = "no_boxed_answer"  # final reply had no \boxed{...}
ANSWER_TRUNCATED = "answer_truncated"  # final reply hit the token cap
FORMAT_ERROR = "format_error"  # a required tag was missing or malformed; a fallback was used


@dataclass
class Conversation:
    """One LLM call of a run: what was sent, what came back, and what the agent made of it."""

    kind: str  # "update" (memory rewrite over a chunk) or "final" (answer from memory)
    step: int  # position in the run, 0-based
    messages: list[Message]
    reply: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str
    chunk_index: int | None = None
    chunk_tokens: int | None = None
    memory: str | None = None  # the memory this call produced (update calls)
    answer: str | None = None  # the extracted answer (final calls)
    flags: list[str] = field(default_factory=list)
    # Where the call sits in a run's tree (MemReread: "root", "decide-1", "reread-1", ...).
    phase: str = ""
    # ReMemR1: the query the model asked to recall, and what it brought back.
    recall_query: str | None = None
    recalled_memory: str | None = None
    recalled_step: int | None = None
    # MemReread: the sub-question this call works on.
    sub_question: str | None = None
    # Baselines: tokens cut from a too-long document (full), chunks retrieved (rag).
    truncated_tokens: int | None = None
    retrieved_chunks: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None

    @classmethod
    def from_completion(
        cls, kind: str, step: int, messages: list[Message], completion: Completion, **extra: Any
    ) -> Conversation:
        return cls(
            kind=kind,
            step=step,
            messages=messages,
            reply=completion.text,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            seconds=completion.seconds,
            finish_reason=completion.finish_reason,
            token_ids=completion.token_ids,
            logprobs=completion.logprobs,
            **extra,
        )


@dataclass
class Run:
    """The outcome of one agent run: the answer and the full trace."""

    agent: str
    question: str
    answer: str  # the extracted answer: the \\boxed{} content, else the final reply
    final_reply: str  # the final call's whole reply (after stripping <think>)
    boxed: bool  # whether the answer came from a \\boxed{}
    conversations: list[Conversation]
    seconds: float  # wall time of the run
    config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. "chunk shrunk from 5000 to 3000"

    @property
    def calls(self) -> int:
        return len(self.conversations)

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.conversations)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.conversations)

    def summary(self) -> dict[str, Any]:
        """The headline numbers: answer and cost."""
        return {
            "agent": self.agent,
            "question": self.question,
            "answer": self.answer,
            "boxed": self.boxed,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready: summary, config and every conversation."""
        return {
            **self.summary(),
            "final_reply": self.final_reply,
            "config": self.config,
            "conversations": [asdict(c) for c in self.conversations],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        conversations = [Conversation(**c) for c in data["conversations"]]
        return cls(
            agent=data["agent"],
            question=data["question"],
            answer=data["answer"],
            final_reply=data["final_reply"],
            boxed=data["boxed"],
            conversations=conversations,
            seconds=data["seconds"],
            config=data.get("config", {}),
            notes=data.get("notes", []),
        )

    def save(self, path: str | Path) -> None:
        """Write the trace as indented JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")
