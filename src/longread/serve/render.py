"""What clients read: OpenAI's ``chat.completion`` and ``chat.completion.chunk`` bodies, the
usage block, the ``longread`` field (with the answer's citations), the ``url_citation``
annotations, and the progress lines sent as reasoning."""

from __future__ import annotations

from typing import Any

from ..trace import Run, Step
from .citing import citation_fields, url_annotations
from .requests import RunRequest
from .runs import Event, RunHandle, Started


def describe(event: Event, handle: RunHandle, reasoning: str) -> str:
    """The reasoning text for one event: a line per model call (``progress``), plus the memory
    each update left (``memory``), or nothing (``none``)."""
    if reasoning == "none":
        return ""
    if isinstance(event, Started):
        return _started(event, handle.request.agent)
    step = event.step
    line = f"{_where(step, handle.chunks)}: {_what(step)} ({step.seconds:.1f} s)"
    if step.flags:
        line += f" [{', '.join(step.flags)}]"
    text = line + "\n"
    if reasoning == "memory" and step.memory and step.kind in ("update", "integrate"):
        text += f"{step.memory.strip()}\n\n"
    return text


def _started(event: Started, agent: str) -> str:
    if agent == "full":
        text = "Reading the whole document in one prompt.\n"
    elif agent == "rag":
        text = f"Ranking {event.chunks} chunk(s) of up to {event.chunk_tokens} tokens.\n"
    else:
        text = f"Reading {event.chunks} chunk(s) of up to {event.chunk_tokens} tokens.\n"
    return text + (f"Note: {event.note}.\n" if event.note else "")


def _where(step: Step, chunks: int) -> str:
    """E.g. "chunk 3/12", "chunk 3/12 reread-1", "decide-1", "final"."""
    phase = "" if step.phase in ("", "root") else step.phase
    if step.chunk_index is None:
        return phase or step.kind
    of = f"/{chunks}" if chunks else ""
    return f"chunk {step.chunk_index + 1}{of} {phase}".strip()


def _what(step: Step) -> str:
    if step.kind in ("update", "integrate"):
        return f"memory of {step.completion_tokens} tokens"
    if step.kind == "final":
        return f"answer of {step.completion_tokens} tokens"
    return f"{step.completion_tokens} tokens"


def reasoning_text(handle: RunHandle, reasoning: str) -> str:
    """Every event's reasoning text so far, for a non-streamed reply."""
    return "".join(describe(e, handle, reasoning) for e in handle.events)


def usage(run: Run, chunks: int) -> dict[str, Any]:
    """OpenAI's usage block with the backend's own token counts over every call of the run,
    and longread's costs: ``calls``, ``chunks``, ``seconds``."""
    return {
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "total_tokens": run.prompt_tokens + run.completion_tokens,
        "calls": run.calls,
        "chunks": chunks,
        "seconds": round(run.seconds, 3),
    }


def finish_reason(run: Run) -> str:
    """ "length" when the final call stopped at its token cap, else "stop"."""
    return "length" if run.steps and run.steps[-1].truncated else "stop"


def longread_field(
    handle: RunHandle, request: RunRequest, shared: bool, trace_url: str | None
) -> dict[str, Any]:
    """What the response says about the run: its id (the trace's name), where to view it, how
    this request was split into document and question, whether it joined a run, and the
    spans of the document that back the answer (``citations``; ``supported`` False when
    nothing in the document does, None when that was not checked)."""
    run = handle.run
    return {
        "run_id": handle.run_id,
        "trace_url": trace_url,
        "agent": request.agent,
        "question": request.question,
        "split": request.split.to_dict(),
        "shared": shared,
        "boxed": run.boxed if run is not None else None,
        "notes": run.notes if run is not None else [],
        "citations": citation_fields(run, request.files) if run is not None else [],
        "supported": run.supported if run is not None else None,
    }


def completion(
    handle: RunHandle, request: RunRequest, shared: bool, trace_url: str | None
) -> dict[str, Any]:
    """The non-streamed reply (``chat.completion``) of a finished run."""
    run = handle.run
    assert run is not None
    message: dict[str, Any] = {"role": "assistant", "content": run.answer}
    cited = url_annotations(run, request.files)
    if cited:
        message["annotations"] = cited
    reasoning = reasoning_text(handle, request.reasoning)
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "id": completion_id(handle),
        "object": "chat.completion",
        "created": handle.created,
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(run)}],
        "usage": usage(run, handle.chunks),
        "longread": longread_field(handle, request, shared, trace_url),
    }


def chunk(
    handle: RunHandle,
    request: RunRequest,
    delta: dict[str, Any],
    finish: str | None = None,
) -> dict[str, Any]:
    """One streamed ``chat.completion.chunk`` with one choice."""
    return {
        "id": completion_id(handle),
        "object": "chat.completion.chunk",
        "created": handle.created,
        "model": request.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def usage_chunk(handle: RunHandle, request: RunRequest) -> dict[str, Any]:
    """The last chunk when the client asked ``stream_options.include_usage``: no choices, and
    the usage."""
    run = handle.run
    assert run is not None
    return {
        "id": completion_id(handle),
        "object": "chat.completion.chunk",
        "created": handle.created,
        "model": request.model,
        "choices": [],
        "usage": usage(run, handle.chunks),
    }


def completion_id(handle: RunHandle) -> str:
    return f"chatcmpl-{handle.run_id}"
