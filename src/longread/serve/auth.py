"""Bearer keys: who may ask, and who a run belongs to (two keys never share a run, and each
key sees only its own runs' traces)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable, Sequence

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import APIError


def client_of(keys: Sequence[str], authorization: str | None, *, basic: bool = False) -> str:
    """The caller's name (a digest of its key; "" when the server has no keys). ``basic`` also
    takes the key as an HTTP Basic password, which browsers can send. APIError 401 else."""
    if not keys:
        return ""
    given = _given_key(authorization or "", basic)
    if given is not None:
        for key in keys:
            if hmac.compare_digest(given.encode(), key.encode()):
                return hashlib.sha256(key.encode()).hexdigest()[:16]
    what = "no API key" if given is None else "a wrong API key"
    raise APIError(
        401,
        f"this server needs an API key and the request has {what}: send "
        "'Authorization: Bearer KEY' (the openai client's api_key)",
        code="invalid_api_key",
    )


def _given_key(authorization: str, basic: bool) -> str | None:
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if basic and scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


class PerClient:
    """An ASGI app (the trace viewer) behind the server's keys, one per caller: ``make(client)``
    builds, once, the app that caller sees (the viewer of its own runs). Another caller's run
    is then simply not there: a 404, which does not even say that it exists. Browsers cannot
    send a bearer header, so the key is also taken as a Basic password, and a refusal asks for
    one. Without keys every caller is client "" and all see the same app."""

    def __init__(self, make: Callable[[str], ASGIApp], keys: Sequence[str]) -> None:
        self.make = make
        self.keys = tuple(keys)
        self._apps: dict[str, ASGIApp] = {}  # by client; as many as there are keys, at most

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the viewer has pages only
            await send({"type": "websocket.close", "code": 1008})
            return
        try:
            client = client_of(self.keys, Headers(scope=scope).get("authorization"), basic=True)
        except APIError as exc:
            headers = {"WWW-Authenticate": 'Basic realm="longread"'}
            response: JSONResponse = exc.response(headers)
            await response(scope, receive, send)
            return
        app = self._apps.get(client)
        if app is None:
            app = self._apps[client] = self.make(client)
        await app(scope, receive, send)
