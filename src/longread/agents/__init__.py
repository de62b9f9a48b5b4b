"""Agents that read documents longer than the model's window."""

from .answer import extract_boxed, strip_think
from .base import Agent, CallContext, Document, run_sync
from .memagent import MemAgent, MemAgentConfig

__all__ = [
    "Agent",
    "CallContext",
    "Document",
    "MemAgent",
    "MemAgentConfig",
    "extract_boxed",
    "run_sync",
    "strip_think",
]
