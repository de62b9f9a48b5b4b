"""Runs and the clients waiting for them: coalescing, limits, cancellation, traces.

A request becomes a run, or joins one: identical requests (same ``RunRequest.key``) in flight
share one run, so a client that retries after its own timeout, or a second tab, never starts
the same expensive read twice; a finished run's answer is kept ``keep_finished`` seconds for a
retry that arrives just after the end. New runs beyond ``max_runs`` are refused (429).

A run goes on while any client waits for it. When the last one has gone (a closed stream, a
dropped connection) it is cancelled after ``cancel_after`` seconds unless an identical request
joined it meanwhile: a cancelled run makes no further backend call. ``run_timeout`` bounds
every run's wall-clock time. Every run, finished, failed or cancelled, leaves its trace in the
runs folder as ``<run id>.json`` (with keys, in its key's own folder), named in every response.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from ..agents.registry import make_agent
from ..citations import locate
from ..llm.base import LLMBackend
from ..text.tokenizer import Tokenizer
from ..trace import Run, Step, new_run_id, utc_now
from .config import ServeConfig
from .errors import NO_RETRY, APIError, from_run_error
from .requests import RunRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Started:
    """The document is cut: ``chunks`` chunks of at most ``chunk_tokens``."""

    chunks: int
    chunk_tokens: int
    note: str | None = None


@dataclass(frozen=True)
class Called:
    """One model call finished; ``expected_calls`` is the agent's estimate for the run."""

    step: Step
    expected_calls: int


Event = Started | Called


class RunHandle:
    """One run: its request, what it has reported so far, and its outcome."""

    def __init__(self, request: RunRequest, run_id: str) -> None:
        self.request = request
        self.run_id = run_id
        self.created = int(time.time())
        self.started = utc_now()
        self.events: list[Event] = []
        self.chunks = 0
        self.run: Run | None = None
        self.error: APIError | None = None
        self.clients = 0
        self.finished_at: float | None = None
        self.cancel_reason: str | None = None
        self.left: object | None = None  # set when the last client leaves; a return clears it
        self.done = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    @property
    def succeeded(self) -> bool:
        return self.run is not None

    def publish(self, event: Event) -> None:
        if isinstance(event, Started):
            self.chunks = event.chunks
        self.events.append(event)
        self._wake()

    def finish(self, run: Run | None, error: APIError | None) -> None:
        self.run, self.error = run, error
        self.finished_at = time.monotonic()
        self.done.set()
        self._wake()

    async def follow(self, keepalive: float) -> AsyncGenerator[Event | None, None]:
        """Every event from the first, then the new ones as they come, until the run ends;
        None after each ``keepalive`` seconds without one."""
        index = 0
        while True:
            changed = self._changed  # taken before looking: a publish after this sets it
            while index < len(self.events):
                index += 1
                yield self.events[index - 1]
            if self.done.is_set():
                return
            try:
                await asyncio.wait_for(changed.wait(), keepalive)
            except asyncio.TimeoutError:
                yield None

    def steps(self) -> list[Step]:
        return [e.step for e in self.events if isinstance(e, Called)]

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()


