"""The prompt-set comparison table from scripts/compare_prompt_sets.sh's outputs.

    .venv/bin/python scripts/prompt_set_table.py

One row per (set, prompt set): samples, accuracy (RULER match_all for niah, sub-EM for hotpotqa,
the number in the answer for the needle documents), memory tokens per update (mean completion
tokens of the update calls), the share of updates cut at the cap, calls and seconds per sample.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from pathlib import Path

from longread.trace import MEMORY_TRUNCATED, Run

RUNS = Path("results/prompt_sets")
BENCH = Path("bench/results")
PROMPT_SETS = ("paper", "notes")


def eval_row(run_dir: Path) -> dict[str, float]:
    db = sqlite3.connect(f"file:{run_dir / 'results.sqlite'}?mode=ro", uri=True)
    rows = db.execute("SELECT score, cost, trace FROM results WHERE status = 'done'").fetchall()
    scores = [json.loads(score) for score, _, _ in rows]
    accuracy = [s["match_all"] / 100 if s.get("match_all") is not None else s["sub_em"]
                for s in scores]  # fmt: skip
    runs = [Run.load(run_dir / trace) for _, _, trace in rows]
    return summarise(accuracy, runs, [json.loads(cost)["seconds"] for _, cost, _ in rows])


def bench_rows(path: Path) -> dict[int, dict[str, float]]:
    """One row per document length."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    lengths = sorted({r["length"] for r in records})
    return {n: bench_row([r for r in records if r["length"] == n]) for n in lengths}


def bench_row(records: list[dict]) -> dict[str, float]:
    updates = [t for r in records for t in r["memory_tokens"]]
    return {
        "n": len(records),
        "accuracy": statistics.mean(r["correct"] for r in records),
        "memory_tokens": statistics.mean(updates),
        "cut": sum(r["memory_cut"] for r in records) / len(updates),
        "calls": statistics.mean(r["calls"] for r in records),
        "seconds": statistics.mean(r["seconds"] for r in records),
    }


def summarise(accuracy: list[float], runs: list[Run], seconds: list[float]) -> dict[str, float]:
    updates = [s for run in runs for s in run.steps if s.kind == "update"]
    return {
        "n": len(runs),
        "accuracy": statistics.mean(accuracy),
        "memory_tokens": statistics.mean(s.completion_tokens for s in updates),
        "cut": statistics.mean(MEMORY_TRUNCATED in s.flags for s in updates),
        "calls": statistics.mean(run.calls for run in runs),
        "seconds": statistics.mean(seconds),
    }


def main() -> None:
    print("| set | prompts | n | accuracy | memory tokens / update | updates cut at cap | calls "
          "| s / sample |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    cells = []
    for task in ("ruler_niah_single_2", "hotpotqa"):
        for prompts in PROMPT_SETS:
            run_dir = RUNS / f"memagent-{prompts}-{task}-2048"
            if (run_dir / "results.sqlite").exists():
                cells.append((f"{task} 2K", prompts, eval_row(run_dir)))
    for prompts in PROMPT_SETS:
        path = BENCH / f"agents_table_memagent_{prompts}.jsonl"
        if path.exists():
            for length, row in bench_rows(path).items():
                cells.append((f"needle docs {length // 1000}K", prompts, row))
    for name, prompts, row in cells:
        print(
            f"| {name} | {prompts} | {row['n']} | {row['accuracy']:.0%} | "
            f"{row['memory_tokens']:.0f} | {row['cut']:.0%} | {row['calls']:.1f} | "
            f"{row['seconds']:.1f} |"
        )


if __name__ == "__main__":
    main()
