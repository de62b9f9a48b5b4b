"""Training the memory agents (ALGORITHMS.md sections 2, 3 and 7): rollouts are the agents' own
runs with token records; rewards and advantages are pure functions over them; every
conversation becomes one training row. The trainer itself is being built (issue 9)."""

from .episodes import TrainingRow, training_rows

__all__ = ["TrainingRow", "training_rows"]
