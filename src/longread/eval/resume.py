"""Whether a run folder may be resumed with the configuration given now.

A resumed run must read the same data with the same agent, else its rows would mix two runs.
The data is compared by content (``data_hash``), not by path, so a moved or cloned run folder
still resumes, and its data may sit elsewhere, under another name or in another format. Every
refusal is one line naming what differs (a ``UsageError``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError

RESUME_KEYS = ("agent", "agent_config", "record_tokens", "data_hash")
# Agent settings added since folders were first made, each with the value that does what the
# longread before it did: a folder saved without one resumes as if it had that value.
AGENT_SETTINGS_ADDED = {
    "section_first": False,
    "update_gate": False,
    "exit_gate": False,
    "gate_instructions": True,
    "exit_probe": False,
    "probe_tokens": 4,
    "min_read": 0.0,
    "grounded_exit": False,
    "grounded_notes": False,
    "focused_notes": False,
    "exact_copies": False,
    "focused_reread": False,
    "reread_least_share": 0.0,  # stop 53's focused rereads: two shared terms were enough
    "keep_notes_share": 0.0,  # and notes were kept only against an update with none
    "reread_cites": False,  # stop 54's rereads: notes traced to the whole chunk, by their words
    "reread_unrestated": False,  # and made only after an update that left no note about it
    "reread_quotes": False,  # stop 55's rereads: a reread's notes kept as they came
    "question_keys": False,  # stop 57's rereads: another key's needle restated the question
    "keyed_exit": False,  # stop 69's grounded exit: a rival key's needle could ground an exit
    "restated_exit": False,  # and a note sharing one term with the question (stop 70)
    "format_stop": False,  # rememr1's replies ran to their end or the cap (stop 73)
    "loop_stop": False,  # and looped to the cap (stop 74)
    "format_grammar": False,  # and were decoded without a grammar (stop 75)
}


def check_resume(saved: dict[str, Any], new: dict[str, Any], run_dir: Path) -> bool:
    """Refuse resuming the run saved in ``run_dir`` (config ``saved``, updated in place with
    the settings added since) with config ``new`` when the two would be different runs.

    True when ``saved`` predates data hashes and was accepted by its data file name: it should
    then adopt ``new``'s data hash. Such folders (no ``data_hash``) resume when the saved data
    path's file name matches the one given now: a checkout moved or cloned elsewhere keeps its
    file names, and a name is all such a folder records."""
    saved.setdefault("record_tokens", False)  # folders from before the switch had none
    _fill_added_settings(saved.get("agent_config"), new.get("agent_config"))
    for key in RESUME_KEYS:
        if key != "data_hash":  # compared by _check_data, which knows older folders
            _check_same(key, saved.get(key), new.get(key), run_dir)
    adopted = _check_data(saved, new, run_dir)
    _check_adapter(saved, new, run_dir)
    _check_lookup_decoding(saved, new, run_dir)
    return adopted


def _fill_added_settings(saved: Any, new: Any) -> None:
    """Give a saved agent config the settings added since (``AGENT_SETTINGS_ADDED``) that the
    agent now has, at the value that reproduces the older runs."""
    if not isinstance(saved, dict) or not isinstance(new, dict):
        return
    for key, old_behaviour in AGENT_SETTINGS_ADDED.items():
        if key in new:
            saved.setdefault(key, old_behaviour)


def _check_same(key: str, saved: Any, new: Any, run_dir: Path) -> None:
    if saved == new:
        return
    where, missing = key, False
    if isinstance(saved, dict) and isinstance(new, dict):
        sub = next(k for k in sorted(set(saved) | set(new)) if saved.get(k) != new.get(k))
        where, missing, saved, new = f"{key}.{sub}", sub not in saved, saved.get(sub), new.get(sub)
    if missing:
        # A setting added since the folder was made (e.g. prompt_set): the old run used what
        # the older longread did, which the new default need not reproduce.
        raise UsageError(
            f"{run_dir} was made by an older longread without {where} (now {new!r}), so its "
            "results may not match this run; pass a new --out folder"
        )
    raise UsageError(
        f"{run_dir} holds a run with a different {where} (saved {saved!r}, now {new!r}); "
        f"resume with the same settings{_flag_for(where, saved)} or pass a new --out folder"
    )


# The agent settings ``eval run`` takes as on/off flags (``--exit-probe on``).
ON_OFF_SETTINGS = frozenset({
    "update_gate", "exit_gate", "gate_instructions", "exit_probe", "grounded_exit",
    "grounded_notes", "focused_notes", "exact_copies", "focused_reread", "format_stop",
    "loop_stop", "format_grammar",
})  # fmt: skip


def _flag_for(where: str, saved: Any) -> str:
    """For an on/off agent setting, the flag that gives the saved value back (a default that
    changed since the folder was made: the shipped memagent's exit probe, stop 70)."""
    name = where.removeprefix("agent_config.")
    if name == where or name not in ON_OFF_SETTINGS or not isinstance(saved, bool):
        return ""
    return f" (--{name.replace('_', '-')} {'on' if saved else 'off'})"


def _check_data(saved: dict[str, Any], new: dict[str, Any], run_dir: Path) -> bool:
    """Refuse a resume on other data; True when a folder without ``data_hash`` (written
    before data hashes) is accepted by its data file name and should adopt ``new``'s hash."""
    if saved.get("data_hash") and new.get("data_hash"):
        if saved["data_hash"] != new["data_hash"]:
            raise UsageError(
                f"{run_dir} holds a run on different data ({_data_change(saved, new)}); "
                "resume with the same data or pass a new --out folder"
            )
        return False
    # No hash on one side: only the file name can be compared (see check_resume).
    saved_name, new_name = Path(str(saved.get("data"))).name, Path(str(new.get("data"))).name
    if saved_name != new_name:
        raise UsageError(
            f"{run_dir} holds a run on different data (saved {saved.get('data')!r}, now "
            f"{new.get('data')!r}; it predates data hashes, so only the file name can be "
            "compared); resume with the same data or pass a new --out folder"
        )
    return bool(new.get("data_hash")) and not saved.get("data_hash")


def _check_adapter(saved: dict[str, Any], new: dict[str, Any], run_dir: Path) -> None:
    """Refuse a resume that applies another LoRA adapter, or none where there was one (or the
    reverse): its answers would come from another model. Compared by content and scale, so the
    adapter file may have moved."""

    def adapter(config: dict[str, Any]) -> tuple[Any, Any, Any]:
        backend = config.get("backend") or {}
        if not backend.get("adapter_sha256"):
            return None, None, None
        return backend["adapter_sha256"], backend.get("adapter_scale"), backend.get("adapter")

    def call_adapters(config: dict[str, Any]) -> dict[str, Any]:
        calls = (config.get("backend") or {}).get("call_adapters") or {}
        return {kind: record.get("adapter_sha256") for kind, record in calls.items()}

    if call_adapters(saved) != call_adapters(new):
        raise UsageError(
            f"{run_dir} holds a run with different adapters for its {_kinds(saved, new)} "
            "calls (--decision-adapter, --probe-adapter); resume with the same ones or pass a "
            "new --out folder"
        )
    saved_hash, saved_scale, saved_path = adapter(saved)
    new_hash, new_scale, new_path = adapter(new)
    if (saved_hash, saved_scale) == (new_hash, new_scale):
        return
    if saved_hash == new_hash:
        what = f"adapter scale (saved {saved_scale}, now {new_scale})"
    else:
        what = f"LoRA adapter (saved {saved_path or 'none'}, now {new_path or 'none'})"
    raise UsageError(
        f"{run_dir} holds a run with a different {what}; resume with the same adapter (a run "
        "of the bundled model without its memory adapter: --base-model) or pass a new --out "
        "folder"
    )


def _check_lookup_decoding(saved: dict[str, Any], new: dict[str, Any], run_dir: Path) -> None:
    """Refuse a resume on the embedded model that decodes the other way: lookup decoding may
    flip a near-tie, so a run's samples are all read one way. A folder from before lookup
    decoding was on by default (none recorded, or false) read one token a step."""

    def lookup(config: dict[str, Any]) -> bool | None:
        backend = config.get("backend") or {}
        if backend.get("backend") != "llamacpp":
            return None  # a server decodes as it does; nothing to compare
        return bool(backend.get("lookup_decoding", False))

    saved_lookup, new_lookup = lookup(saved), lookup(new)
    if saved_lookup is None or new_lookup is None or saved_lookup == new_lookup:
        return
    flag = "on" if saved_lookup else "off"
    raise UsageError(
        f"{run_dir} holds a run {'with' if saved_lookup else 'without'} lookup decoding; "
        f"resume with --lookup-decoding {flag} or pass a new --out folder"
    )


def _kinds(saved: dict[str, Any], new: dict[str, Any]) -> str:
    kinds = set()
    for config in (saved, new):
        kinds |= set((config.get("backend") or {}).get("call_adapters") or {})
    return "/".join(sorted(kinds))


def _data_change(saved: dict[str, Any], new: dict[str, Any]) -> str:
    """What differs between two data identities, in words."""
    counts = (
        f"saved {saved.get('samples')} samples from {saved.get('data')!r}, "
        f"now {new.get('samples')} from {new.get('data')!r}"
    )
    if saved.get("sample_ids_hash") == new.get("sample_ids_hash"):
        return f"the same sample ids with changed content: {counts}"
    return f"other sample ids: {counts}"
