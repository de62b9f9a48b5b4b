"""Tables and plots from finished (or still running) run folders, without the data files.

Every row the store holds carries what it is grouped by (dataset, kind, context length), and
``config.json`` names the agent, so a report needs only the run folders.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from ..agents.memagent import ACTS_ONLY_WITH
from ..errors import UsageError
from ..llm.memory_adapter import memory_adapter_stage
from .resume import AGENT_SETTINGS_ADDED
from .store import DONE, FAILED, RunStore, SampleResult

Row = dict[str, Any]
_NO_DATASET = "(no dataset)"
_LEGEND = (
    "Accuracy columns are percentages over all n samples: sub-EM, EM and F1 are lenient "
    "(SQuAD-normalised; an unboxed answer is judged on its whole final text), strict needs a "
    "\\boxed{} answer, match_all is RULER's string_match_all. "
    "sub-EM 95%: the Wilson score interval of sub-EM over the n samples (20 samples cannot "
    "tell 5% from 10%: compare intervals, not points). "
    "nulls: samples with no prediction (an empty reply or a failed run), scored 0; "
    "failed: runs that raised (backend or budget error), also among the nulls; "
    "unboxed: answers given without \\boxed{}. "
    "calls, prompt tokens and seconds are means over the samples that finished. "
    "mem tok/update: new tokens per memory update (memory agents), over all the updates of the "
    "finished samples; capped updates: the share of them cut at the memory cap (--memory-tokens). "
    "read (runs with --exit-gate or --exit-probe on only): the mean share of the document's "
    "chunks read before the exit stopped reading; stops before evidence: of the samples that "
    "stopped early, those that stopped before an evidence sentence had been read. "
    "well formed (rememr1, memreread): of the calls whose reply must follow the agent's format "
    "(ReMemR1's <update>/<recall> steps, MemReread's stop-or-ask decisions), the share that "
    "did, and how many there were."
)

_TIME_KEYS = ("wall_seconds", "backend_busy_seconds", "overhead_seconds")
_COUNT_KEYS = ("sessions", "samples", *_TIME_KEYS)
_TIME_LEGEND = (
    "Summed over every session of each run (interrupted ones included; a sample retried in a "
    "later session is a second sample run). backend s: wall time "
    "with a model call in flight; overhead s: the rest (loading data, chunking, scoring, "
    "writing traces and results, and the gaps between calls)."
)


def load_runs(run_dirs: Iterable[str | Path]) -> list[Row]:
    """One flat row per sample of every run folder: agent, grouping keys, status, score
    fields (em, f1, sub_em, strict, match_all, ...) and cost fields (calls, prompt_tokens,
    completion_tokens, seconds). ``accuracy`` is the headline metric, 0..1."""
    runs = []
    for run_dir in run_dirs:
        with RunStore(_existing(run_dir)) as store:
            runs.append((Path(run_dir), store.load_config(), store.results()))
    labels = agent_labels([(d, c) for d, c, _ in runs])
    rows = []
    for (run_dir, _, results), label in zip(runs, labels, strict=True):
        rows += result_rows(run_dir, label, results)
    return rows


def result_rows(run_dir: Path, label: str, results: Sequence[SampleResult]) -> list[Row]:
    """The report rows of one run folder's results, under the agent ``label``."""
    rows = []
    for result in results:
        row = {
            "run_dir": str(run_dir),
            "agent": label,
            "sample_id": result.sample_id,
            "status": result.status,
            "dataset": result.dataset,
            "kind": result.kind,
            "context_length": result.context_length,
            "accuracy": result.headline,
            "error": result.error,
        }
        rows.append({**row, **result.score, **result.cost})
    return rows


def markdown_report(rows: Sequence[Row]) -> str:
    """A Markdown section per dataset with one line per context length x agent."""
    by_dataset: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_dataset[row["dataset"] or _NO_DATASET].append(row)
    parts = ["# Evaluation report", ""]
    for dataset in sorted(by_dataset):
        parts += [f"## {dataset}", "", *_table(by_dataset[dataset]), ""]
        cited = _citation_table(by_dataset[dataset])
        parts += ["Citations:", "", *cited, ""] if cited else []
    parts.append(_LEGEND)
    if any(r.get("cited") is not None for r in rows):
        parts += ["", _CITATION_LEGEND]
    return "\n".join(parts) + "\n"


