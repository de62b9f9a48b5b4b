"""The adapter cannot silently vanish (issue 25, item 6).

A llama-cpp-python release is reported to accept ``lora_path`` and drop it: the model loads, the
adapter never applies, and every answer comes from the base model. After loading, the embedded
backend checks that the adapter moved a logit and fails loudly if it did not.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from longread.errors import BackendError
from longread.llm.llamacpp import LlamaCppBackend, _probe_logits

pytestmark = pytest.mark.model


def probe(backend: LlamaCppBackend) -> np.ndarray:
    try:
        return _probe_logits(backend.llama)
    finally:
        asyncio.run(backend.aclose())


def test_a_release_that_drops_lora_path_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    class DropsTheAdapter(llama_cpp.Llama):  # type: ignore[misc]
        """What the reported release does: takes lora_path, applies nothing."""

        def __init__(self, *args: Any, lora_path: str | None = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(llama_cpp, "Llama", DropsTheAdapter)
    backend = LlamaCppBackend(adapter="memory")
    version = llama_cpp.__version__
    with pytest.raises(BackendError, match=rf"changed no logit: llama-cpp-python {version}"):
        backend.llama  # noqa: B018  # loading runs the check


def test_the_shipped_adapter_passes_and_stays_on_after_the_check() -> None:
    adapted = probe(LlamaCppBackend(adapter="memory"))  # loaded and checked
    base = probe(LlamaCppBackend(base_model=True))
    assert np.abs(adapted - base).max() > 0.1  # the check put the adapter back
    unchecked = probe(LlamaCppBackend(adapter="memory", check_adapter=False))
    np.testing.assert_array_equal(adapted, unchecked)


def test_an_adapter_scale_of_zero_is_not_checked() -> None:
    """Scale 0 asks for no effect: loading it is not an error."""
    base = probe(LlamaCppBackend(base_model=True))
    np.testing.assert_array_equal(probe(LlamaCppBackend(adapter="memory", adapter_scale=0)), base)
