"""Errors a user can act on, each with the CLI exit code it maps to.

Model misbehaviour (no box, overlong memory) is *not* an error: agents record it in the trace
and carry on. Programmer errors raise ordinary exceptions.
"""

from __future__ import annotations


class LongreadError(Exception):
    """Base class for errors that end a run with a one-line message."""

    exit_code = 1


class UsageError(LongreadError):
    """Bad input from the user: missing file, empty question, bad flag value."""

    exit_code = 2


class BackendError(LongreadError):
    """The LLM backend cannot be reached, rejected the request, or kept failing after retries."""

    exit_code = 3


class BudgetError(LongreadError):
    """A call cannot fit the backend's context window whatever the chunk size."""

    exit_code = 2
