"""The step record: one typed, versioned record per model call, and the Run that holds them.

Every model call an agent makes goes through ``CallContext.call`` and leaves one ``Step``.
``ask --trace``, the evaluation store, the trainer (episodes are built from these records), the
server and the trace viewer all read the same records, so they stay plain JSON-serialisable
dataclasses with a schema version.

Schema history:
- 1: the flat ``Conversation`` of longread 0.1 (no schema field, no ids, no timestamps; recall,
  sub-question and retrieval as loose optional fields). Still read: ``Run.from_dict`` migrates it,
  and ``longread trace migrate`` rewrites files in place.
- 2: this module. ``schema``, ``run_id``, ``sample_id``, ``started``; a closed ``kind``; the
  agent-specific parts typed (``recall``, ``reread``, ``retrieval``, ``cut``); ``tokens`` holds
  prompt ids, sampled ids and sampler logprobs when a run asked for them.
"""

from __future__ import annotations

import contextlib
import json
import os
import textwrap
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Literal, Protocol, get_args

from .citations.model import Citation, SourceSpan
from .files import write_json
from .llm.base import Completion, Message

SCHEMA_VERSION = 2

# What a call does. update: fold a chunk into the memory; final: answer (memory agents' last
# call, and the baselines' only one); decide: MemReread's stop-or-sub-question call;
# integrate: MemReread's rewrite of the root memory with what a reread found; probe:
# memagent's exit probe (does the memory answer the question? yes stops reading).
StepKind = Literal["update", "final", "decide", "integrate", "probe"]
STEP_KINDS: tuple[str, ...] = get_args(StepKind)

# Flags recorded when the model misbehaves; the run goes on.
MEMORY_TRUNCATED = "memory_truncated"  # memory reply hit the token cap and was cut
MEMORY_KEPT = "memory_kept"  # the reply held no memory (empty, or all inside <think>): kept the old
NO_BOXED_ANSWER = "no_boxed_answer"  # final reply had no \boxed{...}
ANSWER_TRUNCATED = "answer_truncated"  # final reply hit the token cap
DECISION_TRUNCATED = "decision_truncated"  # a decide reply hit its token cap
FORMAT_ERROR = "format_error"  # a required tag was missing or malformed; a fallback was used
GATE_KEEP = "gate_keep"  # update gate: the reply was <keep/>, the memory was kept unwritten
GATE_EXIT = "gate_exit"  # exit gate: the reply ended with <exit/>; reading stopped after it
# exit gate: the reply ended with <exit/> before --min-read's share was read; reading went on
GATE_EXIT_EARLY = "gate_exit_below_min_read"
# grounded exit: an exit whose notes about the question were not traced to the sections read
# (citations/grounding.py); reading went on
GATE_EXIT_UNGROUNDED = "gate_exit_ungrounded"
# grounded notes: the update's notes about the question that no section read holds (a
# made-up answer) were cut from the memory it left
NOTES_UNGROUNDED = "notes_ungrounded"
# focused notes: none of the update's notes was about the question (copied filler); the
# memory it left was cleared
NOTES_UNRELATED = "notes_unrelated"
# exact copies: a value the update's notes nearly copied from the section (a UUID with a few
# characters dropped) was replaced by the section's in the memory it left
COPY_REPAIRED = "copy_repaired"
# focused reread: this update read again, with only the section's sentences that share the
# most of the question's terms, the section whose first update left no note about the question
FOCUSED_REREAD = "focused_reread"
# focused reread: no update of the section left a note about the question, and the memory
# before it, which had one, was kept
NOTES_RESTORED = "notes_restored"
# focused reread: the reread's notes did not restate the question either; the sentences it
# was shown were put at the head of the memory it left, as the section has them
FOCUS_QUOTED = "focus_quoted"
# format stop (rememr1): the reply went on past its closed <update> (or <recall>) with another
# <update>; generation stopped there and what followed the closing tag was cut
FORMAT_STOPPED = "format_stopped"
# loop stop (rememr1): the reply's tail had become one short block written again and again
# (``llm/loops.py``); generation stopped there instead of at the token cap
LOOP_STOPPED = "loop_stopped"


