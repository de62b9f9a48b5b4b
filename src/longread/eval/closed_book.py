"""Which questions a model answers with no context at all.

RULER-HQA leaves these out (MemAgent's ``filter2.py``), so that accuracy measures reading the
document rather than recalling the answer. Each question is asked once, with no document, and
judged by the harness's own judge (lenient sub-EM of the final reply against the gold answer).
Every answer is appended to a JSONL log as it arrives, so an interrupted pass resumes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from ..agents.prompts import render
from ..llm.base import LLMBackend, SamplingParams
from .scoring import score_answer


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[str, ...]


@dataclass(frozen=True)
class ClosedBookAnswer:
    """One question asked without context: the reply and whether it was right."""

    id: str
    reply: str
    correct: bool


async def ask_closed_book(
    questions: Sequence[Question],
    backend: LLMBackend,
    params: SamplingParams,
    log_path: Path,
    *,
    concurrency: int = 4,
    progress: bool = True,
    prompt_dir: str | None = None,
) -> list[ClosedBookAnswer]:
    """Answers to every question, those already in ``log_path`` (from an earlier, perhaps
    interrupted, pass) read back and the rest asked, ``concurrency`` at a time."""
    done = {a.id: a for a in read_log(log_path)}
    todo = [q for q in questions if q.id not in done]
    bar = tqdm(total=len(questions), initial=len(questions) - len(todo), unit="question",
               disable=not progress, dynamic_ncols=True)  # fmt: skip
    pending = iter(todo)

    async def worker(log: TextIO) -> None:
        for question in pending:  # one shared iterator: each question is asked once
            answer = await _ask(question, backend, params, prompt_dir)
            done[answer.id] = answer
            _append(log, answer)
            bar.update(1)

    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log_path.open("a", encoding="utf-8") as log:
            await asyncio.gather(*(worker(log) for _ in range(min(concurrency, len(todo)))))
    finally:
        bar.close()
    return [done[q.id] for q in questions]


def read_log(path: Path) -> list[ClosedBookAnswer]:
    """The answers recorded in ``path`` (none when it does not exist). A last line cut short
    by a kill is ignored: that question is simply asked again."""
    if not path.is_file():
        return []
    answers = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            answers.append(ClosedBookAnswer(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return answers


async def _ask(
    question: Question, backend: LLMBackend, params: SamplingParams, prompt_dir: str | None
) -> ClosedBookAnswer:
    prompt = render("closed_book", prompt_dir, question=question.question)
    completion = await backend.chat([{"role": "user", "content": prompt}], params)
    score = score_answer(completion.text, question.answers)
    return ClosedBookAnswer(question.id, completion.text, score.sub_em == 1.0)


def _append(log: TextIO, answer: ClosedBookAnswer) -> None:
    log.write(json.dumps(asdict(answer), ensure_ascii=False) + "\n")
    log.flush()  # on disk before the next question is counted
