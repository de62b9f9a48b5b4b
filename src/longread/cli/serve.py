"""``longread serve``: the agents behind an OpenAI-compatible API (one model per agent)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import Any

import click

from ..agents.registry import AGENTS, make_config
from ..errors import UsageError
from ..llm.base import LLMBackend
from ..llm.factory import (
    BackendSettings,
    backend_with_adapter,
    make_backend,
    make_call_backends,
    make_tokenizer,
)
from ..llm.trained_settings import TrainedSettings
from ..text.tokenizer import Tokenizer
from .options import (
    adapter_trained_settings,
    agent_options,
    backend_options,
    backend_settings,
    describe_filled,
    describe_grounded,
    grounds_its_exits,
    probe_adapter_trained_to_exit,
    shipped_reading,
    trained_settings_apply,
)

MB = 1024 * 1024


@click.command(name="serve")
@backend_options
@agent_options
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback wants --serve-api-key.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8040,
    show_default=True,
    help="Port to listen on; 0 picks a free one.",
)
@click.option(
    "--serve-api-key",
    "keys",
    multiple=True,
    envvar="LONGREAD_SERVE_API_KEYS",
    help="Key clients must send (Authorization: Bearer KEY); repeat for several "
    "[$LONGREAD_SERVE_API_KEYS, space-separated; none: no key needed]. "
    "(--api-key is the upstream server's key, as in ask.)",
)
@click.option(
    "--runs-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for each run's trace (<run id>.json), shown at /view "
    "[$LONGREAD_CACHE_DIR/serve-runs, else ~/.cache/longread/serve-runs].",
)
@click.option(
    "--max-runs",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Runs at once; more get 429 with Retry-After (identical requests share one).",
)
@click.option(
    "--run-timeout",
    type=click.FloatRange(min=1),
    default=3600.0,
    show_default=True,
    help="Wall-clock seconds a run may take before it is stopped (504).",
)
@click.option(
    "--max-body-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=64.0,
    show_default=True,
    help="Largest request body (413 past it).",
)
@click.option(
    "--max-document-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=32.0,
    show_default=True,
    help="Largest document, as UTF-8 text (413 past it).",
)
@click.option(
    "--keepalive",
    type=click.FloatRange(min=0.1),
    default=15.0,
    show_default=True,
    help="Seconds between ': keepalive' lines while a stream has nothing to say.",
)
@click.option(
    "--cancel-after",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds a run goes on after its last client left (for a retry to join).",
)
@click.option(
    "--keep-finished",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds a finished answer is given to identical requests (0: never).",
)
def serve_command(
    host: str,
    port: int,
    keys: tuple[str, ...],
    runs_dir: Path | None,
    max_runs: int,
    run_timeout: float,
    max_body_mb: float,
    max_document_mb: float,
    keepalive: float,
    cancel_after: float,
    keep_finished: float,
    **options: Any,
) -> None:
    """Serve every agent over an OpenAI-compatible API: GET /v1/models lists one model per
    agent (longread-memagent, ...), POST /v1/chat/completions answers about the document a
    request carries (streamed or not). Backend flags as for ask; agent flags are every
    request's defaults."""
    try:
        from ..asgi import bind, is_loopback, serve, url
        from ..serve import ServeConfig, create_app, default_runs_dir, stop_runs
    except ImportError as exc:
        raise UsageError(
            f"longread serve needs the serve extra ({exc.name} is missing): "
            "pip install 'longread[serve]'"
        ) from None
    settings = backend_settings(options)
    settings.resolved_backend()  # a bad backend flag is refused now, not at the first request
    defaults = {k: v for k, v in options.items() if v is not None}
    _check_defaults(defaults)
    trained = _trained_defaults(settings, defaults)
    config = ServeConfig(
        keys=tuple(keys),
        runs_dir=runs_dir or default_runs_dir(),
        max_runs=max_runs,
        run_timeout=run_timeout,
        max_body_bytes=int(max_body_mb * MB),
        max_document_bytes=int(max_document_mb * MB),
        keepalive=keepalive,
        cancel_after=cancel_after,
        keep_finished=keep_finished,
        agent_defaults=defaults,
        trained_defaults=trained,
        grounded_exit_agents=_grounded_exit_agents(settings),
    )
    if not config.keys and not is_loopback(host):
        click.echo(
            f"longread: warning: listening on {host} with no --serve-api-key: anyone who can "
            "reach this port can run the model and read every document, question and answer "
            "sent to it (the traces at /view)",
            err=True,
        )
    prepared = _Prepared(settings)
    app = create_app(prepared.get, config, prepared.agent_backends, prepared.call_backends)
    sock = bind(host, port)
    address = url(sock)

    def ready() -> None:
        click.echo(f"longread serve: {address}/v1  (traces: {config.runs_dir}; Ctrl-C stops)")

    verbose = logging.getLogger("longread").isEnabledFor(logging.INFO)
    # Ctrl-C or SIGTERM is how a server is stopped: serve() returns once the runs have ended
    # and their traces are written. A KeyboardInterrupt is a Ctrl-C that came before the
    # server's own handlers were in place (or after they were gone): a stop all the same.
    with contextlib.suppress(KeyboardInterrupt):
        serve(
            app, sock, ready,
            prepare=prepared.build, on_stop=lambda: stop_runs(app), verbose=verbose,
        )  # fmt: skip
    click.echo("longread serve: stopped", err=True)