@dataclass
class TokenRecord:
    """Exactly what the model read and sampled, for training: never re-tokenised text.

    ``prompt_ids`` is the prompt after the chat template (None when the server does not report
    it); ``completion_ids`` are the sampled ids in order, the end-of-sequence token included when
    the model stopped on it; ``logprobs[i]`` is the log-probability of ``completion_ids[i]`` under
    the model's distribution at that position (temperature 1, before top-p), as vLLM reports it.
    """

    prompt_ids: list[int] | None
    completion_ids: list[int]
    logprobs: list[float] | None

    @classmethod
    def of(cls, completion: Completion) -> TokenRecord | None:
        if completion.token_ids is None:
            return None
        return cls(completion.prompt_ids, completion.token_ids, completion.logprobs)


@dataclass
class Recall:
    """ReMemR1: the query a step asked to recall, and what it brought back (None: nothing
    scored above the threshold)."""

    query: str
    memory: str | None = None
    step: int | None = None  # the step whose memory ranked first


@dataclass
class Reread:
    """MemReread: the sub-question this call works on."""

    sub_question: str


@dataclass
class Retrieval:
    """rag: the chunks put in the prompt, best first."""

    chunks: list[int]


@dataclass
class DocumentCut:
    """full: tokens cut from the middle of a document too long for the window."""

    cut_tokens: int
    total_tokens: int | None = None


@dataclass(kw_only=True)
class Step:
    """One model call of a run: what was sent, what came back, and what the agent made of it."""

    schema: int = SCHEMA_VERSION
    run_id: str = ""
    sample_id: str | None = None
    step: int  # position in the run, 0-based
    kind: StepKind
    phase: str = ""  # where the call sits in a run's tree (MemReread: "root", "decide-1", ...)
    started: str = ""  # ISO 8601 UTC time the call was sent
    seconds: float
    messages: list[Message]
    reply: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    model: str = ""
    chunk_index: int | None = None
    chunk_tokens: int | None = None
    memory: str | None = None  # the memory this call left (update and integrate calls)
    answer: str | None = None  # the extracted answer (final calls)
    flags: list[str] = field(default_factory=list)
    recall: Recall | None = None
    reread: Reread | None = None
    retrieval: Retrieval | None = None
    cut: DocumentCut | None = None
    tokens: TokenRecord | None = None
    # update and integrate calls: where each line the call added to the notes came from
    sources: list[SourceSpan] | None = None

    def __post_init__(self) -> None:
        if self.kind not in STEP_KINDS:
            raise ValueError(f"unknown step kind {self.kind!r}; expected one of {STEP_KINDS}")

    @property
    def truncated(self) -> bool:
        """True when generation stopped at the call's token cap."""
        return self.finish_reason == "length"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def shed_text(self) -> None:
        """Drop what only the trace file needs (the prompt, the reply, the memory, token ids),
        keeping the bookkeeping a run's totals, notes and costs are made of (kind, counts,
        timing, flags). Done to each step once a sink has it, so that a long run's memory
        does not grow with every prompt it sent."""
        self.messages, self.reply, self.memory, self.tokens = [], "", None, None
        self.sources = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        """A step from its JSON form, migrating schema 1 records."""
        data = dict(data)
        if data.get("schema", 1) == 1:
            data = _migrate_step_v1(data)
        elif data["schema"] > SCHEMA_VERSION:
            raise ValueError(
                f"step record schema {data['schema']} is newer than this longread reads "
                f"({SCHEMA_VERSION}); upgrade longread"
            )
        parts = {"recall": Recall, "reread": Reread, "retrieval": Retrieval, "cut": DocumentCut}
        for name, part in parts.items():
            if data.get(name) is not None:
                data[name] = part(**data[name])
        if data.get("tokens") is not None:
            data["tokens"] = TokenRecord(**data["tokens"])
        if data.get("sources") is not None:
            data["sources"] = [SourceSpan.from_dict(s) for s in data["sources"]]
        return cls(**data)

    @classmethod
    def from_completion(
        cls,
        kind: StepKind,
        step: int,
        messages: list[Message],
        completion: Completion,
        *,
        started: str,
        record_tokens: bool = False,
        **extra: Any,
    ) -> Step:
        return cls(
            kind=kind,
            step=step,
            started=started,
            messages=messages,
            reply=completion.text,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            seconds=completion.seconds,
            finish_reason=completion.finish_reason,
            model=completion.model,
            tokens=TokenRecord.of(completion) if record_tokens else None,
            **extra,
        )


