"""Flags and error handling shared by the ``longread`` commands (ask, eval run, ...)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from ..agents.prompts import PROMPT_SETS
from ..agents.registry import AGENTS
from ..errors import UsageError
from ..llm.factory import DECISION_CALLS, PROBE_CALLS, BackendSettings
from ..llm.memory_adapter import GATE_ADAPTER_FILE, MEMORY_ADAPTER_FILE, is_bundled
from ..llm.trained_settings import MEMORY_OPTIONS, TrainedSettings, read_trained_settings

T = TypeVar("T")


def _parse_json_object(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object")
    return parsed


def backend_options(func: Any) -> Any:
    """Flags shared by every command that talks to a model."""
    options = [
        click.option(
            "--backend",
            type=click.Choice(["auto", "llamacpp", "openai"]),
            default="auto",
            show_default=True,
            help="auto: an OpenAI-compatible server when --base-url or OPENAI_BASE_URL "
            "is set, else the embedded model.",
        ),
        click.option(
            "--base-url",
            help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 "
            "(default: $OPENAI_BASE_URL).",
        ),
        click.option("--model", help="Model name on the server (default: the server's first)."),
        click.option("--api-key", help="API key (default: $OPENAI_API_KEY)."),
        click.option(
            "--context-window",
            type=click.IntRange(min=256),
            help="Server's context window in tokens, when it does not report one.",
        ),
        click.option(
            "--tokenizer",
            "tokenizer_path",
            help="tokenizer.json or model folder for exact token counts on a server.",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=1),
            default=600.0,
            show_default=True,
            help="Seconds to wait for one server reply.",
        ),
        click.option(
            "--extra-body",
            callback=_parse_json_object,
            help="Extra JSON fields for every chat request, e.g. '{\"top_k\": 20}'.",
        ),
        click.option(
            "--retries",
            type=click.IntRange(min=0),
            default=5,
            show_default=True,
            help="Retries (exponential backoff) on 429, 5xx, timeouts, lost connections and "
            "replies cut short or garbled.",
        ),
        click.option(
            "--gguf",
            type=click.Path(dir_okay=False),
            help="GGUF model for the embedded backend (default: bundled SmolLM2-135M).",
        ),
        click.option(
            "--quant",
            type=click.Choice(["q8_0", "q4_0", "f16", "original"]),
            help="Convert the GGUF once to this type for speed (bundled model: q8_0); "
            "'original' loads it as shipped.",
        ),
        click.option(
            "--adapter",
            type=click.Path(dir_okay=False),
            help="LoRA adapter GGUF for the embedded model (as the trainer exports it), or "
            "'memory': the memory adapter shipped for the bundled SmolLM2 (the agent's own "
            "where one ships for it; the default on the bundled model).",
        ),
        click.option(
            "--base-model",
            is_flag=True,
            help="Run the bundled SmolLM2 without its shipped memory adapter (the model as "
            "released).",
        ),
        click.option(
            "--decision-adapter",
            type=click.Path(dir_okay=False),
            help="memreread on the embedded model: a LoRA adapter GGUF for its decide and "
            "integrate calls only; its reading passes keep --adapter (or the shipped one). "
            "The model is loaded once more, with it.",
        ),
        click.option(
            "--probe-adapter",
            type=click.Path(dir_okay=False),
            help="With --exit-probe on, on the embedded model: a LoRA adapter GGUF for the exit "
            "probe's yes/no calls only; the updates keep --adapter (or the shipped one). The "
            "model is loaded once more, with it [default: memagent's shipped probe adapter].",
        ),
        click.option(
            "--adapter-scale",
            type=float,
            default=1.0,
            show_default=True,
            help="Multiplier on the --adapter's effect (1: as trained).",
        ),
        click.option(
            "--n-ctx",
            type=click.IntRange(min=256),
            help="Embedded model's context window [default: 8192].",
        ),
        click.option(
            "--parallel",
            type=click.IntRange(min=1, max=64),
            help="Embedded model: decode up to N calls together in one llama.cpp context "
            "(batched decoding; with eval run, pair it with --concurrency N). Each call keeps "
            "its own --n-ctx window: about 23 KB per token, 190 MB per call at 8192 "
            "[default: one call at a time].",
        ),
        click.option(
            "--lookup-decoding",
            type=click.Choice(["on", "off"]),
            is_flag=False,
            flag_value="on",  # the bare flag, as before it was on by default
            default=None,
            callback=_on_off,
            help="Embedded model, greedy calls: guess the next tokens from the text already "
            "read and check them in one step (prompt-lookup decoding): faster where replies "
            "copy, as memory updates do; the same replies up to llama.cpp's batched rounding. "
            "off: one decode step per token [default: on, one call at a time; off with "
            "--parallel].",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def agent_options(func: Any) -> Any:
    """Reading settings. Unset flags keep the chosen agent's own (paper) defaults, or, for
    the agent an applied adapter was trained for, the settings it was trained with
    (``with_trained_settings``); a flag the agent does not use is refused."""
    int_option = click.IntRange(min=1)
    options = [
        click.option("--chunk-tokens", type=int_option,
                     help="Largest chunk per call, shrunk to fit the window [5000, or as the "
                          "adapter was trained (shipped: 1000)]."),
        click.option("--memory-tokens", type=int_option,
                     help="Memory cap, new tokens per rewrite [memagent/memreread: 1024, or "
                          "as the adapter was trained (shipped: 256); rememr1: 2048]."),
        click.option("--final-tokens", type=int_option,
                     help="New tokens for the final answer [1024, or as the adapter was "
                          "trained (shipped: 32); rememr1: 2048]."),
        click.option("--max-reread", type=click.IntRange(min=0),
                     help="memreread: rereads at most [2]."),
        click.option("--decide-tokens", type=int_option,
                     help="memreread: new tokens for the stop/sub-question decision [256]."),
        click.option("--recall-top-k", type=int_option,
                     help="rememr1: earlier memories brought back per recall [1]."),
        click.option("--recall-threshold", type=click.FloatRange(0, 1),
                     help="rememr1: least TF-IDF cosine for a recall to count [0.1]."),
        click.option("--rag-k", type=int_option, help="rag: chunks retrieved [4]."),
        click.option("--rag-chunk-tokens", type=int_option, help="rag: chunk size [512]."),
        click.option("--temperature", type=click.FloatRange(0, 2),
                     help="Sampling temperature [0: greedy; the papers evaluate at 0.7]."),
        click.option("--top-p", type=click.FloatRange(0, 1, min_open=True), help="[1.0]"),
        click.option("--seed", type=int, help="Sampling seed, for reproducible sampled runs."),
        click.option("--prompt-set", type=click.Choice(list(PROMPT_SETS)),
                     help="Bundled prompts: paper (free-rewrite memory, the papers' method) "
                          "or notes (append-only verbatim notes) [paper, or as the adapter was "
                          "trained]."),
        click.option("--prompt-dir", type=click.Path(file_okay=False, exists=True),
                     help="Folder with your own prompt files (same names as the bundled ones)."),
        click.option("--section-first", is_flag=True, default=None,
                     help="memagent/memreread: put the section before the problem and memory "
                          "in each update prompt, so that the calls reading one chunk for "
                          "different questions share a prefix that a prefix cache reuses "
                          "(several -q; eval samples sharing a document) [off: the paper's "
                          "order]."),
        click.option("--update-gate", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="memagent/memreread: an update may reply <keep/> when its section "
                          "adds nothing, and the memory stays unwritten [off: the papers']."),
        click.option("--exit-gate", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="memagent/memreread: an update may end with <exit/> when the memory "
                          "answers the question, and reading stops there [off: every chunk "
                          "is read, as the papers do]."),
        click.option("--gate-instructions", type=click.Choice(["on", "off"]),
                     callback=_on_off,
                     help="memagent/memreread: explain the gates that are on in the update "
                          "prompt; off, the prompt is the papers' and only an adapter trained "
                          "to write the tags uses them [on, or as the adapter was trained]."),
        click.option("--exit-probe", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="memagent/memreread: after each update that changed the memory, a "
                          "short call asks whether the memory answers the question; yes stops "
                          "reading [off, or as the adapter was trained or shipped; a shipped "
                          "probe only where a probe adapter trained to exit takes its calls]."),
        click.option("--grounded-exit", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="With --exit-gate or --exit-probe on: honour an exit only when the "
                          "notes about the question are found in the sections read (no "
                          "call; stops exits on made-up notes) [off: the papers' gate; on "
                          "where the adapter was trained to exit]."),
        click.option("--grounded-notes", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="memagent/memreread/rememr1: cut from each update's memory the "
                          "notes about the question that no section read holds (made-up "
                          "answers; no call) [off: the papers' memory]."),
        click.option("--focused-notes", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="memagent/memreread/rememr1: clear a memory none of whose notes "
                          "shares a word with the question (copied filler), so the evidence "
                          "finds it empty (no call) [off: the papers' memory]."),
        click.option("--exact-copies", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="memagent/memreread/rememr1: where an update's note about the "
                          "question nearly copied a value of the section it came from (a UUID with "
                          "characters dropped), write the section's value instead, and the "
                          "memory's where the answer nearly copied one (no call) "
                          "[off: the papers' memory]."),
        click.option("--focused-reread", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="memagent/memreread/rememr1: when an update left no note "
                          "restating the question, show it the section's sentences that hold "
                          "the most of the question's words (at least 60%) and update again "
                          "(one more call), and keep notes restating the question that the "
                          "section's update would lose [off: the papers' memory]."),
        click.option("--format-stop", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="rememr1: end a step's reply where its format is complete, at a "
                          "second <update> after a closed <update> or <recall> (the embedded "
                          "model, vLLM and SGLang) [off: the paper's, or as the adapter "
                          "shipped]."),
        click.option("--loop-stop", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="rememr1: end a step's reply where it falls into a loop (its last "
                          "160 bytes one block of up to 64 written again and again) instead "
                          "of at the token cap; the embedded model stops decoding there, a "
                          "server's reply is cut there [off: the paper's, or as the adapter "
                          "shipped]."),
        click.option("--format-grammar", type=click.Choice(["on", "off"]), callback=_on_off,
                     help="rememr1: decode each step's reply under a grammar of its format "
                          "(one closed <update> of plain text, at most one <recall>): "
                          "constrained decoding, for the embedded model and servers that take "
                          "a grammar (llama.cpp, vLLM, SGLang) [off: the paper's, or as the "
                          "adapter shipped]."),
        click.option("--min-read", type=click.FloatRange(0, 1),
                     help="With --exit-gate or --exit-probe on: the share of the document "
                          "read before an exit is honoured [0]."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def _on_off(ctx: click.Context, param: click.Parameter, value: str | None) -> bool | None:
    return None if value is None else value == "on"


def record_tokens_option(func: Any) -> Any:
    """``--record-tokens``: keep token ids and logprobs in every step record (for training)."""
    return click.option(
        "--record-tokens",
        is_flag=True,
        help="Keep each call's prompt ids, sampled ids and logprobs in the trace (for "
        "training; the embedded backend and vLLM servers provide them).",
    )(func)


def hotpotqa_input_option(func: Any) -> Any:
    """``--input``: the official HotpotQA JSON that the data commands read."""
    return click.option(
        "--input",
        "input_path",
        required=True,
        type=click.Path(exists=True, dir_okay=False),
        help="Official HotpotQA JSON (_id, question, answer, supporting_facts, context).",
    )(func)


def backend_settings(options: dict[str, Any], agent: str | None = None) -> BackendSettings:
    """Take the backend flags out of ``options``, for ``agent`` (which shipped adapter the
    bundled model reads with: ``memory_adapter.bundled_memory_adapter``)."""
    return BackendSettings(
        backend=options.pop("backend"),
        base_url=options.pop("base_url"),
        model=options.pop("model"),
        api_key=options.pop("api_key"),
        context_window=options.pop("context_window"),
        tokenizer=options.pop("tokenizer_path"),
        timeout=options.pop("timeout"),
        max_retries=options.pop("retries"),
        extra_body=options.pop("extra_body"),
        gguf=options.pop("gguf"),
        quant=options.pop("quant"),
        n_ctx=options.pop("n_ctx"),
        adapter=options.pop("adapter"),
        adapter_scale=options.pop("adapter_scale"),
        base_model=options.pop("base_model"),
        parallel=options.pop("parallel"),
        lookup_decoding=options.pop("lookup_decoding"),
        agent=agent,
        update_gate=bool(options.get("update_gate")),  # an agent flag, left in options
        call_adapters=given_call_adapters(
            options.pop("decision_adapter", None), options.pop("probe_adapter", None)
        ),
    )


def given_call_adapters(decisions: str | None, probes: str | None) -> dict[str, str] | None:
    """The call adapters the flags give: ``--decision-adapter``'s for MemReread's decide and
    integrate calls, ``--probe-adapter``'s for the exit probe's; None for neither."""
    calls = dict.fromkeys(DECISION_CALLS, decisions) if decisions else {}
    calls.update(dict.fromkeys(PROBE_CALLS, probes) if probes else {})
    return calls or None


def without_idle_calls(settings: BackendSettings, config: Any) -> BackendSettings:
    """``settings`` for a run of the agent ``config``: the exit probe's calls idle when it
    is off, so that no probe adapter is loaded or recorded; a UsageError for a
    ``--probe-adapter`` that would take no call."""
    if getattr(config, "exit_probe", False):
        return settings
    if any(kind in (settings.call_adapters or {}) for kind in PROBE_CALLS):
        raise UsageError("--probe-adapter takes the exit probe's calls; give --exit-probe on")
    return replace(settings, idle_calls=frozenset(PROBE_CALLS))


# How each trained setting is said on stderr, and the flag that overrides it.
_TRAINED_WORDS = {
    "chunk_tokens": ("{}-token chunks", "--chunk-tokens"),
    "memory_tokens": ("{}-token memory", "--memory-tokens"),
    "final_tokens": ("{}-token final answers", "--final-tokens"),
    "prompt_set": ("{} prompts", "--prompt-set"),
    "update_gate": ("the update gate on", "--update-gate off"),
    "exit_gate": ("the exit gate on", "--exit-gate off"),
    "gate_instructions": ("the gates left out of the prompt", "--gate-instructions on"),
    "exit_probe": ("the exit probe on", "--exit-probe off"),
}


# How each reading option an adapter shipped to read with is said, and the flag that turns it
# off.
_READING_WORDS = {
    "grounded_notes": ("grounded notes", "--grounded-notes off"),
    "focused_notes": ("focused notes", "--focused-notes off"),
    "exact_copies": ("exact copies", "--exact-copies off"),
    "focused_reread": ("focused rereads", "--focused-reread off"),
    "exit_probe": ("the exit probe", "--exit-probe off"),
    "format_stop": ("format stops", "--format-stop off"),
    "loop_stop": ("loop stops", "--loop-stop off"),
    "format_grammar": ("its format's grammar", "--format-grammar off"),
}


def adapter_trained_settings(settings: BackendSettings) -> tuple[str, TrainedSettings] | None:
    """What the run's LoRA adapter was trained with (the JSON beside it), and how to name the
    adapter in a message; None when the run applies no adapter (a server, ``--base-model``,
    another ``--gguf``) or its adapter records no settings."""
    if settings.resolved_backend() != "llamacpp":
        return None
    adapter = settings.applied_adapter()
    trained = read_trained_settings(adapter) if adapter else None
    if adapter is None or trained is None:
        return None
    return adapter_name(adapter), trained


def adapter_name(adapter: str) -> str:
    """How a message names an adapter: the shipped ones by what they are, others by path."""
    if not is_bundled(adapter):
        return f"the adapter {adapter}"
    if Path(adapter).name == MEMORY_ADAPTER_FILE:
        return "the memory adapter"
    if Path(adapter).name == GATE_ADAPTER_FILE:
        return "the update gate's memory adapter"
    agent = Path(adapter).stem.removeprefix("smollm2-135m-")
    return f"{agent}'s memory adapter"


def trained_settings_apply(agent: str, trained: TrainedSettings) -> bool:
    """Whether ``agent`` reads the way ``trained.agent`` did: it is that agent, or its config
    extends that agent's (memreread reads with memagent's update calls, then rereads). Other
    agents (rememr1's recall format, full, rag) keep their own defaults: the adapter never
    learned their calls."""
    spec, trained_spec = AGENTS.get(agent), AGENTS.get(trained.agent)
    return bool(spec and trained_spec and issubclass(spec.config, trained_spec.config))


def with_trained_settings(
    agent: str, settings: BackendSettings, options: dict[str, Any]
) -> dict[str, Any]:
    """``options`` (agent flags, None where not given) with the settings the run's adapter was
    trained with in place of the flags not given, said once on stderr. Flags given win.

    An adapter trained to exit (the exit gate or probe) also reads with the grounded exit
    when it exits, unless ``--grounded-exit`` says otherwise: a 135M model's exit said yes to
    made-up notes and to a first hop, and grounding is what made its exits safe to take
    (recipes/smollm2/CAMPAIGN.md, "The grounded exit")."""
    found = adapter_trained_settings(settings)
    merged = dict(options)
    if found is not None and trained_settings_apply(agent, found[1]):
        name, trained = found
        given = {k: v for k, v in options.items() if v is not None}
        filled = shipped_reading(trained, settings, given)
        for said in describe_filled(name, filled, trained):
            click.echo(f"longread: {said}", err=True)
        merged.update(filled)
        if grounds_its_exits(trained, merged):
            merged["grounded_exit"] = True
            click.echo(f"longread: {describe_grounded(name)}", err=True)
    probe = probe_adapter_trained_to_exit(settings)
    if probe is not None and grounds_its_exits(probe[1], merged):
        merged["grounded_exit"] = True
        click.echo(f"longread: {describe_grounded(probe[0])}", err=True)
    return merged


def shipped_reading(
    trained: TrainedSettings, settings: BackendSettings, given: dict[str, Any]
) -> dict[str, Any]:
    """The settings the run's adapter fills in (``reading_options``) but those ``given`` (the
    flags set, none None). The exit probe it shipped to read with only where an adapter
    trained for the probe takes the probe's calls (memagent's shipped probe adapter): the
    shared adapter's own yes/no was never trained, so another agent reading with it (memreread
    with ``--adapter memory:memagent``) keeps the probe off; and not beside an exit gate the
    flags turned on, which is the exit asked for."""
    filled = {k: v for k, v in trained.reading_options().items() if k not in given}
    shipped_probe = "exit_probe" in trained.reads_with and not trained.exit_probe
    untrained = probe_adapter_trained_to_exit(settings) is None
    if shipped_probe and (untrained or given.get("exit_gate")):
        filled.pop("exit_probe", None)
    return filled


def probe_adapter_trained_to_exit(settings: BackendSettings) -> tuple[str, TrainedSettings] | None:
    """The adapter the exit probe's calls read with, named for a message, and its trained
    settings, when it is not the run's own adapter and its record says it was trained to
    exit (its probe's yes then gets the grounded exit, as the run's own adapter's would)."""
    adapter = settings.applied_call_adapters().get(PROBE_CALLS[0])
    if adapter is None or settings.resolved_backend() != "llamacpp":
        return None
    trained = read_trained_settings(adapter)
    if trained is None or not trained.trained_to_exit:
        return None
    owner = Path(adapter).stem.removeprefix("smollm2-135m-")
    name = f"{owner}'s probe adapter" if is_bundled(adapter) else f"the probe adapter {adapter}"
    return name, trained


def describe_filled(name: str, filled: dict[str, Any], trained: TrainedSettings) -> list[str]:
    """The lines that say which settings the adapter's record filled in: those it was trained
    with (``describe_trained``), then the reading options it shipped to read with."""
    as_trained = {k: v for k, v in filled.items() if k not in trained.reads_with}
    lines = (
        [describe_trained(name, as_trained, trained)]
        if set(as_trained) & set(_TRAINED_WORDS)
        else []
    )
    shipped = [option for option in trained.reads_with if option in filled]
    if shipped:
        words = [_READING_WORDS[option][0] for option in shipped]
        said = " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
        flags = "/".join(_READING_WORDS[option][1] for option in shipped)
        papers = "memory" if set(shipped) <= set(MEMORY_OPTIONS) else "reading"
        lines.append(
            f"{name} reads with {said}, as it shipped (give {flags} for the papers' {papers})"
        )
    return lines


def describe_grounded(name: str) -> str:
    """What ``grounds_its_exits`` turned on, and the flag that turns it off."""
    return (
        f"{name} exits only on notes found in the sections read "
        "(give --grounded-exit off for the papers' gate)"
    )


def grounds_its_exits(trained: TrainedSettings, options: dict[str, Any]) -> bool:
    """Whether a run reads with the grounded exit by default: its adapter was trained to
    exit, an exit is on in ``options`` (the run's agent settings), and no flag chose."""
    exits = options.get("exit_gate") or options.get("exit_probe")
    return bool(trained.trained_to_exit and exits and options.get("grounded_exit") is None)


def describe_trained(name: str, filled: dict[str, Any], trained: TrainedSettings) -> str:
    """``the memory adapter was trained with 1000-token chunks, ...; using them (give
    --chunk-tokens/... to override)``, and the final answers' cap where reading raised it."""
    names = [k for k in _TRAINED_WORDS if k in filled]
    said = [_TRAINED_WORDS[k][0].format(getattr(trained, k)) for k in names]  # as trained
    flags = "/".join(_TRAINED_WORDS[k][1] for k in names)
    raised = filled.get("final_tokens", trained.final_tokens) != trained.final_tokens
    cap = f", final answers up to {filled['final_tokens']} tokens" if raised else ""
    return f"{name} was trained with {', '.join(said)}; using them{cap} (give {flags} to override)"


def check_output_file(path: str, flag: str) -> None:
    """Refuse an output file that cannot be written (its folder missing, not a folder, or
    read-only) before any work is done, rather than after every model call was paid for."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise UsageError(f"{flag} {path} is a directory; give a file name")
    if not folder.exists():
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: {folder} is not a folder")
    writable = os.access(folder, os.W_OK | os.X_OK)
    if not writable or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"{flag} {path} cannot be written (permission denied)")


def run_or_exit(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run the coroutine (its user-facing errors propagate to ``LongreadGroup``, which prints
    them). Ctrl-C and SIGTERM (``kill``, ``timeout``, a batch scheduler) cancel it, so its cleanup
    (``finally`` blocks: closing stores, recording the session) runs before the exit."""
    try:
        return asyncio.run(_cancelled_by_sigterm(coroutine))
    except KeyboardInterrupt:
        click.echo("longread: interrupted", err=True)
        sys.exit(130)
    except asyncio.CancelledError:
        click.echo("longread: terminated", err=True)
        sys.exit(128 + signal.SIGTERM)


async def _cancelled_by_sigterm(coroutine: Coroutine[Any, Any, T]) -> T:
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    try:
        if task is not None:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
    except (NotImplementedError, RuntimeError):  # no signal handlers here (Windows, a thread)
        pass
    try:
        return await coroutine
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)
