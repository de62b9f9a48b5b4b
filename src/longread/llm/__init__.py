"""LLM backends: one async chat protocol, an OpenAI-compatible HTTP client, embedded llama.cpp."""

from .base import Completion, LLMBackend, Message, SamplingParams

__all__ = ["Completion", "LLMBackend", "Message", "SamplingParams"]
