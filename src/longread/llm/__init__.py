"""LLM backends: one async chat protocol, an OpenAI-compatible HTTP client, embedded llama.cpp."""

from .base import Completion, LLMBackend, Message, SamplingParams, Usage

__all__ = ["Completion", "LLMBackend", "Message", "SamplingParams", "Usage"]