def _check_defaults(defaults: dict[str, Any]) -> None:
    """Refuse agent flags now that no agent could take (each agent takes the ones it has)."""
    for name, spec in AGENTS.items():
        make_config(name, **{k: v for k, v in defaults.items() if k in spec.option_names()})


def _trained_defaults(
    settings: BackendSettings, defaults: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Per agent, the settings its applied adapter was trained or shipped with that no flag
    sets (only the agents that read as it was trained: ``trained_settings_apply``), said once
    for the agents an adapter fills alike."""
    readers: dict[tuple[str, str], list[str]] = {}  # (adapter, what it fills): its agents
    found_for: dict[tuple[str, str], tuple[TrainedSettings, dict[str, Any]]] = {}
    for agent in AGENTS:
        agent_settings = dataclasses.replace(settings, agent=agent)
        found = adapter_trained_settings(agent_settings)
        if found is None or not trained_settings_apply(agent, found[1]):
            continue
        filled = shipped_reading(found[1], agent_settings, defaults)
        key = (found[0], repr(sorted(filled.items())))
        readers.setdefault(key, []).append(agent)
        found_for[key] = found[1], filled
    trained_defaults: dict[str, dict[str, Any]] = {}
    for key, agents in readers.items():
        name, (trained, filled) = key[0], found_for[key]
        if not filled:
            continue
        for said in describe_filled(name, filled, trained):
            click.echo(
                f"longread: {said}; for {', '.join(agents)} requests that do not set them",
                err=True,
            )
        if grounds_its_exits(trained, {**defaults, **filled}):
            filled = {**filled, "grounded_exit": True}
            click.echo(f"longread: {describe_grounded(name)}", err=True)
        trained_defaults.update({agent: filled for agent in agents})
    for agent in AGENTS:  # a probe adapter trained to exit grounds the exits it says yes to
        probe = probe_adapter_trained_to_exit(dataclasses.replace(settings, agent=agent))
        filled = trained_defaults.get(agent, {})
        if probe is not None and grounds_its_exits(probe[1], {**defaults, **filled}):
            trained_defaults[agent] = {**filled, "grounded_exit": True}
            click.echo(f"longread: {describe_grounded(probe[0])} ({agent})", err=True)
    return trained_defaults


def _grounded_exit_agents(settings: BackendSettings) -> frozenset[str]:
    """The agents whose exits read grounded when a request turns one on: their adapter (one
    they read as trained) or their probe adapter was trained to exit."""
    grounded = set()
    for agent in AGENTS:
        agent_settings = dataclasses.replace(settings, agent=agent)
        found = adapter_trained_settings(agent_settings)
        own = found[1] if found and trained_settings_apply(agent, found[1]) else None
        own_exits = own is not None and own.trained_to_exit
        if own_exits or probe_adapter_trained_to_exit(agent_settings) is not None:
            grounded.add(agent)
    return frozenset(grounded)


class _Prepared:
    """The backend and its tokenizer, built in the server's event loop before it listens (the
    HTTP backend's connections belong to that loop), handed to the app when it starts; and
    the backends an agent needs beside it: its own shipped adapter for all its calls, or for
    some kinds of call (MemReread's decisions; ``--decision-adapter``). The bundled model then
    runs once per adapter, each loaded on its first call, sharing the tokenizer."""

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        self.pair: tuple[LLMBackend, Tokenizer] | None = None
        self.own: dict[str, LLMBackend] = {}
        self.calls: dict[str, dict[str, LLMBackend]] = {}

    async def build(self) -> None:
        backend = make_backend(self.settings)
        try:
            tokenizer = await make_tokenizer(backend, self.settings)
            self._agent_backends()
        except BaseException:
            await backend.aclose()
            raise
        self.pair = (backend, tokenizer)

    def _agent_backends(self) -> None:
        """Each agent's backends that are not the shared one's (one per adapter)."""
        if self.settings.resolved_backend() != "llamacpp":
            return
        shared = self.settings.applied_adapter()
        by_adapter: dict[str, LLMBackend] = {}
        for agent in AGENTS:
            settings = dataclasses.replace(self.settings, agent=agent)
            adapter = settings.applied_adapter()
            if adapter and adapter != shared:
                self.own[agent] = backend_with_adapter(settings, adapter, by_adapter)
            calls = make_call_backends(settings, by_adapter)
            if calls:
                self.calls[agent] = calls

    async def get(self) -> tuple[LLMBackend, Tokenizer]:
        assert self.pair is not None, "build() runs before the app starts"
        return self.pair

    def agent_backends(self) -> dict[str, LLMBackend]:
        return self.own

    def call_backends(self) -> dict[str, dict[str, LLMBackend]]:
        return self.calls
