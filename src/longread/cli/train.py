"""``longread train``: multi-conversation GRPO of a memory agent, resumable at every step."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import UsageError


@click.command("train")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="TOML (or YAML) training config; see --print-config for every setting.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Run folder (checkpoints, metrics, evaluations); default runs/<config name>. "
    "The same command with the same folder resumes from the newest checkpoint.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=0),
    help="Override run.steps (a finished run can be extended this way).",
)
@click.option(
    "--stop-after",
    type=click.IntRange(min=1),
    help="End this session after N steps; the same command continues later.",
)
@click.option(
    "--print-config",
    is_flag=True,
    help="Print every setting with its default and help, as TOML, and exit.",
)
@click.option(
    "--progress/--no-progress", default=True, show_default=True, help="Progress bars on stderr."
)
def train_command(
    config_file: str | None,
    out: str | None,
    steps: int | None,
    stop_after: int | None,
    print_config: bool,
    progress: bool,
) -> None:
    """Train the policy of a memory agent with GRPO over its own rollouts (extra 'train').

    Every step is checkpointed (adapter, optimizer, RNG, data position): kill the command at
    any moment and run it again to continue exactly where it stopped.
    """
    from ..train.config import describe_defaults, load_config

    if print_config:
        click.echo(describe_defaults(), nl=False)
        return
    if not config_file:
        raise UsageError("give --config FILE (or --print-config for a template)")
    config = load_config(config_file)
    if steps is not None:
        config.run.steps = steps
    folder = Path(out) if out else Path("runs") / Path(config_file).stem
    try:
        from ..train.session import train
    except ImportError as exc:  # torch, transformers or peft missing
        raise UsageError(
            f"training needs the 'train' extra: pip install 'longread[train]' ({exc})"
        ) from None
    position = train(config, folder, stop_after=stop_after, progress=progress)
    state = "finished" if position.step >= config.run.steps else "stopped"
    click.echo(
        f"{state} at step {position.step} of {config.run.steps}; run folder {folder}", err=True
    )
    sys.stdout.flush()