def _migrate_step_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 ``Conversation`` dict as a schema-2 ``Step`` dict."""
    recall_query = data.pop("recall_query", None)
    recalled_memory = data.pop("recalled_memory", None)
    recalled_step = data.pop("recalled_step", None)
    sub_question = data.pop("sub_question", None)
    truncated_tokens = data.pop("truncated_tokens", None)
    retrieved = data.pop("retrieved_chunks", None)
    token_ids = data.pop("token_ids", None)
    logprobs = data.pop("logprobs", None)
    data["schema"] = SCHEMA_VERSION
    if recall_query is not None:
        data["recall"] = {"query": recall_query, "memory": recalled_memory, "step": recalled_step}
    if sub_question is not None:
        data["reread"] = {"sub_question": sub_question}
    if retrieved is not None:
        data["retrieval"] = {"chunks": retrieved}
    if truncated_tokens is not None:
        data["cut"] = {"cut_tokens": truncated_tokens}
    if token_ids is not None:
        data["tokens"] = {"prompt_ids": None, "completion_ids": token_ids, "logprobs": logprobs}
    return data


def new_run_id() -> str:
    """A short random id that names one agent run in traces, stores and the viewer."""
    return uuid.uuid4().hex[:16]


def utc_now() -> str:
    """The current time as ISO 8601 UTC with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class StepSink(Protocol):
    """Where a run hands each step once it is complete (``Agent.run(..., sink=...)``)."""

    def write(self, step: Step) -> None:
        """Take ``step``; it is stripped of its text (``Step.shed_text``) right after."""
        ...


class _Discard:
    """A sink that keeps nothing: a run whose steps nobody will read (``ask`` without
    ``--trace``) still sheds their text as it goes."""

    def write(self, step: Step) -> None:
        pass


DISCARD: StepSink = _Discard()


