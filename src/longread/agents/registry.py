"""Agents by name, with their config classes: what the CLI, evaluation and serving build from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import UsageError
from ..llm.base import LLMBackend
from ..text.tokenizer import Tokenizer
from .base import AgentBase, ProgressCallback
from .baselines import RAG, FullContext, FullContextConfig, RAGConfig
from .config import SamplingConfig
from .memagent import MemAgent, MemAgentConfig
from .memreread import MemReread, MemRereadConfig
from .rememr1 import ReMemR1, ReMemR1Config


@dataclass(frozen=True)
class AgentSpec:
    """An agent class, its config dataclass, and a one-line description for --help."""

    agent: type[AgentBase[Any]]
    config: type[SamplingConfig]
    summary: str

    def option_names(self) -> set[str]:
        return {f.name for f in fields(self.config)}


AGENTS: dict[str, AgentSpec] = {
    "memagent": AgentSpec(MemAgent, MemAgentConfig, "memory rewritten after every chunk"),
    "rememr1": AgentSpec(ReMemR1, ReMemR1Config, "memory plus recall of earlier memories"),
    "memreread": AgentSpec(MemReread, MemRereadConfig, "memory plus sub-question rereading"),
    "full": AgentSpec(FullContext, FullContextConfig, "whole document in one prompt"),
    "rag": AgentSpec(RAG, RAGConfig, "BM25 top-k chunks, one answer call"),
}


def make_config(name: str, **options: Any) -> SamplingConfig:
    """``name``'s config from ``options``; None values keep the agent's own default.

    An option the agent does not have is a usage error (e.g. ``rag_k`` for memagent), so a
    mistyped command never silently ignores a flag."""
    spec = agent_spec(name)
    given = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(given) - spec.option_names())
    if unknown:
        flags = ", ".join("--" + k.replace("_", "-") for k in unknown)
        raise UsageError(f"{flags} do(es) not apply to --agent {name}")
    return spec.config(**given)


def make_agent(
    name: str,
    backend: LLMBackend,
    tokenizer: Tokenizer,
    config: SamplingConfig | None = None,
    progress: ProgressCallback | None = None,
    *,
    record_tokens: bool = False,
    call_backends: Mapping[str, LLMBackend] | None = None,
) -> AgentBase[Any]:
    """Build agent ``name`` around ``backend``: ``await make_agent("rag", b, t).run(q, doc)``.
    ``record_tokens`` keeps prompt ids, sampled ids and logprobs in every step (training);
    ``call_backends``: kinds of call ("decide", ...) sent to a backend of their own."""
    spec = agent_spec(name)
    config = config or spec.config()
    if not isinstance(config, spec.config):
        raise UsageError(
            f"agent {name} takes a {spec.config.__name__}, not a {type(config).__name__}"
        )
    return spec.agent(
        backend, tokenizer, config, progress=progress, record_tokens=record_tokens,
        call_backends=call_backends,
    )  # fmt: skip


def agent_spec(name: str) -> AgentSpec:
    try:
        return AGENTS[name]
    except KeyError:
        raise UsageError(f"unknown agent {name!r}; choose one of {', '.join(AGENTS)}") from None
