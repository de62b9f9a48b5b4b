"""Every error the server sends, in OpenAI's shape: ``{"error": {message, type, param, code}}``.

Clients (the official ``openai`` package above all) read that shape and raise typed errors with
its message. FastAPI's own shapes (a 422 ``{"detail": ...}`` for a bad body, ``{"detail": "Not
Found"}``) and tracebacks never reach a client: ``install_error_handlers`` replaces them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ..errors import BackendError, BudgetError, LongreadError, UsageError

log = logging.getLogger(__name__)

# The ``type`` OpenAI gives each status; clients key their exception classes off the status.
_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "timeout_error",
}
# Statuses the openai client retries by default (408/409/429/5xx) that a retry cannot fix.
NO_RETRY = {"x-should-retry": "false"}


class APIError(Exception):
    """An error answered to the client: HTTP status, one clear message, OpenAI's fields."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": {"message", "type", "param", "code"}}``."""
        kind = _TYPES.get(
            self.status, "server_error" if self.status >= 500 else "invalid_request_error"
        )
        return {
            "error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}
        }

    def response(self, extra_headers: dict[str, str] | None = None) -> JSONResponse:
        headers = {**self.headers, **(extra_headers or {})}
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def from_run_error(exc: BaseException) -> APIError:
    """The client's view of what ended a run: the user's mistakes are 400s, a backend that
    failed (after its own retries) a 502, anything else a 500 whose details stay in the log."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, (UsageError, BudgetError)):
        code = "context_length_exceeded" if isinstance(exc, BudgetError) else "invalid_request"
        return APIError(400, str(exc), code=code, headers=NO_RETRY)
    if isinstance(exc, BackendError):
        return APIError(
            502, f"the model backend failed: {exc}", code="backend_error", headers=NO_RETRY
        )
    if isinstance(exc, LongreadError):
        return APIError(500, str(exc), code="run_failed", headers=NO_RETRY)
    return internal_error()


def internal_error() -> APIError:
    return APIError(
        500, "internal server error; the server's log has the details", code="internal_error"
    )


def validation_message(errors: list[Any]) -> tuple[str, str | None]:
    """One line naming the first problem in a pydantic error list, and the field (``param``)."""
    if not errors:
        return "invalid request body", None
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    message = first.get("msg", "invalid value")
    return (f"{where}: {message}" if where else message), (where or None)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error, FastAPI's and Starlette's included, in OpenAI's shape."""

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = validation_message(list(exc.errors()))
        return APIError(400, message, code="invalid_request", param=param).response()

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return APIError(exc.status_code, message, code=code, headers=exc.headers).response()

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return internal_error().response()
