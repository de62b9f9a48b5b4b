"""Run a longread command with an earlier form of focused rereads, for ablations.

The agent config keeps each earlier rule reachable (README, ``--focused-reread``), but the CLI
gives only the shipped one. This sets the earlier rule's settings on every memagent config the
command makes, then runs it; the run folder's config records them.

    .venv/bin/python recipes/smollm2/earlier_rule.py stop55 eval run \\
      --data results/v2/data/unseen-van_8192.jsonl --agent memagent --grounded-notes on \\
      --focused-notes on --exact-copies on --focused-reread on \\
      --out results/v2/runs/RUN-reread-stop55
"""

from __future__ import annotations

import sys

from longread.agents import memagent
from longread.cli.main import main

RULES = memagent.EARLIER_REREAD_RULES


def with_rule(name: str) -> None:
    """Make every MemAgentConfig built from now on carry rule ``name``'s settings."""
    settings = RULES[name]
    made = memagent.MemAgentConfig.__post_init__

    def post_init(config: memagent.MemAgentConfig) -> None:
        made(config)
        for key, value in settings.items():
            setattr(config, key, value)

    memagent.MemAgentConfig.__post_init__ = post_init  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in RULES:
        sys.exit(f"usage: earlier_rule.py {{{','.join(RULES)}}} LONGREAD-ARGS...")
    with_rule(sys.argv.pop(1))
    main()
