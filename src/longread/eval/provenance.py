"""How an evaluation run was built: the configuration saved as its ``config.json``.

``run_config`` resolves everything a run depends on without loading a model or asking a
server: the agent and its settings, the data (by path, and by a hash of its samples' content,
which is what a resume compares), the backend that will actually run (``backend_record``) and
the versions. ``RunStore.save_config`` then writes it with portable paths and no secrets
(``sanitize``), or checks a resume against it (``resume``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from .. import __version__
from ..data.records import Sample
from ..errors import UsageError
from ..llm.factory import BackendSettings
from ..llm.gguf import DEFAULT_QUANT, SMOLLM2_CONTEXT, plan_model_file
from .sanitize import redact_secrets

# The keys of run_config that identify the data (data_identity's), kept together on adoption.
DATA_IDENTITY = ("data_hash", "sample_ids_hash", "samples")


def run_config(
    agent: str,
    agent_config: dict[str, Any],
    settings: BackendSettings,
    data: str | Path,
    samples: Sequence[Sample] | None = None,
    record_tokens: bool = False,
) -> dict[str, Any]:
    """The resolved configuration saved with a run: enough to rebuild or resume it.
    ``record_tokens`` says whether traces keep token ids (a resume must not mix the two).

    ``samples`` are every sample read from ``data`` (before any ``--limit``, so a resume with
    another limit still matches); their content is hashed into ``data_hash``, which is what a
    resume compares. ``backend`` is what will actually run: the resolved backend name, for
    llama.cpp the model file and quantisation it loads, for a server its URL and model; the
    API key is never written, nor credentials in the URL or ``extra_body``. Paths are
    absolute here; ``RunStore.save_config`` writes them so they travel with the folder."""
    config: dict[str, Any] = {
        "agent": agent,
        "agent_config": agent_config,
        "record_tokens": record_tokens,
        "data": str(Path(data).expanduser().resolve()),
    }
    if samples is not None:
        config.update(data_identity(samples))
    config.update({"backend": backend_record(settings), "versions": _versions(), "started": now()})
    return config


def data_identity(samples: Sequence[Sample]) -> dict[str, Any]:
    """``data_hash``: sha256 over every sample's id, question, context and answers, in no
    particular order (a folder read in another order, or the same samples in another file or
    format, match; ``meta`` is left out since formats fill it differently). A changed sample
    changes it. ``sample_ids_hash`` (the ids alone) and ``samples`` (the count) tell a refused
    resume whether the samples changed or are other samples."""
    ids = json.dumps(sorted(s.id for s in samples))
    return {
        "data_hash": combined_hash(sample_digest(s) for s in samples),
        "sample_ids_hash": "sha256:" + hashlib.sha256(ids.encode()).hexdigest(),
        "samples": len(samples),
    }


def sample_digest(sample: Sample) -> str:
    """One sample's share of ``data_hash`` (a reader may hash samples one at a time)."""
    content = json.dumps([sample.id, sample.question, sample.context, sample.answers])
    return hashlib.sha256(content.encode()).hexdigest()


def combined_hash(digests: Iterable[str]) -> str:
    """``data_hash`` of the samples with these ``sample_digest`` values, in any order."""
    return "sha256:" + hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()


def backend_record(settings: BackendSettings) -> dict[str, Any]:
    """The backend ``make_backend(settings)`` builds, resolved ("auto" becomes the backend
    chosen); no model is loaded or converted, and the API key and any credentials in the URL
    or ``extra_body`` are left out."""
    resolved = settings.resolved_backend()
    record: dict[str, Any] = {"backend": resolved, "requested": settings.backend}
    if resolved == "openai":
        record.update(
            base_url=_server_url(settings.base_url),
            model=settings.model,  # None: the server's first model, discovered when run
            context_window=settings.context_window,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            extra_body=redact_secrets(settings.extra_body),
        )
    else:
        record.update(_model_record(settings.gguf, settings.quant))
        record["n_ctx"] = settings.n_ctx or SMOLLM2_CONTEXT  # as make_backend defaults it
        adapter = settings.applied_adapter()
        if adapter:
            record.update(_adapter_record(adapter, settings.adapter_scale))
        calls = settings.applied_call_adapters()
        if calls:  # only then: older runs' records stay as they were
            record["call_adapters"] = {
                kind: _adapter_record(path, 1.0) for kind, path in calls.items()
            }
        record["parallel"] = settings.parallel  # batched decoding (None: one call at a time)
        record["lookup_decoding"] = settings.resolved_lookup_decoding()
    record["max_concurrency"] = settings.max_concurrency
    record["tokenizer"] = _absolute(settings.tokenizer)
    return record


def now() -> str:
    """The time now, UTC, to the second, as ``config.json`` and the store write it."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _server_url(base_url: str | None) -> str | None:
    """The server URL the OpenAI backend will use (the flag, else ``OPENAI_BASE_URL``),
    without credentials."""
    from ..llm.openai import normalise_base_url  # httpx is only needed for a server run

    url = base_url or os.environ.get("OPENAI_BASE_URL")
    return redact_secrets(normalise_base_url(url)) if url else None


def _model_record(gguf: str | None, quant: str | None) -> dict[str, Any]:
    """The model file llama.cpp will load (``gguf.plan_model_file``: nothing is converted). A
    model that cannot be found is recorded with the reason (building the backend then fails
    with the same message) rather than failing here."""
    try:
        choice = plan_model_file(gguf, quant)
    except UsageError as exc:
        fallback = (quant or ("original" if gguf else DEFAULT_QUANT)).lower()
        return {"model_file": None, "model_path": None, "quant": fallback, "model_error": str(exc)}
    return {
        "model_file": choice.path.name,
        "model_path": str(choice.path.resolve()),
        "source": str(choice.source.resolve()),
        "quant": choice.quant,
    }


def _adapter_record(adapter: str, scale: float) -> dict[str, Any]:
    """The LoRA adapter file and its content hash (a resume must apply the same adapter)."""
    from ..llm.llamacpp import check_adapter_file

    path = check_adapter_file(adapter)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {
        "adapter": str(path.resolve()),
        "adapter_sha256": "sha256:" + digest.hexdigest(),
        "adapter_scale": scale,
    }


def _absolute(path: str | None) -> str | None:
    """An existing path made absolute; anything else (a hub name, None) as given."""
    if path is None or not Path(path).expanduser().exists():
        return path
    return str(Path(path).expanduser().resolve())


def _versions() -> dict[str, str]:
    found = {"longread": __version__, "python": platform.python_version()}
    # The metadata, not an import: importing llama_cpp loads the native library.
    with contextlib.suppress(PackageNotFoundError):
        found["llama_cpp"] = version("llama_cpp_python")
    return found
