"""What a peft adapter writes at a memreread run's root updates, asked again (issue 28).

    .venv/bin/python recipes/smollm2/root_replies.py RUN ADAPTER_DIR [ADAPTER_DIR ...]

For every traced sample of RUN (an `eval run` folder), the root pass's first update and its
middle one are asked again of each ADAPTER_DIR (a peft folder, e.g. `stages/sft28t` or a
training run's `adapter/`) in transformers, greedy, 16 new tokens. Each reply is printed, and
the degenerate ones are counted (more than 6 words, at most 3 distinct).

Stop 62's two findings were measured with it on sft28t's held-out run
(`runs/sft28t/eval/step-000006`; `eval run --data
data/heldout28/chains-reversed/chains_reversed_8192.jsonl --agent memreread --adapter
runs/sft28t-run-step6/adapter.gguf` writes such a folder):
- sft28t writes the made-up "The bamboo tree stood beside the lighthouse ..." at 11 of 20;
- sft28u writes "A coupe coupe ..." at 3 of 20 (2 counted degenerate, the third after a few
  words). The peft model does this itself, so the GGUF export is not the cause.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from longread.trace import Run
from longread.train.config import ModelSection
from longread.train.session import load_policy


def root_prompts(run_dir: Path) -> list[list[dict[str, str]]]:
    """The first and the middle root update's messages of each traced sample."""
    prompts = []
    for trace in sorted((run_dir / "traces").glob("*.json")):
        roots = [s for s in Run.load(trace).steps if s.phase == "root"]
        if roots:
            prompts += [roots[0].messages, roots[len(roots) // 2].messages]
    return prompts


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    prompts = root_prompts(Path(sys.argv[1]))
    for adapter in sys.argv[2:]:
        policy = load_policy(ModelSection(path="smollm2", lora=True, adapter=adapter), 0)
        degenerate = 0
        for messages in prompts:
            ids = policy.prompt_ids(messages)
            with torch.no_grad():
                out = policy.model.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)
            text = policy.tokenizer.decode(out[0][len(ids) :])
            words = text.split()
            degenerate += len(words) > 6 and len(set(words)) <= 3
            print(f"{adapter}: {text[:80]!r}")
        print(f"{adapter}: degenerate {degenerate} of {len(prompts)}")


if __name__ == "__main__":
    main()