_CITATION_LEGEND = (
    "Citations: cited is the mean number of citations per finished sample; precision is the "
    "share of citations that hold the evidence (RULER: the needle; HotpotQA: a supporting "
    "sentence), '-' where the set has none to judge by, over every answer (a wrong answer's "
    "citation shows where the wrong answer was read, rarely the evidence) and over the correct "
    "answers only; coverage is the share of correct "
    "answers (sub-EM 1) that carry at least one citation; unsupported counts the answers "
    "flagged as backed by nothing in the document."
)


def _citation_table(rows: list[Row]) -> list[str]:
    """Citation precision and coverage per length x agent, for runs that recorded them
    (runs made before citations existed have none)."""
    groups: dict[tuple[Any, str], list[Row]] = defaultdict(list)
    for row in rows:
        if row["status"] == DONE and row.get("cited") is not None:
            groups[(row["context_length"], row["agent"])].append(row)
    if not groups:
        return []
    lines = [
        "| length | agent | n | cited | precision | precision, correct answers | coverage "
        "| unsupported |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for length, agent in sorted(groups, key=lambda k: (_length_key(k[0]), k[1])):
        group = groups[(length, agent)]
        cells = [_show_length(length), agent, str(len(group)), *citation_cells(group)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def citation_cells(rows: list[Row]) -> list[str]:
    """Mean citations, precision (precise / judged citations) and coverage (correct answers
    with a citation / correct answers), each with its counts, and the unsupported count."""
    cited = sum(r["cited"] for r in rows)
    correct = [r for r in rows if (r.get("sub_em") or 0.0) >= 1.0]
    covered = sum(r["cited"] > 0 for r in correct)
    return [
        f"{cited / len(rows):.1f}",
        _precision(rows),
        _precision(correct),
        _share(covered, len(correct)),
        str(sum(r.get("supported") is False for r in rows)),
    ]


def _precision(rows: list[Row]) -> str:
    """Precise citations over the citations of the rows that can be judged."""
    judged = [r for r in rows if r.get("cited_precise") is not None]
    if not judged:
        return "-"
    return _share(sum(r["cited_precise"] for r in judged), sum(r["cited"] for r in judged))


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}% ({part}/{whole})" if whole else "-"


def run_times(run_dirs: Iterable[str | Path]) -> list[Row]:
    """Per run folder, where its time went, summed over every session in ``sessions.jsonl``:
    sessions, samples (finished in those sessions), wall, backend busy and overhead seconds.
    A session killed outright (SIGKILL, power loss) leaves no record, so its time is missing."""
    rows = []
    for run_dir in run_dirs:
        sessions = _sessions(_existing(run_dir) / "sessions.jsonl")
        rows.append(
            {
                "run_dir": str(run_dir),
                "sessions": len(sessions),
                "samples": sum(s["ran"] for s in sessions),  # a retried sample counts twice
                **{key: sum(s[key] for s in sessions) for key in _TIME_KEYS},
            }
        )
    return rows


def _sessions(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    sessions = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            session = json.loads(line)
            sessions.append({k: session[k] for k in ("ran", *_TIME_KEYS)})
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"{path}:{number}: not a session record") from None
    return sessions


def run_time_report(times: Sequence[Row]) -> str:
    """A Markdown table of :func:`run_times` with a total line and the overhead's share."""
    lines = [
        "## Run time",
        "",
        "| run | sessions | sample runs | wall s | backend s | overhead s | overhead |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    total = {"run_dir": "**total**", **{k: sum(t[k] for t in times) for k in _COUNT_KEYS}}
    for row in [*times, total]:
        wall, busy, overhead = (row[k] for k in _TIME_KEYS)
        share = f"{100 * overhead / wall:.2f}%" if wall else "-"
        name = row["run_dir"] if row is total else Path(row["run_dir"]).name
        cells = [name, str(row["sessions"]), str(row["samples"])]
        lines.append(
            "| "
            + " | ".join([*cells, f"{wall:.1f}", f"{busy:.1f}", f"{overhead:.1f}", share])
            + " |"
        )
    lines += ["", _TIME_LEGEND]
    return "\n".join(lines) + "\n"


def plot_accuracy(rows: Sequence[Row], path: str | Path) -> None:
    """Accuracy (headline metric, %) against context length on a log axis: one panel per
    dataset, one line per agent. Needs matplotlib (the ``eval`` extra)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("plotting needs matplotlib: pip install 'longread[eval]'") from None
    curves = _curves(rows)
    if not curves:
        raise UsageError("nothing to plot: no sample has a numeric context length")
    agents = sorted({agent for lines in curves.values() for agent in lines})
    # One legend under the panels: a row label names an adapter and its differing settings,
    # too long to leave room for a plot beside it in each panel.
    height = 4 + 0.25 * len(agents)
    figure = Figure(figsize=(max(5 * len(curves), 10), height), layout="constrained")
    axes = figure.subplots(1, len(curves), squeeze=False)[0]
    # the same colour and marker in every panel; ten colours, then the next marker
    styles = {
        agent: {"color": f"C{i % 10}", "marker": _MARKERS[i // 10 % len(_MARKERS)]}
        for i, agent in enumerate(agents)
    }
    for ax, (dataset, lines) in zip(axes, sorted(curves.items()), strict=True):
        for agent, points in sorted(lines.items()):
            xs = [x for x, _ in sorted(points)]
            ys = [y for _, y in sorted(points)]
            ax.plot(xs, ys, label=agent, **styles[agent])
        ax.set_xscale("log")
        lengths = sorted({x for points in lines.values() for x, _ in points})
        ax.set_xticks(lengths, labels=[_tick_label(x) for x in lengths])
        ax.minorticks_off()  # log-scale minor ticks (3x10^3, ...) would bury the lengths
        ax.set_xlabel("context length")
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(-3, 103)  # room for markers at 0 and 100
        ax.set_title(dataset)
    handles: dict[str, Any] = {}
    for ax in axes:
        lines, labels = ax.get_legend_handles_labels()
        handles.update(zip(labels, lines, strict=True))
    figure.legend(
        handles=[handles[a] for a in agents],
        labels=agents,
        loc="outside lower center",
        fontsize="small",
    )
    figure.savefig(path)


_MARKERS = "os^Dv<>ph*"


def _tick_label(length: float) -> str:
    """2048 -> "2K", 1048576 -> "1M"; other numbers as they are."""
    for size, suffix in ((1 << 20, "M"), (1 << 10, "K")):
        if length >= size and length % size == 0:
            return f"{int(length) // size}{suffix}"
    return f"{length:g}"


def _existing(run_dir: str | Path) -> Path:
    path = Path(run_dir)
    if not (path / "config.json").is_file():
        raise UsageError(f"{path} is not a run folder (no config.json)")
    return path


def agent_labels(runs: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """The agent's name (plus `` + <adapter>`` for a run with a LoRA adapter, so a trained
    model's rows stand beside the base model's), plus, where one such label ran with different
    agent configs, the settings that differ ("memagent (section_first True)"), or the run
    folder's name when the configs cannot be compared setting by setting; `` + lookup
    decoding`` where runs of one label decoded both ways (``_marked_lookup``)."""
    names = [_adapter_name(config, config.get("backend") or {}) for _, config in runs]
    names = _marked_lookup(names, [config for _, config in runs])
    configs: dict[str, list[Any]] = defaultdict(list)
    for name, (_, config) in zip(names, runs, strict=True):
        if config.get("agent_config") not in configs[name]:
            configs[name].append(config.get("agent_config"))
    labels = []
    for name, (folder, config) in zip(names, runs, strict=True):
        if len(configs[name]) == 1:
            labels.append(name)
            continue
        differing = _differing(configs[name], config.get("agent_config"))
        if differing is None:
            labels.append(f"{name} ({folder.name})")
        else:  # configs that differ only where neither acts read alike: one label
            labels.append(f"{name} ({differing})" if differing else name)
    return labels


def _differing(configs: list[Any], config: Any) -> str | None:
    """``config``'s values of the settings on which ``configs`` disagree ("final_tokens 32,
    section_first True"); None when they are not all settings tables. A setting added since a
    run was made reads as the value that run had (``AGENT_SETTINGS_ADDED``). A setting that
    acts only under options a run has off (``ACTS_ONLY_WITH``) is not that run's: it is
    compared among the runs it acts in and left out of the others' labels."""
    if not all(isinstance(c, dict) for c in configs):
        return None

    def value(c: dict[str, Any], key: str) -> Any:
        return c.get(key, AGENT_SETTINGS_ADDED.get(key))

    def acts(c: dict[str, Any], key: str) -> bool:
        options = ACTS_ONLY_WITH.get(key)
        return options is None or any(value(c, option) for option in options)

    keys = sorted({k for c in configs for k in c})
    values = {
        k: {json.dumps(value(c, k), sort_keys=True) for c in configs if acts(c, k)} for k in keys
    }
    differ = [k for k in keys if len(values[k]) > 1 and acts(config, k)]
    return ", ".join(f"{k} {value(config, k)}" for k in differ)


def _marked_lookup(names: list[str], configs: list[dict[str, Any]]) -> list[str]:
    """``names`` with `` + lookup decoding`` on the runs that decoded with it, where runs of
    the same name decoded both ways: lookup decoding may flip a near-tie, so such runs never
    pool. Runs that all decoded one way keep the plain name (lookup decoding has been the
    embedded default since stop 78; every run before read one token a step)."""
    lookup = [bool((c.get("backend") or {}).get("lookup_decoding")) for c in configs]
    ways: dict[str, set[bool]] = defaultdict(set)
    for name, used in zip(names, lookup, strict=True):
        ways[name].add(used)
    return [
        f"{name} + lookup decoding" if used and len(ways[name]) > 1 else name
        for name, used in zip(names, lookup, strict=True)
    ]


def _adapter_name(config: dict[str, Any], backend: dict[str, Any]) -> str:
    adapter = backend.get("adapter")
    name = str(config["agent"])
    if adapter:
        name += f" + {_one_adapter(adapter, backend.get('adapter_sha256'))}"
    # --decision-adapter: MemReread's decisions read with an adapter of their own;
    # --probe-adapter (or memagent's shipped one): the exit probe's calls
    calls = backend.get("call_adapters") or {}
    for kind, words in (("decide", "decisions"), ("probe", "probes")):
        if kind in calls:
            record = calls[kind]
            name += f" + {words} {_one_adapter(record['adapter'], record['adapter_sha256'])}"
    return name


def _one_adapter(adapter: str, sha256: str | None) -> str:
    # A memory adapter longread shipped (now or before) is named by its recipe stage: every
    # one of them has the same file name.
    stage = memory_adapter_stage(sha256)
    if stage:
        return f"memory adapter {stage}"
    # A training run publishes adapter.gguf in its run folder: the folder names the stage.
    path = Path(adapter)
    return path.parent.name if path.stem == "adapter" else path.stem


def _table(rows: list[Row]) -> list[str]:
    ruler = any(r["kind"] == "ruler" for r in rows)
    columns = ["length", "agent", "n", "sub-EM", "sub-EM 95%", "EM", "F1", "strict"]
    columns += ["match_all"] if ruler else []
    columns += ["nulls", "failed", "unboxed", "calls", "prompt tokens", "mem tok/update"]
    columns += ["capped updates", "s/sample"]
    gated = any(r.get("chunks_read") is not None for r in rows)  # exit gate: how much read
    columns += ["read", "stops before evidence"] if gated else []
    # The agents' own mechanisms (eval/runner.py _mechanism_use): ReMemR1's recalls and
    # MemReread's rereads, per sample; rows of other agents show "-".
    recalling = any(r.get("recalls") is not None for r in rows)
    rereading = any(r.get("rereads") is not None for r in rows)
    columns += ["recalls", "samples a recall helped"] if recalling else []
    columns += ["rereads"] if rereading else []
    formatted = any(r.get("formatted_calls") is not None for r in rows)
    columns += ["well formed"] if formatted else []
    lines = ["| " + " | ".join(columns) + " |"]
    lines.append("|" + "|".join("---" if c == "agent" else "---:" for c in columns) + "|")
    groups: dict[tuple[Any, str], list[Row]] = defaultdict(list)
    for row in rows:
        groups[(row["context_length"], row["agent"])].append(row)
    for length, agent in sorted(groups, key=lambda k: (_length_key(k[0]), k[1])):
        cells = [_show_length(length), agent, *_cells(groups[(length, agent)], ruler)]
        group = groups[(length, agent)]
        if gated:
            cells += [_read_share(group), _early_stops(group)]
        if recalling:
            cells += _recall_cells(group)
        if rereading:
            rereads = [r for r in group if r.get("rereads") is not None]
            cells.append(_mean(rereads, "rereads", "{:.1f}"))
        if formatted:
            cells.append(_well_formed(group))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _cells(rows: list[Row], ruler: bool) -> list[str]:
    done = [r for r in rows if r["status"] == DONE]
    cells = [str(len(rows))]
    cells += [_percent(rows, "sub_em"), _interval(rows, "sub_em")]
    cells += [_percent(rows, metric) for metric in ("em", "f1", "strict")]
    if ruler:
        cells.append(f"{mean(r.get('match_all') or 0.0 for r in rows):.1f}")
    cells += [
        str(sum(bool(r["null"]) for r in rows)),
        str(sum(r["status"] == FAILED for r in rows)),
        str(sum(not r["null"] and not r["boxed"] for r in done)),
        _mean(done, "calls", "{:.1f}"),
        _mean(done, "prompt_tokens", "{:.0f}"),
        *_update_cells(done),
        _mean(done, "seconds", "{:.2f}"),
    ]
    return cells


def _read_share(rows: list[Row]) -> str:
    """The mean share of the document read, over the samples that recorded it (exit gate
    on); "-" for the others."""
    known = [r for r in rows if r["status"] == DONE and r.get("chunks_read") is not None]
    if not known:
        return "-"
    return f"{100 * mean(r['chunks_read'] / r['chunks'] for r in known):.0f}%"


def _early_stops(rows: list[Row]) -> str:
    """Of the samples where the exit gate stopped reading early, how many stopped before an
    evidence sentence (a needle, a supporting sentence) had been read: ``1 of 7``."""
    done = [r for r in rows if r["status"] == DONE and r.get("chunks_read") is not None]
    stops = [r for r in done if r["chunks_read"] < r["chunks"]]
    if not stops:
        return "-"
    return f"{sum(bool(r.get('exit_before_evidence')) for r in stops)} of {len(stops)}"


def _recall_cells(rows: list[Row]) -> list[str]:
    """ReMemR1's recalls per sample, and the samples where a recall brought back memory
    holding a gold answer (``2 of 10``)."""
    known = [r for r in rows if r["status"] == DONE and r.get("recalls") is not None]
    if not known:
        return ["-", "-"]
    helped = sum(r["recall_hits"] > 0 for r in known)
    return [_mean(known, "recalls", "{:.1f}"), f"{helped} of {len(known)}"]


def _well_formed(rows: list[Row]) -> str:
    """The share of the calls that must follow the agent's format (ReMemR1's steps,
    MemReread's decisions) that did: ``97% of 120``; "-" for other agents."""
    known = [r for r in rows if r["status"] == DONE and r.get("formatted_calls") is not None]
    calls = sum(r["formatted_calls"] for r in known)
    if not calls:
        return "-"
    good = calls - sum(r["format_errors"] for r in known)
    return f"{100 * good / calls:.0f}% of {calls}"


def _update_cells(done: list[Row]) -> list[str]:
    """New tokens per memory update, and the share of updates cut at the memory cap, over the
    samples that recorded them (runs made before these were recorded show "-")."""
    known = [r for r in done if r.get("updates") is not None]
    updates = sum(r["updates"] for r in known)
    if not updates:
        return ["-", "-"]
    tokens = sum(r["update_tokens"] for r in known) / updates
    capped = 100 * sum(r["updates_truncated"] for r in known) / updates
    return [f"{tokens:.0f}", f"{capped:.0f}%"]


def _percent(rows: list[Row], metric: str) -> str:
    return f"{100 * mean(r.get(metric) or 0.0 for r in rows):.1f}"


def _interval(rows: list[Row], metric: str) -> str:
    """The 95% Wilson score interval of ``metric``'s mean over ``rows``, in percent."""
    low, high = wilson_interval(sum(r.get(metric) or 0.0 for r in rows), len(rows))
    return f"{100 * low:.0f}-{100 * high:.0f}"


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a binomial share (95% with the default ``z``): unlike
    p +- z*se it stays inside 0..1 and is not zero-width at 0 or n successes."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _mean(rows: list[Row], key: str, fmt: str) -> str:
    return fmt.format(mean(r[key] for r in rows)) if rows else "-"


def _length_key(length: Any) -> tuple[int, float, str]:
    """Numbers in numeric order, then text, then unknown."""
    if isinstance(length, (int, float)):
        return (0, float(length), "")
    return (1, 0.0, str(length)) if length is not None else (2, 0.0, "")


def _show_length(length: Any) -> str:
    return "-" if length is None else str(length)


def _curves(rows: Sequence[Row]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """dataset -> agent -> [(length, accuracy %)], numeric lengths only."""
    groups: dict[tuple[str, str, float], list[float]] = defaultdict(list)
    for row in rows:
        length = row["context_length"]
        if isinstance(length, (int, float)) and length > 0:
            key = (row["dataset"] or _NO_DATASET, row["agent"], float(length))
            groups[key].append(row["accuracy"])
    curves: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for (dataset, agent, length), values in groups.items():
        curves[dataset][agent].append((length, 100 * mean(values)))
    return curves
