"""Two evaluation runs of the same data, sample by sample (``longread eval compare``): the
answers one got and the other did not, whether that split is more than chance (McNemar's
exact test), and what each run cost.

Two runs of 20 samples that score 50% and 60% may differ on two samples or on twelve; only the
samples they disagree on say which is better, so the comparison pairs them. This is how a
setting (an exit gate, an adapter stage, a prompt set) is shown to change accuracy, or not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb
from pathlib import Path
from statistics import mean
from typing import Any

from ..errors import UsageError
from .report import agent_labels
from .store import DONE, RunStore, SampleResult

METRICS = ("headline", "strict", "sub_em", "em")


@dataclass(frozen=True)
class Pairing:
    """Two runs' results on the samples both finished, in the same order."""

    data: str  # the data file's name, without its suffix
    label_a: str
    label_b: str
    samples: list[str]
    right_a: list[bool]
    right_b: list[bool]
    seconds_a: list[float]
    seconds_b: list[float]
    read_a: list[float]  # share of the document read, where the run recorded it
    read_b: list[float]
    unpaired: int  # samples finished by one run only (failed or not yet run in the other)
    # The CPU features of the embedded model's kernels in each run's sessions that ran
    # samples (``sessions.jsonl`` ``machine``; empty where none was recorded: a server, or a
    # run made before they were).
    machines_a: frozenset[str] = frozenset()
    machines_b: frozenset[str] = frozenset()

    @property
    def machines_differ(self) -> bool:
        """Whether both runs recorded their kernels and these differ (or one run mixes
        several): greedy replies may then part with no setting acting."""
        known = self.machines_a and self.machines_b
        return bool(known) and (self.machines_a != self.machines_b or len(self.machines_a) > 1)

    @property
    def only_a(self) -> list[str]:
        """The samples A got right and B did not."""
        return self._only(self.right_a, self.right_b)

    @property
    def only_b(self) -> list[str]:
        """The samples B got right and A did not."""
        return self._only(self.right_b, self.right_a)

    def _only(self, these: list[bool], those: list[bool]) -> list[str]:
        return [s for s, x, y in zip(self.samples, these, those, strict=True) if x and not y]


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value for the discordant counts (a binomial test at 1/2): how
    likely a split at least this uneven is when the two are equally good."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2**n
    return min(1.0, 2 * tail)


def is_right(result: SampleResult, metric: str) -> bool:
    """Whether a sample counts as answered: full marks on ``metric`` ("headline": RULER's
    match_all, else sub-EM, as ``eval run`` prints)."""
    if metric == "headline":
        return result.headline >= 1.0
    return float(result.score.get(metric) or 0.0) >= 1.0


def pair_runs(run_a: str | Path, run_b: str | Path, metric: str = "headline") -> Pairing:
    """Pair two run folders by sample id. Refused when they read different data."""
    if metric not in METRICS:
        raise UsageError(f"unknown metric {metric!r}: choose one of {', '.join(METRICS)}")
    loaded = []
    for run in (run_a, run_b):
        if not (Path(run) / "config.json").is_file():
            raise UsageError(f"{run} is not an eval run folder (no config.json)")
        with RunStore(run) as store:
            loaded.append((Path(run), store.load_config(), store.results()))
    (path_a, config_a, results_a), (path_b, config_b, results_b) = loaded
    hashes = config_a.get("data_hash"), config_b.get("data_hash")
    if None not in hashes and hashes[0] != hashes[1]:
        raise UsageError(f"{run_a} and {run_b} read different data (their data_hash differs)")
    done_a = {r.sample_id: r for r in results_a if r.status == DONE}
    done_b = {r.sample_id: r for r in results_b if r.status == DONE}
    samples = sorted(done_a.keys() & done_b.keys())
    if not samples:
        raise UsageError(f"{run_a} and {run_b} have no finished sample in common")
    label_a, label_b = agent_labels([(path_a, config_a), (path_b, config_b)])
    if label_a == label_b:  # the same agent and settings (another model file, another day)
        label_a, label_b = path_a.name, path_b.name
    a, b = [done_a[s] for s in samples], [done_b[s] for s in samples]
    data = Path(config_a.get("data") or path_a.name).name.split(".")[0]
    return Pairing(
        data, label_a, label_b, samples,
        [is_right(r, metric) for r in a], [is_right(r, metric) for r in b],
        [float(r.cost.get("seconds") or 0.0) for r in a],
        [float(r.cost.get("seconds") or 0.0) for r in b],
        _read_shares(a), _read_shares(b),
        len(done_a.keys() ^ done_b.keys()), _machines(path_a), _machines(path_b),
    )  # fmt: skip


def _machines(run_dir: Path) -> frozenset[str]:
    """The kernel features recorded by the run's sessions that ran samples."""
    path = run_dir / "sessions.jsonl"
    if not path.is_file():
        return frozenset()
    sessions = []
    for line in path.read_text().splitlines():
        try:
            sessions.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a crash: the rest still count
    return frozenset(s["machine"] for s in sessions if s.get("machine") and s.get("ran"))


