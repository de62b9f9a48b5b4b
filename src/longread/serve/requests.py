"""A chat-completions request body, read and checked: which agent, which settings, which
document and question, how to answer (stream or not), and the key that identical requests share.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from ..agents.config import SamplingConfig
from ..agents.registry import AGENTS, make_config
from ..errors import UsageError
from ..text.positions import PositionMap
from .config import ServeConfig
from .documents import DocumentFile, Split, extract
from .errors import APIError, validation_message

MODEL_PREFIX = "longread-"
# What streamed reasoning shows: one line per model call, those lines plus the memory each
# update left, or nothing.
REASONING = ("progress", "memory", "none")
# Agent settings a request may not set: they name files on the server's disk.
SERVER_ONLY = frozenset({"prompt_dir"})


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_calls, ...: not read

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    """The OpenAI chat-completions body. Fields longread has no use for (max_tokens, user,
    tools, penalties, ...) are accepted and ignored, as OpenAI-compatible servers do; the
    agents' own budgets (``longread`` options) bound every call."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    n: int | None = None
    longread: dict[str, Any] | None = None


@dataclass(frozen=True)
class RunRequest:
    """One request, resolved: what to run, and how this client wants to see it."""

    model: str  # as the client named it
    agent: str
    question: str
    document: str
    split: Split
    config: SamplingConfig
    reasoning: str
    stream: bool
    include_usage: bool
    key: str  # identical runs (same client key, agent, settings, question, document) share it
    client: str = ""  # who asked (``auth.client_of``): the run and its trace are theirs alone
    # Where the document's pages and sections start, and its files (file parts only): what
    # locates the run's citations and names the file each one is in.
    positions: PositionMap = field(default_factory=PositionMap)
    files: tuple[DocumentFile, ...] = ()


def model_id(agent: str) -> str:
    return MODEL_PREFIX + agent


def parse_body(raw: bytes) -> ChatRequest:
    """The body as a ChatRequest; APIError 400 (never a 422) saying what is wrong."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise APIError(
            400, f"the request body is not valid JSON: {exc}", code="invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise APIError(400, "the request body must be a JSON object", code="invalid_request")
    try:
        return ChatRequest.model_validate(data)
    except ValidationError as exc:
        message, param = validation_message(list(exc.errors()))
        raise APIError(400, message, code="invalid_request", param=param) from None


def resolve(body: ChatRequest, settings: ServeConfig, client: str) -> RunRequest:
    """What ``body`` asks for. ``client`` names the caller (its key's hash, or ""): two callers
    never share a run."""
    agent = agent_for(body.model)
    if body.n not in (None, 1):
        raise APIError(
            400, "n must be 1: a run gives one answer", code="invalid_request", param="n"
        )
    extension = dict(body.longread or {})
    document = extension.pop("document", None)
    if document is not None and not isinstance(document, str):
        raise _bad("longread.document must be a string (the document's text)", "longread.document")
    reasoning = extension.pop("reasoning", "progress")
    if reasoning not in REASONING:
        raise _bad(
            f"longread.reasoning must be one of {', '.join(REASONING)}", "longread.reasoning"
        )
    defaults = {**settings.trained_defaults.get(agent, {}), **settings.agent_defaults}
    config = _config(agent, body, extension, defaults, agent in settings.grounded_exit_agents)
    messages = [m.model_dump() for m in body.messages]
    found = extract(messages, document, settings.max_document_bytes)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    key = run_key(client, agent, config, found.question, found.document, found.positions)
    return RunRequest(
        body.model, agent, found.question, found.document, found.split, config,
        reasoning, body.stream, include_usage, key, client, found.positions, found.files,
    )  # fmt: skip


def agent_for(model: str) -> str:
    """The agent a model id names: ``longread-memagent`` (or just ``memagent``); 404 else."""
    name = model.removeprefix(MODEL_PREFIX)
    if name not in AGENTS:
        known = ", ".join(model_id(a) for a in AGENTS)
        raise APIError(
            404, f"model {model!r} does not exist here; models: {known}",
            code="model_not_found", param="model",
        )  # fmt: skip
    return name


def run_key(
    client: str,
    agent: str,
    config: SamplingConfig,
    question: str,
    document: str,
    positions: PositionMap | None = None,
) -> str:
    """A digest of everything that decides a run's answer and its trace: requests with the
    same one are the same run (a retry, a second tab) and share it. The positions count: the
    same text from two PDFs paged differently cites different pages."""
    inputs = {
        "client": client,
        "agent": agent,
        "config": asdict(config),
        "question": question,
        "document": hashlib.sha256(document.encode("utf-8", errors="replace")).hexdigest(),
        "positions": positions.to_list() if positions else [],
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def _config(
    agent: str,
    body: ChatRequest,
    extension: dict[str, Any],
    defaults: dict[str, Any],
    grounds_exits: bool = False,
) -> SamplingConfig:
    """The agent's config: its paper defaults, then the server's defaults, then the body's
    standard sampling fields, then the request's ``longread`` options; with ``grounds_exits``
    (its adapter was trained to exit), an exit turned on reads with the grounded exit unless
    ``grounded_exit`` was set."""
    names = option_types(agent)
    takes = AGENTS[agent].option_names()  # the server's own defaults may set prompt_dir
    options = {k: v for k, v in defaults.items() if k in takes and v is not None}
    standard = {"temperature": body.temperature, "top_p": body.top_p, "seed": body.seed}
    options.update({k: v for k, v in standard.items() if v is not None})
    for name, value in extension.items():
        if name in SERVER_ONLY:
            raise _bad(
                f"longread.{name} is a server setting (longread serve --prompt-dir)",
                f"longread.{name}",
            )
        if name not in names:
            allowed = ", ".join(sorted(names))
            raise _bad(
                f"longread.{name} does not apply to {model_id(agent)}; it takes document, "
                f"reasoning, {allowed}",
                f"longread.{name}",
            )
        options[name] = _typed(names[name], value, f"longread.{name}")
    exits = options.get("exit_probe") or options.get("exit_gate")
    if grounds_exits and exits and options.get("grounded_exit") is None:
        options["grounded_exit"] = True
    try:
        return make_config(agent, **options)
    except UsageError as exc:
        raise _bad(str(exc), "longread") from None


@cache
def option_types(agent: str) -> dict[str, Any]:
    """The settings a request may give ``agent``, with their types."""
    hints = get_type_hints(AGENTS[agent].config)
    return {name: hints[name] for name in AGENTS[agent].option_names() - SERVER_ONLY}


def _typed(kind: Any, value: Any, param: str) -> Any:
    try:
        return TypeAdapter(kind).validate_python(value, strict=True)
    except ValidationError as exc:
        message, _ = validation_message(list(exc.errors()))
        raise _bad(f"{param}: {message}", param) from None


def _bad(message: str, param: str | None) -> APIError:
    return APIError(400, message, code="invalid_request", param=param)
