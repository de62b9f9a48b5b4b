"""One thread for every OpenMP computation in the process: llama.cpp's, and torch's in training.

llama.cpp's CPU backend (built with OpenMP, as the llama-cpp-python wheel is here) runs each
graph in an OpenMP team owned by the calling thread, and the team outlives the call; torch's
CPU build does the same, through the same libgomp. Once more OpenMP threads are alive than
there are CPUs, libgomp stops spinning at its barriers and sleeps in the kernel instead, and a
decode step passes hundreds of barriers. Measured on this 2-core machine: one decode step of
SmolLM2-135M took 11 ms when every step ran on one thread, 36-49 ms once another thread had run
a step before (its idle team still counted), and 36 ms after torch had multiplied matrices on
the main thread. ``asyncio.to_thread`` spreads calls over a pool of threads, the batch
scheduler used to start a thread per burst of work, and the trainer ran torch on the main
thread between llama.cpp rollouts: all paid this.

Running every such computation on the one thread below keeps a single team alive, whatever
thread the caller is on. The thread is made on first use and lives as long as the process; an
idle one costs nothing and does not keep the interpreter from exiting.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_NAME = "longread-compute"
_executor: concurrent.futures.ThreadPoolExecutor | None = None
_lock = threading.Lock()


def compute_executor() -> concurrent.futures.ThreadPoolExecutor:
    """The process's compute thread (an executor with one worker), made on first use."""
    global _executor
    with _lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=_NAME
            )
        return _executor


def submit(function: Callable[..., T], *args: object) -> concurrent.futures.Future[T]:
    """Run ``function(*args)`` on the compute thread, after the work queued before it.

    Called from the compute thread itself, it runs ``function`` at once: queued, it would
    wait for the very work that waits for it."""
    if threading.current_thread().name.startswith(_NAME):
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            done.set_result(function(*args))
        except BaseException as exc:
            done.set_exception(exc)
        return done
    return compute_executor().submit(function, *args)


def call(function: Callable[..., T], *args: object) -> T:
    """``function(*args)`` run on the compute thread; blocks the caller until it is done."""
    return submit(function, *args).result()


async def run(function: Callable[..., T], *args: object) -> T:
    """Await ``function(*args)`` run on the compute thread (``asyncio.to_thread``'s twin)."""
    return await asyncio.wrap_future(submit(function, *args))
