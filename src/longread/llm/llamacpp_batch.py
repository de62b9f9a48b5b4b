"""Several embedded-model calls decoded together: one llama.cpp context, one sequence per call.

On a small CPU a 135M model's decode step is mostly fixed cost (graph building, thread wake-ups,
reading every weight once), so one ``llama_decode`` that steps N sequences costs little more
than one that steps a single sequence: tokens/s rise with the number of calls in flight.
``LlamaCppBackend(parallel=N)`` sends its calls here.

One worker owns the context, run on the process's compute thread (``compute_thread``) while
there is work. Each round it admits waiting calls while seats are free
(rendering and prefilling each prompt alone, in ``n_batch`` chunks as the serial path does),
then decodes one token for every active sequence in a single ``llama_decode`` and samples each
with its own sampler chain, seed and stopping rules (``llamacpp_chat``, the serial path's own).
A finished or cancelled call leaves the batch at once and its KV cells are freed for the next
call.

The KV cache is not unified: every sequence has its own stream of ``window`` cells, laid out as
the serial path's single sequence is, so a sequence's attention never reads another's cells.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BackendError, BudgetError
from . import compute_thread
from .base import Completion, Message, SamplingParams
from .llamacpp_chat import (
    Prompt,
    Sampled,
    Stopping,
    build_sampler,
    llama_error,
    render_prompt,
    row_logits,
    sampled_logprob,
    seed_as_create_completion,
    token_cap,
)


@dataclass
class _Call:
    messages: list[Message]
    params: SamplingParams
    future: concurrent.futures.Future[Completion]


@dataclass
class _Sequence:
    """A call being decoded: its seat (llama.cpp sequence id) and its sampling state."""

    seat: int
    call: _Call
    prompt: Prompt
    sampler: Any  # llama_cpp._internals.LlamaSampler, from llamacpp_chat.build_sampler
    rules: Stopping
    evaluated: Any  # np.ndarray: prompt + sampled ids, what the stopping criterion reads
    start: float
    last: int = -1  # the last sampled id, fed to the model in the next step

    @property
    def position(self) -> int:
        """Where ``last`` goes: after the prompt and the ids sampled before it."""
        return len(self.prompt.ids) + len(self.rules.ids) - 1


class BatchScheduler:
    """Decodes up to ``parallel`` chat calls at once on ``llama``'s model.

    ``llama`` (a loaded ``llama_cpp.Llama``) lends its model, tokenizer, chat template and LoRA
    adapter; its own context is left alone. ``window`` is each call's context window (prompt +
    completion); the KV cache holds ``parallel * window`` cells. A Completion's ``seconds``
    run from the call's admission (prefill included) to its last token, time shared with the
    other calls in the batch; time spent waiting for a seat is not counted.
    """

    def __init__(self, llama: Any, *, parallel: int, window: int, n_batch: int) -> None:
        import llama_cpp

        self._llama = llama
        self._window = window
        self._n_batch = n_batch
        self._n_vocab = int(llama.n_vocab())
        self._ctx = _batch_context(llama, parallel, window, n_batch)
        self._memory = llama_cpp.llama_get_memory(self._ctx.ctx)
        self._batch = llama_cpp.llama_batch_init(max(n_batch, parallel), 0, 1)
        self._parallel = parallel
        self._free_seats = list(range(parallel - 1, -1, -1))  # popped from the end: 0 first
        self._waiting: deque[_Call] = deque()
        self._admitting: list[_Call] = []  # taken from the queue, not yet in the batch
        self._active: list[_Sequence] = []
        self._lock = threading.Lock()
        self._worker: concurrent.futures.Future[None] | None = None

    def submit(
        self, messages: Sequence[Message], params: SamplingParams
    ) -> concurrent.futures.Future[Completion]:
        """Queue one call; its future ends with the Completion or the error.

        Cancelling the future takes the call out of the batch at the next step."""
        call = _Call(list(messages), params, concurrent.futures.Future())
        with self._lock:
            self._waiting.append(call)
            # The worker runs only while there is work, on the process's compute thread
            # (compute_thread: a thread per burst made every decode step slower).
            if self._worker is None:
                self._worker = compute_thread.submit(self._run)
        return call.future

    def close(self) -> None:
        """Wait for the worker to finish every call in flight, then free the context."""
        with self._lock:
            worker = self._worker
        if worker is not None:
            concurrent.futures.wait([worker])
        import llama_cpp

        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self._ctx.close()

    def kv_cells(self, seat: int) -> int:
        """How many KV cells the sequence in ``seat`` holds (0 when the seat is free)."""
        import llama_cpp

        return int(llama_cpp.llama_memory_seq_pos_max(self._memory, seat)) + 1

    # -- the worker -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._work()
        except BaseException as exc:  # a bug: every caller gets it rather than waiting forever
            self._fail_everything(exc)
            raise

    def _work(self) -> None:
        while True:
            with self._lock:
                while self._waiting and len(self._admitting) < len(self._free_seats):
                    call = self._waiting.popleft()
                    if not call.future.cancelled():
                        self._admitting.append(call)
                if not self._admitting and not self._active:
                    self._worker = None
                    return
                admitted = list(self._admitting)
            for call in admitted:
                self._admit(call)
            with self._lock:
                self._admitting.clear()
            self._drop_cancelled()
            if self._active:
                self._step()

    def _fail_everything(self, exc: BaseException) -> None:
        import llama_cpp

        with self._lock:
            calls = [s.call for s in self._active] + self._admitting + list(self._waiting)
            self._waiting.clear()
            self._admitting.clear()
            for sequence in self._active:
                sequence.sampler.close()
            self._active.clear()
            llama_cpp.llama_memory_clear(self._memory, True)
            self._free_seats = list(range(self._parallel - 1, -1, -1))
            self._worker = None
        for call in calls:
            _settle(call.future, error=exc)

    def _admit(self, call: _Call) -> None:
        """Render and prefill one call, and sample its first token."""
        seat = self._free_seats.pop()
        start = time.perf_counter()
        try:
            params = call.params
            prompt = render_prompt(self._llama, call.messages, params)
            max_tokens = token_cap(self._window, len(prompt.ids), call.params.max_tokens)
            # The serial path's seed, then its sampler: same draws for the same call.
            seed_as_create_completion(self._llama, call.params.seed)
            sampler = build_sampler(self._llama, call.params, int(self._llama._seed))
            row = self._prefill(seat, prompt.ids)
        except (ValueError, BudgetError, BackendError) as exc:
            self._free(seat)
            error = llama_error(exc, self._window) if isinstance(exc, ValueError) else exc
            _settle(call.future, error=error)
            return
        evaluated = _evaluated_buffer(prompt.ids, max_tokens)
        rules = Stopping(self._llama, prompt, max_tokens)
        sequence = _Sequence(seat, call, prompt, sampler, rules, evaluated, start)
        self._active.append(sequence)
        self._sample(sequence, row)

    def _prefill(self, seat: int, ids: list[int]) -> int:
        """Feed the prompt in ``n_batch`` chunks; the batch row of its last token's logits."""
        import llama_cpp

        for begin in range(0, len(ids), self._n_batch):
            chunk = ids[begin : begin + self._n_batch]
            # Logits for each chunk's last token, as Llama.eval asks: the last layer then works
            # on the same rows as in the serial path.
            rows = [(token, begin + i, seat, i == len(chunk) - 1) for i, token in enumerate(chunk)]
            self._fill(rows)
            code = llama_cpp.llama_decode(self._ctx.ctx, self._batch)
            if code != 0:
                raise BackendError(f"llama.cpp failed: llama_decode returned {code}")
        return len(ids[begin:]) - 1

    def _step(self) -> None:
        """Decode one token for every active sequence, then sample the next for each."""
        import llama_cpp

        active = list(self._active)
        self._fill([(s.last, s.position, s.seat, True) for s in active])
        code = llama_cpp.llama_decode(self._ctx.ctx, self._batch)
        if code != 0:
            for sequence in active:
                self._leave(sequence)
                error = BackendError(f"llama.cpp failed: llama_decode returned {code}")
                _settle(sequence.call.future, error=error)
            return
        for row, sequence in enumerate(active):
            self._sample(sequence, row)

    def _sample(self, sequence: _Sequence, row: int) -> None:
        """Sample ``sequence``'s next id from batch row ``row``; finish it if it ends there."""
        token = sequence.sampler.sample(self._ctx, row)
        recorded = sequence.call.params.record_tokens
        logprob = sampled_logprob(self._ctx.ctx, row, self._n_vocab, token) if recorded else 0.0
        criterion = sequence.prompt.stopping_criteria
        seen = len(sequence.prompt.ids) + len(sequence.rules.ids)
        # The chat format's criterion, called where Llama.generate calls it: on the ids the
        # model has read and the logits the id was sampled from, before the id is kept.
        if criterion is not None:
            logits = row_logits(self._ctx.ctx, row, self._n_vocab)
            if criterion(sequence.evaluated[:seen], logits):
                self._finish(sequence, sequence.rules.ran_dry())
                return
        done = sequence.rules.add(token, logprob)
        if done is not None:
            self._finish(sequence, done)
            return
        sequence.evaluated[seen] = token
        sequence.last = token

    def _finish(self, sequence: _Sequence, sampled: Sampled) -> None:
        self._leave(sequence)
        recorded = sequence.call.params.record_tokens
        completion = Completion(
            text=sampled.text.decode("utf-8", errors="ignore"),
            finish_reason=sampled.finish_reason,
            prompt_tokens=len(sequence.prompt.ids),
            # The plain path (create_chat_completion) does not count the end-of-generation id.
            completion_tokens=len(sampled.ids) - (sampled.eog and not recorded),
            seconds=time.perf_counter() - sequence.start,
            token_ids=sampled.ids if recorded else None,
            logprobs=sampled.logprobs if recorded else None,
            prompt_ids=sequence.prompt.ids if recorded else None,
        )
        _settle(sequence.call.future, completion=completion)

    def _drop_cancelled(self) -> None:
        for sequence in list(self._active):
            if sequence.call.future.cancelled():
                self._leave(sequence)

    def _leave(self, sequence: _Sequence) -> None:
        # Free the seat's cells before the sequence leaves ``_active``: a reader on another
        # thread that sees it gone from the batch then also sees its KV cells gone.
        sequence.sampler.close()
        self._free(sequence.seat)
        self._active.remove(sequence)

    def _free(self, seat: int) -> None:
        import llama_cpp

        llama_cpp.llama_memory_seq_rm(self._memory, seat, -1, -1)
        self._free_seats.append(seat)

    def _fill(self, rows: list[tuple[int, int, int, bool]]) -> None:
        """Write (token, position, sequence, wants logits) rows into the batch."""
        batch = self._batch
        batch.n_tokens = len(rows)
        for i, (token, pos, seat, logits) in enumerate(rows):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seat
            batch.logits[i] = logits