class RunManager:
    """Starts runs, lets identical requests share them, and cancels the abandoned ones."""

    def __init__(
        self,
        backend: LLMBackend,
        tokenizer: Tokenizer,
        settings: ServeConfig,
        agent_backends: Mapping[str, LLMBackend] | None = None,
        call_backends: Mapping[str, Mapping[str, LLMBackend]] | None = None,
    ) -> None:
        self.backend = backend
        # Per agent, kinds of call with a backend of their own (MemReread's decisions).
        self.call_backends = dict(call_backends or {})
        # Agents that read with a backend of their own (the bundled model with the agent's own
        # shipped adapter); every other agent reads with ``backend``.
        self.agent_backends = dict(agent_backends or {})
        self.tokenizer = tokenizer
        self.settings = settings
        self._runs: dict[str, RunHandle] = {}  # by key: in flight, or finished lately
        self._tasks: set[asyncio.Task[None]] = set()  # every run not yet ended, cancelled too

    def active(self) -> list[RunHandle]:
        return [h for h in self._runs.values() if not h.done.is_set()]

    def open(self, request: RunRequest) -> tuple[RunHandle, bool]:
        """The run for ``request``, and whether it was shared (already started by an identical
        request). APIError 429 when a new run would pass ``max_runs``."""
        self._forget_finished()
        handle = self._runs.get(request.key)
        if handle is not None:
            return handle, True
        if len(self.active()) >= self.settings.max_runs:
            wait = self.settings.retry_after
            raise APIError(
                429,
                f"all {self.settings.max_runs} run slots are busy (longread serve --max-runs); "
                f"retry in {wait} s",
                code="too_many_runs",
                headers={"Retry-After": str(wait)},
            )
        handle = RunHandle(request, new_run_id())
        self._runs[request.key] = handle
        handle.task = asyncio.create_task(self._execute(handle), name=f"run {handle.run_id}")
        self._tasks.add(handle.task)
        handle.task.add_done_callback(self._tasks.discard)
        return handle, False

    def attach(self, handle: RunHandle) -> None:
        handle.clients += 1
        handle.left = None

    def detach(self, handle: RunHandle) -> None:
        """A client stopped waiting; the last one's leaving starts the ``cancel_after`` clock."""
        handle.clients -= 1
        if handle.clients > 0 or handle.done.is_set():
            return
        handle.left = left = object()
        loop = asyncio.get_running_loop()
        loop.call_later(self.settings.cancel_after, self._cancel_if_abandoned, handle, left)

    async def close(self) -> None:
        """Cancel every run (the server is stopping) and wait for their traces."""
        for handle in self.active():
            self._cancel(handle, "the server is shutting down")
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def trace_path(self, handle: RunHandle) -> Path:
        """Where the run's trace goes: its client's folder (``ServeConfig.traces_dir``)."""
        return self.settings.traces_dir(handle.request.client) / f"{handle.run_id}.json"

    def _cancel_if_abandoned(self, handle: RunHandle, left: object) -> None:
        if handle.left is left and not handle.done.is_set():  # nobody came back since
            self._cancel(handle, "every client went away")

    def _cancel(self, handle: RunHandle, reason: str) -> None:
        handle.cancel_reason = reason
        if self._runs.get(handle.request.key) is handle:
            del self._runs[handle.request.key]  # a new identical request starts afresh
        if handle.task is not None:
            handle.task.cancel()

    def _forget_finished(self) -> None:
        now = time.monotonic()
        keep = self.settings.keep_finished
        for key, handle in list(self._runs.items()):
            if handle.finished_at is not None and now - handle.finished_at >= keep:
                del self._runs[key]

    async def _execute(self, handle: RunHandle) -> None:
        clock = time.perf_counter()
        run: Run | None = None
        error: APIError | None = None
        try:
            run = await asyncio.wait_for(self._read(handle), self.settings.run_timeout)
        except asyncio.TimeoutError:
            error = APIError(
                504,
                f"the run took longer than {self.settings.run_timeout:g} s "
                "(longread serve --run-timeout) and was stopped",
                code="run_timeout",
                headers=NO_RETRY,
            )
        except asyncio.CancelledError:
            reason = handle.cancel_reason or "cancelled"
            error = APIError(503, f"the run was cancelled: {reason}", code="run_cancelled")
        except Exception as exc:
            error = from_run_error(exc)
            if error.status == 500:
                log.error("run %s failed", handle.run_id, exc_info=exc)
        if error is not None or self.settings.keep_finished == 0:
            self._forget(handle)
        trace = run if run is not None else self._partial(handle, error, clock)
        await self._save(handle, trace)  # before the answer goes out: its trace URL must open
        handle.finish(run, error)
        log.info("run %s (%s) %s", handle.run_id, handle.request.agent, _outcome(run, error))

    async def _read(self, handle: RunHandle) -> Run:
        request = handle.request

        def progress(step: Step, expected_calls: int) -> None:
            handle.publish(Called(step, expected_calls))

        backend = self.agent_backends.get(request.agent, self.backend)
        agent = make_agent(
            request.agent, backend, self.tokenizer, request.config, progress,
            call_backends=self.call_backends.get(request.agent),
        )  # fmt: skip
        plan, chunks = await agent.chunks(request.question, request.document)
        handle.publish(Started(len(chunks), plan.chunk_tokens, plan.note()))
        # The server named the run before it started (the id went out in headers).
        run = await agent.run(request.question, chunks, run_id=handle.run_id)
        # Pages and sections in the trace, as in the response.
        run.citations = locate(run.citations, request.positions)
        return run

    def _forget(self, handle: RunHandle) -> None:
        if self._runs.get(handle.request.key) is handle:
            del self._runs[handle.request.key]

    def _partial(self, handle: RunHandle, error: APIError | None, clock: float) -> Run:
        """The trace of a run that did not finish: the calls it made, and why it ended."""
        request = handle.request
        steps = handle.steps()  # made with the run's id (``agent.run(run_id=...)``)
        reason = error.message if error is not None else "no answer"
        return Run(
            agent=request.agent,
            question=request.question,
            answer="",
            final_reply="",
            boxed=False,
            steps=steps,
            seconds=time.perf_counter() - clock,
            config=asdict(request.config),
            notes=[f"no answer: {reason}"],
            run_id=handle.run_id,
            started=handle.started,
        )

    async def _save(self, handle: RunHandle, run: Run) -> None:
        path = self.trace_path(handle)
        try:
            await asyncio.to_thread(_write, run, path)
        except OSError as exc:  # a full disk must not turn an answer into an error
            log.warning("could not write the trace of run %s to %s: %s", handle.run_id, path, exc)


def _write(run: Run, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    run.save(path)


def _outcome(run: Run | None, error: APIError | None) -> str:
    if run is not None:
        return f"answered: {run.calls} calls, {run.seconds:.1f} s"
    return f"ended without an answer: {error.message if error else 'unknown'}"
