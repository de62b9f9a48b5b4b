"""Agents that read documents longer than the model's window, and the baselines they beat.

run = await make_agent("memagent", backend, tokenizer).run(question, document)
runs = await agent.run_many(questions, document)  # a MultiQuestionAgent (memagent): one pass
"""

from .answer import extract_boxed, strip_think
from .base import Agent, AgentBase, CallContext, Document, Reading, run_sync
from .baselines import RAG, FullContext, FullContextConfig, RAGConfig
from .memagent import MemAgent, MemAgentConfig
from .memreread import MemReread, MemRereadConfig
from .multi import MultiQuestionAgent
from .registry import AGENTS, make_agent, make_config
from .rememr1 import ReMemR1, ReMemR1Config

__all__ = [
    "AGENTS",
    "RAG",
    "Agent",
    "AgentBase",
    "CallContext",
    "Document",
    "FullContext",
    "FullContextConfig",
    "MemAgent",
    "MemAgentConfig",
    "MemReread",
    "MemRereadConfig",
    "MultiQuestionAgent",
    "RAGConfig",
    "ReMemR1",
    "ReMemR1Config",
    "Reading",
    "extract_boxed",
    "make_agent",
    "make_config",
    "run_sync",
    "strip_think",
]
