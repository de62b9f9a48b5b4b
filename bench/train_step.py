"""Seconds per phase of GRPO steps of SmolLM2-135M-Instruct on this CPU.

    .venv/bin/python bench/train_step.py [--questions 4] [--rollouts 4] [--chunks 3]
        [--chunk-tokens 500] [--memory-tokens 128] [--final-tokens 64] [--steps 1]
        [--engine transformers|llamacpp] [--out bench/results/train_step.jsonl]

Builds needle documents of ``chunks x chunk-tokens`` tokens (SmolLM2's own tokenizer), trains
memagent on them with the default LoRA config for ``--steps`` steps in a temporary folder, and
appends one JSON line per step to --out: the seconds of each phase (rollout, old logprobs,
update, checkpoint), the tokens generated and trained on, and the machine. Run it alone: a
second model process on these two cores distorts every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path

from longread.data.needle import NEEDLE_QUESTION, needle_document_of_length
from longread.train.config import TrainConfig
from longread.train.metrics import read_lines
from longread.train.session import load_policy, policy_tokenizer
from longread.train.trainer import METRICS_FILE, Trainer


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--chunk-tokens", type=int, default=500)
    parser.add_argument("--memory-tokens", type=int, default=128)
    parser.add_argument("--final-tokens", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--engine", default="transformers", choices=["transformers", "llamacpp"])
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--out", default="bench/results/train_step.jsonl")
    return parser.parse_args()


def write_data(folder: Path, tokenizer, args: argparse.Namespace) -> Path:
    """Needle documents that fill ``chunks`` chunks: chunks end on paragraph breaks, so they
    hold a little under ``chunk_tokens``; 85% of the total keeps a last sliver away."""
    rng = random.Random(0)
    length = int(args.chunks * args.chunk_tokens * 0.85)
    rows = []
    for i in range(args.questions):
        number = str(rng.randrange(1_000_000, 10_000_000))
        text = needle_document_of_length(number, length, tokenizer, (i + 0.5) / args.questions)
        rows.append({"id": f"needle-{i}", "question": NEEDLE_QUESTION, "context": text,
                     "answers": [number]})  # fmt: skip
    path = folder / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def main() -> None:
    args = parse()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = TrainConfig.from_dict(
            {
                "agent": {
                    "chunk_tokens": args.chunk_tokens,
                    "memory_tokens": args.memory_tokens,
                    "final_tokens": args.final_tokens,
                },
                "data": {"train": ["placeholder"]},
                "rollout": {
                    "questions": args.questions,
                    "rollouts": args.rollouts,
                    "engine": args.engine,
                },
                "reward": {"reward": "strict+recall", "keep_degenerate": True},
                "optim": {"micro_batch": args.micro_batch},
                "run": {"steps": args.steps},
            }
        )
        clock = time.perf_counter()
        policy = load_policy(config.model, config.run.seed)
        load_seconds = time.perf_counter() - clock
        tokenizer = policy_tokenizer(policy)
        data = write_data(folder, tokenizer, args)
        from longread.train.session import load_data

        trainer = Trainer(config, policy, tokenizer, load_data([str(data)], "training"),
                          folder / "run", progress=True)  # fmt: skip
        trainer.run()
        lines = read_lines(folder / "run" / METRICS_FILE)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a") as handle:
        for line in lines:
            record = {
                "bench": "train_step", **vars(args), "model_load_seconds": load_seconds,
                "machine": f"{platform.machine()} {os.cpu_count()} cores",
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                **{k: v for k, v in line.items() if k != "samples"},
            }  # fmt: skip
            handle.write(json.dumps(record) + "\n")
            phases = {k: round(v, 1) for k, v in line.items() if k.startswith("seconds_")}
            print(json.dumps({"step": line["step"], **phases, "rows": line["rows"],
                              "tokens": line["tokens"], "reward": line["reward"]}))  # fmt: skip


if __name__ == "__main__":
    main()