class TraceWriter:
    """Writes a run's trace file while the run goes: each step the moment it is complete,
    the answer and the rest of the run at the end (``finish``). The file is the one
    ``Run.save`` writes (the same keys; the steps come first), so ``Run.load``, the viewer and
    ``trace migrate`` read it as any trace; memory holds one step at a time, whatever the run's
    length.

    Until ``finish`` the steps go to ``PATH.tmp``, which ``finish`` renames to ``PATH``: a trace
    file under its own name is always whole. A write that fails (a full disk, a folder gone)
    does not stop the run: the error is kept and raised by ``finish``, after the run's answer
    is safe. ``discard`` removes the temporary file of a run that failed.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self._handle: IO[str] | None = open(self._tmp, "w", encoding="utf-8")  # noqa: SIM115
        self._steps = 0
        self.error: OSError | None = None
        self._put('{\n  "steps": [')

    def write(self, step: Step) -> None:
        """Append ``step`` to the file (flushed, so it is on disk before the next call)."""
        record = json.dumps(step.to_dict(), indent=2, ensure_ascii=False)
        self._put(("\n" if self._steps == 0 else ",\n") + textwrap.indent(record, "    "))
        self._steps += 1

    def finish(self, run: Run) -> None:
        """Write the rest of ``run`` and give the file its name; raises the first write error
        (OSError), if any."""
        ending = "\n  ]" if self._steps else "]"
        for key, value in run.head().items():
            text = textwrap.indent(json.dumps(value, indent=2, ensure_ascii=False), "  ")
            ending += f',\n  "{key}": {text.lstrip()}'
        self._put(ending + "\n}\n")
        if self.error is None and self._handle is not None:
            try:
                os.fsync(self._handle.fileno())
                self._close()
                os.replace(self._tmp, self.path)
            except OSError as exc:
                self.error = exc
        if self.error is not None:
            with contextlib.suppress(OSError):
                self.discard()  # half a trace is no trace
            raise self.error

    def discard(self) -> None:
        """Close and remove the temporary file (a run that failed has no trace)."""
        self._close()
        self._tmp.unlink(missing_ok=True)

    def _put(self, text: str) -> None:
        if self.error is not None or self._handle is None:
            return
        try:
            self._handle.write(text)
            self._handle.flush()
        except OSError as exc:
            self.error = exc

    def _close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            try:
                handle.close()
            except OSError as exc:
                self.error = self.error or exc


@dataclass
class Run:
    """The outcome of one agent run: the answer and every step.

    A run that handed its steps to a sink (``streamed``: ``ask``, ``eval run``) keeps in
    ``steps`` only their bookkeeping (kind, counts, timing, flags; the final step whole):
    prompts, replies and memories went to the sink, so ``save`` refuses it."""

    agent: str
    question: str
    answer: str  # the extracted answer: the \\boxed{} content, else the final reply
    final_reply: str  # the final call's whole reply (after stripping <think>)
    boxed: bool  # whether the answer came from a \\boxed{}
    steps: list[Step]
    seconds: float  # wall time of the run
    config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. "chunk shrunk from 5000 to 3000"
    run_id: str = ""
    sample_id: str | None = None
    started: str = ""
    schema: int = SCHEMA_VERSION
    # The spans of the document that back the answer; ``supported`` is False when the answer
    # was checked and nothing in the document backs it (None: not checked).
    citations: list[Citation] = field(default_factory=list)
    supported: bool | None = None
    streamed: bool = field(default=False, repr=False, compare=False)

    @property
    def calls(self) -> int:
        return len(self.steps)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.steps)

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.steps)

    def summary(self) -> dict[str, Any]:
        """The headline numbers: answer and cost (and, with memagent's exit gate on, how much
        of the document was read: ``chunks_read`` of ``chunks``)."""
        read = {
            k: self.config[k] for k in ("chunks_read", "chunks") if "chunks_read" in self.config
        }
        return {
            "schema": self.schema,
            "run_id": self.run_id,
            "sample_id": self.sample_id,
            "agent": self.agent,
            "question": self.question,
            "answer": self.answer,
            "boxed": self.boxed,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "started": self.started,
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
            "citations": [c.to_dict() for c in self.citations],
            "supported": self.supported,
            **read,
        }

    def head(self) -> dict[str, Any]:
        """Everything but the steps, JSON-ready: summary and config."""
        return {
            **self.summary(),
            "seconds": self.seconds,  # exact: the summary's is rounded for people
            "final_reply": self.final_reply,
            "config": self.config,
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready: summary, config and every step."""
        if self.streamed:
            raise ValueError("this run streamed its steps to a sink; its trace is there")
        return {**self.head(), "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        """A run from its JSON form; schema-1 traces (``conversations``) are migrated."""
        records = data["steps"] if "steps" in data else data["conversations"]
        steps = [Step.from_dict(r) for r in records]
        return cls(
            agent=data["agent"],
            question=data["question"],
            answer=data["answer"],
            final_reply=data["final_reply"],
            boxed=data["boxed"],
            steps=steps,
            seconds=data["seconds"],
            config=data.get("config", {}),
            notes=data.get("notes", []),
            run_id=data.get("run_id", ""),
            sample_id=data.get("sample_id"),
            started=data.get("started", ""),
            citations=[Citation.from_dict(c) for c in data.get("citations") or []],
            supported=data.get("supported"),
        )

    def save(self, path: str | Path) -> None:
        """Write the trace as indented JSON (atomically: a kill leaves the old file or the new)."""
        write_json(Path(path), self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> Run:
        """Read a trace written by ``save`` (any schema this version knows)."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def migrate_trace_file(path: str | Path) -> bool:
    """Rewrite one trace file in the current schema; False when it already was."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("a trace is a JSON object")
    if data.get("schema") == SCHEMA_VERSION:
        return False
    write_json(Path(path), Run.from_dict(data).to_dict())
    return True
