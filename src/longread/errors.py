"""Errors a user can act on, each with the CLI exit code it maps to.

Model misbehaviour (no box, overlong memory) is *not* an error: agents record it in the trace
and carry on. Programmer errors raise ordinary exceptions.
"""

from __future__ import annotations


class LongreadError(Exception):
    """Base class for errors that end a run with a one-line message.

    ``transient`` tells server trouble that a rerun may not meet again (5xx, 429, timeouts, lost
    connections, all retries spent) from a cause a rerun meets again until someone fixes it (a
    bad flag, a window too small, a request the server rejects): ``eval run`` says which."""

    exit_code = 1
    transient = False


class UsageError(LongreadError):
    """Bad input from the user: missing file, empty question, bad flag value."""

    exit_code = 2


class BackendError(LongreadError):
    """The LLM backend cannot be reached, rejected the request, or kept failing after retries
    (``transient=True``: the retries were spent on server trouble)."""

    exit_code = 3

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class BudgetError(LongreadError):
    """A call cannot fit the backend's context window whatever the chunk size."""

    exit_code = 2
