"""Section-first prompts let the embedded model reuse a chunk's prefill across questions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from longread.agents.memagent import MemAgent, MemAgentConfig
from longread.llm import lookup_decoding
from longread.llm.factory import BackendSettings, make_backend, make_tokenizer
from longread.llm.llamacpp import LlamaCppBackend

from .needle import needle_document

pytestmark = pytest.mark.model

QUESTIONS = ["What is the special magic number?", "Which colour is the sky?"]


def count_prefill(llama: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Per call, the prompt tokens llama.cpp decoded: the first ``eval`` of each ``generate``
    (what ``Llama.generate`` did not find in the tokens kept from the previous call), or of
    each prefill of lookup decoding, which reuses the cache's prefix the same way."""
    computed: list[int] = []
    generate, evaluate = llama.generate, llama.eval
    pending = [False]

    def counted_generate(*args: Any, **kwargs: Any) -> Iterator[int]:
        pending[0] = True
        return generate(*args, **kwargs)

    prefill = lookup_decoding._prefill

    def counted_prefill(*args: Any, **kwargs: Any) -> None:
        pending[0] = True
        prefill(*args, **kwargs)

    monkeypatch.setattr(lookup_decoding, "_prefill", counted_prefill)

    def counted_eval(tokens: Any) -> None:
        if pending[0]:
            computed.append(len(tokens))
            pending[0] = False
        evaluate(tokens)

    llama.generate, llama.eval = counted_generate, counted_eval
    return computed


@pytest.mark.parametrize("lookup", [False, True])
async def test_the_second_question_decodes_only_what_follows_the_shared_chunk(lookup, monkeypatch):
    settings = BackendSettings(backend="llamacpp", n_ctx=2048, lookup_decoding=lookup)
    backend = make_backend(settings)
    assert isinstance(backend, LlamaCppBackend)
    try:
        tokenizer = await make_tokenizer(backend, settings)
        computed = count_prefill(backend.llama, monkeypatch)
        document = needle_document("4720519", repeats=40)
        second: dict[bool, list[tuple[int, int]]] = {}
        for section_first in (False, True):
            config = MemAgentConfig(
                chunk_tokens=300, memory_tokens=24, final_tokens=16, section_first=section_first
            )
            backend.llama.reset()
            computed.clear()
            runs = await MemAgent(backend, tokenizer, config).run_many(QUESTIONS, document)
            updates = [s for s in runs[1].steps if s.kind == "update"]
            assert len(updates) >= 2
            # Calls go chunk-major: chunk k for question 1 (call 2k), then question 2 (2k + 1).
            second[section_first] = [
                (computed[2 * k + 1], step.chunk_tokens or 0) for k, step in enumerate(updates)
            ]
    finally:
        await backend.aclose()
    paper, section_first = second[False], second[True]
    assert all(decoded >= chunk for decoded, chunk in paper)  # the chunk decoded again
    # Section first: most of the chunk is not decoded again (the rest is the problem, the
    # memory and the instruction, which differ by question).
    for (again, chunk), (reused, _) in zip(paper, section_first, strict=True):
        assert reused < again - chunk / 2
