"""A run as a server-sent event stream of standard ``chat.completion.chunk`` frames.

Only what OpenAI clients parse: the role first, progress as ``delta.reasoning_content`` (one
line per model call), SSE comment lines (``: keepalive``) while a long call says nothing, the
answer as ``delta.content``, a chunk with the finish reason (and the ``longread`` field), the
usage chunk when ``stream_options.include_usage`` asked for it, then ``data: [DONE]``. An error
is one ``data: {"error": ...}`` frame before ``[DONE]``: the openai client raises it as an
APIError with its message. No custom ``event:`` types: clients turn them into chunks without
choices and crash.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from .render import chunk, describe, finish_reason, longread_field, usage_chunk
from .requests import RunRequest
from .runs import RunHandle, RunManager

KEEPALIVE = b": keepalive\n\n"
DONE = b"data: [DONE]\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # nginx: do not buffer


def frame(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n\n"


async def events(
    manager: RunManager,
    handle: RunHandle,
    request: RunRequest,
    shared: bool,
    trace_url: str | None,
) -> AsyncIterator[bytes]:
    """The stream one client reads. It counts as a client of the run while it is read: a
    client that disconnects stops it (``RunManager.detach``)."""
    manager.attach(handle)
    try:
        yield frame(chunk(handle, request, {"role": "assistant", "content": ""}))
        async with contextlib.aclosing(handle.follow(manager.settings.keepalive)) as updates:
            async for event in updates:
                if event is None:
                    yield KEEPALIVE
                    continue
                text = describe(event, handle, request.reasoning)
                if text:
                    yield frame(chunk(handle, request, {"reasoning_content": text}))
        run = handle.run
        if run is None:
            assert handle.error is not None
            yield frame(handle.error.body())
        else:
            yield frame(chunk(handle, request, {"content": run.answer}))
            last = chunk(handle, request, {}, finish_reason(run))
            last["longread"] = longread_field(handle, request, shared, trace_url)
            yield frame(last)
            if request.include_usage:
                yield frame(usage_chunk(handle, request))
        yield DONE
    finally:
        manager.detach(handle)
