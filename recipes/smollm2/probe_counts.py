"""The exit probe's replies in eval run folders, counted from their traces (stop 69's tables).

    .venv/bin/python recipes/smollm2/probe_counts.py results/v2/runs/RUN [RUN ...]

Per run: the probe calls, how many said yes, no or neither, and the flags they carry
(``gate_exit``: an exit taken; ``gate_exit_ungrounded``: a yes the grounded exit refused).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def probe_counts(run: Path) -> Counter[str]:
    """The probe steps of every trace in ``run``: their replies and flags, counted."""
    counts: Counter[str] = Counter()
    for trace in sorted((run / "traces").glob("*.json")):
        for step in json.loads(trace.read_text(encoding="utf-8")).get("steps", []):
            if step.get("kind") != "probe":
                continue
            reply = (step.get("reply") or "").strip().lower()
            counts["probes"] += 1
            counts[next((w for w in ("yes", "no") if reply.startswith(w)), "other")] += 1
            counts.update(step.get("flags") or [])
    return counts


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__.splitlines()[2].strip())
    for name in sys.argv[1:]:
        print(Path(name).name, dict(probe_counts(Path(name))))


if __name__ == "__main__":
    main()