def _evaluated_buffer(prompt_ids: list[int], max_tokens: int) -> Any:
    import numpy as np

    buffer = np.zeros(len(prompt_ids) + max_tokens, dtype=np.intc)
    buffer[: len(prompt_ids)] = prompt_ids
    return buffer


def _batch_context(llama: Any, parallel: int, window: int, n_batch: int) -> Any:
    """A context beside ``llama``'s: same model, threads and adapter, ``parallel`` streams."""
    import llama_cpp
    from llama_cpp import _internals

    params = llama_cpp.llama_context_params.from_buffer_copy(llama.context_params)
    params.n_seq_max = parallel
    params.kv_unified = False  # a stream of `window` cells per sequence
    params.n_ctx = window * parallel
    params.n_batch = max(n_batch, parallel)
    context = _internals.LlamaContext(model=llama._model, params=params, verbose=False)
    adapter = getattr(llama, "_lora_adapter", None)
    if adapter is not None:
        adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(adapter)
        scales = (ctypes.c_float * 1)(llama.lora_scale)
        if llama_cpp.llama_set_adapters_lora(context.ctx, adapters, 1, scales):
            context.close()
            raise BackendError(f"llama.cpp could not apply the LoRA adapter {llama.lora_path}")
    return context


def _settle(
    future: concurrent.futures.Future[Completion],
    *,
    completion: Completion | None = None,
    error: BaseException | None = None,
) -> None:
    """Resolve a call's future unless its caller cancelled it meanwhile."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(completion)  # type: ignore[arg-type]
    except concurrent.futures.InvalidStateError:
        pass  # cancelled between our check and now: nobody is waiting
