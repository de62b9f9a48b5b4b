"""The server's settings: one dataclass, every field explained, checked when built."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..paths import cache_dir

MB = 1024 * 1024


def default_runs_dir() -> Path:
    """Where served runs' traces go unless ``--runs-dir`` says otherwise:
    ``$LONGREAD_CACHE_DIR/serve-runs``, else ``~/.cache/longread/serve-runs``."""
    return cache_dir() / "serve-runs"


@dataclass
class ServeConfig:
    """How ``longread serve`` answers. Defaults suit one user on the embedded CPU model."""

    # Bearer keys a client must send (``Authorization: Bearer KEY``); empty: no key needed.
    keys: tuple[str, ...] = ()
    # One ``<run id>.json`` trace per run (finished, failed or cancelled), for the viewer; with
    # keys, in one folder per key (``traces_dir``), each key seeing only its own.
    runs_dir: Path = field(default_factory=default_runs_dir)
    # Runs in progress at once; a request for another gets 429 with Retry-After. Identical
    # requests join the run in progress and never count twice.
    max_runs: int = 2
    # Wall-clock seconds one run may take, chunking included; past it the run is stopped
    # and its clients get a 504 (or an error frame when streaming).
    run_timeout: float = 3600.0
    # Largest request body, and largest document (UTF-8 bytes, after base64 decoding): 413.
    max_body_bytes: int = 64 * MB
    max_document_bytes: int = 32 * MB
    # Seconds between SSE comment lines (": keepalive") while a stream has nothing to say:
    # proxies and load balancers drop connections idle for about 60 s.
    keepalive: float = 15.0
    # Seconds a run goes on after its last client has gone, so that a client retrying after
    # a dropped connection or its own timeout joins it instead of starting over; then the run
    # is cancelled (no further backend calls).
    cancel_after: float = 10.0
    # Seconds a finished run's answer is given to identical requests (a retry that arrives
    # just after the run ended gets the answer, not a second run); 0 turns this off.
    keep_finished: float = 60.0
    # Retry-After (seconds) sent with 429 when every run slot is taken.
    retry_after: int = 10
    # Agent settings every request starts from (the CLI's agent flags); a request's own
    # ``longread`` options override them. Each agent takes the ones it has.
    agent_defaults: dict[str, Any] = field(default_factory=dict)
    # Per agent, the settings the embedded model's adapter was trained with (memagent and
    # memreread on the shipped memory adapter): beneath agent_defaults, above the agent's own.
    trained_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The agents whose adapter, or probe adapter, was trained to exit: a request that turns an
    # exit on for one of them reads with the grounded exit unless it, or a server flag, sets
    # grounded_exit (as ``ask`` does; a 135M model's yes was not safe without it).
    grounded_exit_agents: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.runs_dir = Path(self.runs_dir).expanduser()
        self.keys = tuple(k for k in self.keys if k)
        if self.max_runs < 1:
            raise UsageError("max_runs must be at least 1")
        for name in ("run_timeout", "keepalive"):
            if getattr(self, name) <= 0:
                raise UsageError(f"{name} must be a positive number of seconds")
        for name in ("cancel_after", "keep_finished"):
            if getattr(self, name) < 0:
                raise UsageError(f"{name} must not be negative")
        for name in ("max_body_bytes", "max_document_bytes"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be at least 1 byte")
        if self.retry_after < 0:
            raise UsageError("retry_after must not be negative")

    def traces_dir(self, client: str) -> Path:
        """The folder of the traces of ``client``'s runs (``auth.client_of``: a digest of its
        key, never the key). Without keys, everyone is client "" and every trace lies in
        ``runs_dir`` itself, as it always did; with keys, each key has its folder
        ``runs_dir/key-<digest>``, and the viewer shows a caller that folder only."""
        return self.runs_dir / f"key-{client}" if client else self.runs_dir
