"""LLM backends: one async chat protocol, an OpenAI-compatible HTTP client, embedded llama.cpp."""

from .base import EVAL_SAMPLING, TRAINING_SAMPLING, Completion, LLMBackend, Message, SamplingParams

__all__ = [
    "EVAL_SAMPLING",
    "TRAINING_SAMPLING",
    "Completion",
    "LLMBackend",
    "Message",
    "SamplingParams",
]
