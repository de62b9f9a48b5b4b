"""Training longread's agents at scale with verl 0.9 (TRAINING.md, "Which engine does what").

verl's agent loops may return several outputs per sample; its multi-trajectory advantage step
gives them one shared GRPO advantage. longread plugs in through verl's public registries, never
a fork:

- :mod:`longread.train.verl.loop`: ``LongreadAgentLoop``, an agent loop (``register``) that
  runs a longread agent on verl's rollout servers and returns one ``AgentLoopOutput`` per
  conversation, built from the step records;
- :mod:`longread.train.verl.plugin`: the ``longread_grpo``, ``longread_rememr1`` and
  ``longread_rea`` advantage estimators (``register_adv_est``; the CPU trainer's own credit
  function, :mod:`longread.train.credit`) and the ``longread_*`` trainers
  (``register_trainer``) that hand them what verl's estimator interface cannot carry
  (rollout and step of each row, step rewards, reread counts). Name it in
  ``VERL_USE_EXTERNAL_MODULES``.

Those two import verl (``make install-verl``); without it, importing them raises a UsageError
that says so. What this package exports is engine-neutral and imports without verl.
docs/verl.md says how to launch and what has run where.
"""

from __future__ import annotations

from ...errors import UsageError
from .rows import (
    LOOP_NAME,
    PAYLOAD_KEY,
    ConversationOutput,
    conversation_outputs,
    dataset_row,
    sample_from_row,
)
from .sessions import METHODS, SessionRow, parse_row_key, row_advantages, session_rows

# verl's adv_estimator names for longread's advantages -> the method of row_advantages.
ESTIMATORS = {"longread_grpo": "grpo", "longread_rememr1": "rememr1", "longread_rea": "rea"}
VERL_VERSION = "0.9.1"  # the release the adapter was written against (docs/verl.md)


def verl_missing(error: ImportError) -> UsageError:
    """The error the verl modules raise when ``import verl...`` failed: what is missing and
    how to install it."""
    return UsageError(
        f"verl cannot be imported ({error}): run `make install-verl` (verl {VERL_VERSION} "
        "without its GPU dependencies; see docs/verl.md), or install verl[vllm] on a GPU machine"
    )


__all__ = [
    "ESTIMATORS",
    "LOOP_NAME",
    "METHODS",
    "PAYLOAD_KEY",
    "VERL_VERSION",
    "ConversationOutput",
    "SessionRow",
    "conversation_outputs",
    "dataset_row",
    "parse_row_key",
    "row_advantages",
    "sample_from_row",
    "session_rows",
    "verl_missing",
]
