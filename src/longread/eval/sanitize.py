"""What a run folder may hold: paths that still lead to the right files after the folder is
moved, copied or cloned, and no secrets.

Paths (``PATH_KEYS``, and each call adapter's under ``backend.call_adapters``) are written, in
this order of preference:

1. relative to the run folder when they lie inside it (the folder carries its own data);
2. relative to the run folder when they lie in the same repository (the nearest folder above
   the run holding ``.git``): a clone has the run and its data side by side again, wherever
   it is checked out (``results/v2/runs/X`` reads ``../../data/Y``);
3. under ``~`` when they lie in the home folder (another machine's home has another name);
4. as given otherwise. The data is identified by its hash (``data_hash``) in any case, so a
   path that leads nowhere any more costs the viewer its gold answers, never a wrong resume.

Secrets: a server URL keeps no ``user:password@``, query parameters that look like keys are
replaced, and so are ``extra_body`` entries whose name looks like a credential (``api_key``,
``token``, ``Authorization``...). The API key itself is never recorded at all.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

# Paths in config.json: a top-level key, or (section, key). A list of paths (the trainer's
# held-out data) is written path by path.
PATH_KEYS: tuple[tuple[str, ...], ...] = (
    ("data",),
    ("backend", "model_path"),
    ("backend", "source"),
    ("backend", "tokenizer"),
    ("backend", "adapter"),
)
REDACTED = "<redacted>"

# Key names that hold credentials. Parts are looked for in the name lower-cased with its
# separators removed, so "X-Api-Key" and "client_secret" are caught; words must be whole words
# of the name, so "hf_token" and "accessToken" are caught but "max_tokens" (a count, not a
# token) and "tokenizer" are not.
_SECRET_PARTS = ("apikey", "accesskey", "privatekey", "secret", "password", "passwd",
                 "passphrase", "credential")  # fmt: skip
_SECRET_WORDS = {"token", "auth", "authorization", "bearer", "cookie", "signature"}
# A URL's query may also name its key plainly (Google's ``?key=``, signed URLs' ``sig``).
_SECRET_PARAMS = {"key", "sig"}
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# scheme://user[:password]@ in any text (an error message names the URL it failed on).
_USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@]+@")
_QUERY_PARAM = re.compile(r"([?&])([^=&#\s]+)=([^&#\s]*)")


def portable_paths(config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """``config`` (changed in place) with every path of ``PATH_KEYS`` and of the ``resumed``
    entries written as ``portable_path`` says."""
    for entry in [config, *_dicts(config.get("resumed"))]:
        for *sections, key in PATH_KEYS:
            holder: Any = entry
            for section in sections:
                holder = holder.get(section) if isinstance(holder, dict) else None
            if not isinstance(holder, dict) or key not in holder:
                continue
            value = holder[key]
            if isinstance(value, str):
                holder[key] = portable_path(value, run_dir)
            elif isinstance(value, list):
                holder[key] = [
                    portable_path(v, run_dir) if isinstance(v, str) else v for v in value
                ]
        _portable_call_adapters(entry.get("backend"), run_dir)
    return config


def _portable_call_adapters(backend: Any, run_dir: Path) -> None:
    """The adapter of each kind of call with one of its own (``call_adapters``: the exit
    probe's, MemReread's decisions), written as ``portable_path`` says."""
    calls = backend.get("call_adapters") if isinstance(backend, dict) else None
    for record in (calls or {}).values():
        if isinstance(record, dict) and isinstance(record.get("adapter"), str):
            record["adapter"] = portable_path(record["adapter"], run_dir)


def portable_path(value: str, run_dir: Path) -> str:
    """An absolute ``value`` written so it travels (see the module's docstring); a relative
    one (already relative to the run folder, or a hub name) as it is."""
    if not Path(value).is_absolute():
        return value
    path, root = Path(value).resolve(), run_dir.resolve()
    if path.is_relative_to(root):
        return path.relative_to(root).as_posix()
    repository = _repository(root)
    if repository is not None and path.is_relative_to(repository):
        return Path(os.path.relpath(path, root)).as_posix()
    home = _home()
    if home is not None and path.is_relative_to(home):
        return "~/" + path.relative_to(home).as_posix()
    return str(path)


def _home() -> Path | None:
    """The home folder, None when there is none to speak of (unset, or ``/``)."""
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError):  # no HOME and no password entry
        return None
    return None if home == Path(home.anchor) else home


def resolve_path(value: str, run_dir: Path) -> Path:
    """Where a path written by ``portable_path`` points, read from ``run_dir``."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else run_dir / path


def _repository(folder: Path) -> Path | None:
    """The nearest folder at or above ``folder`` that is a git checkout (``.git`` is a folder,
    or a file in a worktree), else None."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# -- secrets ---------------------------------------------------------------------------------


def without_secrets(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (changed in place) with no credentials in the backend records of the run and
    of each resumed session: URLs without userinfo or key-like query parameters,
    ``extra_body`` without secret-looking entries."""
    for entry in [config, *_dicts(config.get("resumed"))]:
        backend = entry.get("backend")
        if not isinstance(backend, dict):
            continue
        if isinstance(backend.get("base_url"), str):
            backend["base_url"] = redact_text(backend["base_url"])
        if "extra_body" in backend:
            backend["extra_body"] = redact_secrets(backend["extra_body"])
    return config


def redact_secrets(value: Any) -> Any:
    """``value`` with the values of secret-looking keys replaced by ``REDACTED`` (at any depth:
    ``{"headers": {"Authorization": ...}}`` too) and URLs in strings stripped of
    credentials."""
    if isinstance(value, dict):
        return {
            k: REDACTED if is_secret_name(str(k)) and v is not None else redact_secrets(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_secrets(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_text(text: str) -> str:
    """``text`` with every URL's ``user:password@`` removed and the values of key-like query
    parameters (``?api_key=...``) replaced."""
    text = _USERINFO.sub(r"\1", text)
    if "=" not in text:
        return text

    def param(match: re.Match[str]) -> str:
        sep, name, value = match.groups()
        secret = is_secret_name(name) or name.lower() in _SECRET_PARAMS
        return f"{sep}{name}={REDACTED if secret and value else value}"

    return _QUERY_PARAM.sub(param, text)


def is_secret_name(name: str) -> bool:
    """Whether a key named ``name`` likely holds a credential."""
    squashed = re.sub(r"[^a-z0-9]", "", name.lower())
    if any(part in squashed for part in _SECRET_PARTS):
        return True
    return any(word.lower() in _SECRET_WORDS for word in _WORD.findall(name))
