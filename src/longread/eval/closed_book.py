"""Which questions a model answers with no context at all.

RULER-HQA leaves these out (MemAgent's ``filter2.py``), so that accuracy measures reading the
document rather than recalling the answer. Each question is asked once, with no document.

The judge is stricter than the harness's lenient sub-EM, because a false "known" removes a
question from every set: the answer (the boxed one, else the whole reply) must equal the gold
after SQuAD normalisation, or contain it as whole words; a yes/no gold needs the exact
answer, since "no" is a word of many replies that know nothing.

Every reply is appended to a log as it arrives, under a header naming the backend, so an
interrupted pass resumes, and a pass with another model never reuses its answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from ..agents.prompts import Prompts, render
from ..errors import UsageError
from ..llm.base import LLMBackend, SamplingParams
from .runner import run_workers
from .sanitize import redact_secrets
from .scoring import exact_match, extract_prediction, normalize_answer, sub_em


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[str, ...]


@dataclass(frozen=True)
class ClosedBookAnswer:
    """One question asked without context: the reply and whether it counts as known."""

    id: str
    reply: str
    known: bool


def knows(reply: str, golds: Sequence[str]) -> bool:
    """Whether ``reply`` answers correctly, by the strict judge described above."""
    prediction, _ = extract_prediction(reply)
    if prediction is None:
        return False
    if exact_match(prediction, golds):
        return True
    open_golds = [g for g in golds if normalize_answer(g) not in ("yes", "no")]
    return bool(open_golds) and sub_em(prediction, open_golds, whole_words=True) == 1.0


async def ask_closed_book(
    questions: Sequence[Question],
    backend: LLMBackend,
    params: SamplingParams,
    log_path: Path,
    header: dict[str, Any],
    *,
    concurrency: int = 4,
    progress: bool = True,
    prompt_dir: str | None = None,
) -> list[ClosedBookAnswer]:
    """Answers to every question: those in ``log_path`` from an earlier pass with the same
    ``header`` (backend and settings) read back, the rest asked ``concurrency`` at a time.
    A failure stops the pass after the calls in flight are cancelled; what was answered is
    kept in the log. The header is written without credentials (``sanitize``)."""
    header = redact_secrets(header)
    done = {a.id: a for a in read_log(log_path, header)}
    todo = [q for q in questions if q.id not in done]
    bar = tqdm(total=len(questions), initial=len(questions) - len(todo), unit="question",
               disable=not progress, dynamic_ncols=True)  # fmt: skip
    pending = iter(todo)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as log:
        if log.tell() > 0 and not _ends_with_newline(log_path):
            log.write("\n")  # a line cut short by an earlier kill must not swallow the next
        if not done:
            _write_line(log, {"header": header})

        async def worker() -> None:
            for question in pending:  # one shared iterator: each question is asked once
                answer = await _ask(question, backend, params, prompt_dir)
                done[answer.id] = answer
                _write_line(log, asdict(answer))
                bar.update(1)

        try:
            await run_workers(min(concurrency, len(todo)), worker)
        finally:
            bar.close()
    return [done[q.id] for q in questions]


def read_log(path: Path, header: dict[str, Any]) -> list[ClosedBookAnswer]:
    """The answers recorded in ``path`` (none when it does not exist or is empty). A line cut
    short by a kill is skipped: that question is simply asked again."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        return []
    try:
        saved = json.loads(lines[0])["header"]
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{path} is not a closed-book log; choose another --out") from None
    # A log from before headers lost their credentials resumes too.
    if redact_secrets(saved) != redact_secrets(header):
        raise UsageError(
            f"{path} holds replies of another model or setting ({_differences(saved, header)});"
            " choose another --out or delete it"
        )
    answers = []
    for line in lines[1:]:
        try:
            answers.append(ClosedBookAnswer(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return answers


async def _ask(
    question: Question, backend: LLMBackend, params: SamplingParams, prompt_dir: str | None
) -> ClosedBookAnswer:
    prompt = render("closed_book", Prompts(directory=prompt_dir), question=question.question)
    completion = await backend.chat([{"role": "user", "content": prompt}], params)
    return ClosedBookAnswer(question.id, completion.text, knows(completion.text, question.answers))


def _write_line(log: TextIO, record: dict[str, Any]) -> None:
    log.write(json.dumps(record, ensure_ascii=False) + "\n")
    log.flush()  # on disk before the next question is counted


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def _differences(saved: dict[str, Any], now: dict[str, Any]) -> str:
    keys = sorted(k for k in saved.keys() | now.keys() if saved.get(k) != now.get(k))
    return ", ".join(f"{k}: saved {saved.get(k)!r}, now {now.get(k)!r}" for k in keys)
