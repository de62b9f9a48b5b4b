"""The harness's end-to-end overhead over one session of scripts/results_embedded.sh: the
session's wall time minus the backend-busy time of the eval sessions that finished inside it.

    python3 scripts/session_overhead.py STARTED SECONDS [RUN_NAME_TO_LEAVE_OUT ...]

STARTED and SECONDS come from results/invocations.jsonl; leave out runs made by another
process at the same time (their calls were not the script's)."""

import glob
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

started = datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00"))
seconds = float(sys.argv[2])
ended = started + timedelta(seconds=seconds)
left_out = set(sys.argv[3:])
busy = wall = 0.0
count = 0
for path in sorted(glob.glob("results/runs/*/sessions.jsonl")):
    if path.split("/")[2] in left_out:
        continue
    for line in Path(path).read_text().splitlines():
        session = json.loads(line)
        if started <= datetime.fromisoformat(session["finished"]) <= ended:
            busy += session["backend_busy_seconds"]
            wall += session["wall_seconds"]
            count += 1
outside = seconds - busy
print(f"session wall {seconds:.0f} s; {count} eval sessions: wall {wall:.1f} s, busy {busy:.1f} s")
print(
    f"outside backend calls: {outside:.1f} s = {100 * outside / seconds:.2f}% "
    f"(start-up, model and data loading between eval sessions: {seconds - wall:.1f} s)"
)