def _read_shares(results: Sequence[SampleResult]) -> list[float]:
    return [
        r.cost["chunks_read"] / r.cost["chunks"]
        for r in results
        if r.cost.get("chunks_read") is not None and r.cost.get("chunks")
    ]


COLUMNS = (
    "data", "A", "B", "n", "A right", "B right", "B - A", "only A", "only B", "McNemar p",
    "s/sample A", "s/sample B", "speed-up", "read A", "read B",
)  # fmt: skip


def compare_table(pairings: Sequence[Pairing]) -> list[str]:
    """A Markdown table, a row per pair and a pooled row when there are several, then the
    legend."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|---|" + "---:|" * (len(COLUMNS) - 3)]
    lines += ["| " + " | ".join(_cells(p)) + " |" for p in pairings]
    if len(pairings) > 1:
        pooled = _pooled(pairings)
        lines.append("| " + " | ".join(_cells(pooled)) + " |")
    unpaired = sum(p.unpaired for p in pairings)
    lines += ["", _LEGEND]
    if unpaired:
        lines.append(f"{unpaired} sample(s) finished by one run only are left out.")
    lines += [_machines_note(p) for p in pairings if p.machines_differ]
    return lines


def _machines_note(p: Pairing) -> str:
    """Why a pair whose runs used other CPU kernels may part on samples no setting touched."""
    every_a, every_b = set(" ".join(p.machines_a).split()), set(" ".join(p.machines_b).split())
    only_a, only_b = sorted(every_a - every_b), sorted(every_b - every_a)
    said = [f"A's with {' '.join(only_a)}"] if only_a else []
    said += [f"B's with {' '.join(only_b)}"] if only_b else []
    which = " and ".join(said) or "several kernel sets in one run"
    return (
        f"{p.data}: A and B ran on different CPU kernels ({which}). Greedy decoding on a "
        "small model can change with them, so samples may differ with no setting acting; "
        "pair runs made on one machine to measure a setting."
    )


_LEGEND = (
    "n: samples both runs finished; A right, B right: of those, full marks on the metric; "
    "B - A: the difference in points; only A / only B: samples one run got and the other did "
    "not; McNemar p: the exact two-sided test on those two counts (below 0.05: unlikely if "
    "both were equally good; with few discordant samples nothing is significant, which "
    "means not known, not equal); speed-up: A's seconds per sample over B's; read: the mean "
    "share of the document read (runs with an exit on)."
)


def _pooled(pairings: Sequence[Pairing]) -> Pairing:
    def joined(field: str) -> list[Any]:
        return [value for p in pairings for value in getattr(p, field)]

    return Pairing(
        "pooled", f"{len(pairings)} pairs", "", joined("samples"), joined("right_a"),
        joined("right_b"), joined("seconds_a"), joined("seconds_b"), joined("read_a"),
        joined("read_b"), 0,
    )  # fmt: skip


def _cells(p: Pairing) -> list[str]:
    n = len(p.samples)
    right_a, right_b = sum(p.right_a), sum(p.right_b)
    seconds_a, seconds_b = mean(p.seconds_a), mean(p.seconds_b)
    speed = f"{seconds_a / seconds_b:.2f}x" if seconds_b else "-"
    return [
        p.data, p.label_a, p.label_b, str(n), f"{right_a} ({100 * right_a / n:.0f}%)",
        f"{right_b} ({100 * right_b / n:.0f}%)", f"{100 * (right_b - right_a) / n:+.0f}",
        str(len(p.only_a)), str(len(p.only_b)),
        f"{mcnemar_exact(len(p.only_a), len(p.only_b)):.3f}",
        f"{seconds_a:.1f}", f"{seconds_b:.1f}", speed, _share(p.read_a), _share(p.read_b),
    ]  # fmt: skip


def _share(shares: list[float]) -> str:
    return f"{100 * mean(shares):.0f}%" if shares else "-"


def pairing_record(p: Pairing) -> dict[str, Any]:
    """One pair as JSON: the labels, every paired sample's outcome, and the test."""
    return {
        "data": p.data,
        "a": p.label_a,
        "b": p.label_b,
        "samples": [
            {"sample_id": s, "a_right": a, "b_right": b, "a_seconds": sa, "b_seconds": sb}
            for s, a, b, sa, sb in zip(
                p.samples, p.right_a, p.right_b, p.seconds_a, p.seconds_b, strict=True
            )
        ],
        "only_a": p.only_a,
        "only_b": p.only_b,
        "mcnemar_p": mcnemar_exact(len(p.only_a), len(p.only_b)),
        "unpaired": p.unpaired,
        "machines_a": sorted(p.machines_a),
        "machines_b": sorted(p.machines_b),
    }
