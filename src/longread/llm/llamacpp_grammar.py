"""llama.cpp's grammar sampler, and greedy decoding under it at the cost of one check a token.

In a sampler chain the grammar sampler checks every id of the vocabulary (49,152 for SmolLM2)
against the grammar at every decoded token: 0.72x the speed of free decoding here at stop 75
(``bench/overhead.py``'s ``grammar-mask`` path measures it). Greedy decoding needs less.
The argmax of the (penalised) logits is the reply's token whenever the grammar allows it,
since it is then also the argmax of the allowed ids; only when the grammar refuses it is the
whole vocabulary masked and the argmax taken again (llama.cpp's own ``common_sampler``
checks its pick the same way). ``GreedyUnderGrammar`` does that: the same token, step for
step, as the chain's full mask.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..errors import BackendError


def init_grammar_sampler(llama: Any, grammar: str) -> Any:
    """llama.cpp's grammar sampler for ``grammar`` (GBNF, its rule ``root`` the whole reply);
    a ``BackendError`` when llama.cpp cannot parse it."""
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(
        llama._model.vocab, grammar.encode("utf-8"), b"root"
    )
    # llama.cpp returns no sampler for a grammar it cannot parse (and logs why); using that
    # would crash the process, so it is checked here.
    if not sampler:
        raise BackendError("llama.cpp could not parse the reply's grammar (GBNF, rule root)")
    return sampler


class GreedyUnderGrammar:
    """Greedy decoding under a grammar, as a sampler for ``Llama.generate`` and the batched
    path (``sample(ctx, row)``, ``close()``): the argmax of the logits after ``penalties`` (a
    llama.cpp sampler chain, possibly empty) among the ids ``grammar`` allows.

    Picks the same token as the chain grammar, penalties, greedy; each pick is accepted into
    the grammar (which moves it on) and the penalties."""

    def __init__(self, grammar: Any, penalties: Any, n_vocab: int) -> None:
        import llama_cpp
        import numpy as np

        self._lib = llama_cpp
        self._grammar = grammar
        self._penalties = penalties  # a llama_cpp._internals.LlamaSampler; it frees itself
        self._n_vocab = n_vocab
        # llama_token_data's layout (id, logit, p), so llama.cpp reads numpy's buffer in place
        self._candidates = np.zeros(
            n_vocab, dtype=np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
        )
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._one = (llama_cpp.llama_token_data * 1)()

    def sample(self, ctx: Any, row: int = -1) -> int:
        """The token for output ``row`` of ``ctx``'s last decode; accepted into the samplers."""
        import numpy as np

        lib = self._lib
        logits = lib.llama_get_logits_ith(ctx.ctx, row)
        candidates = self._candidates
        candidates["id"] = self._ids
        candidates["logit"] = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))
        everything = self._array(candidates.ctypes.data, self._n_vocab)
        lib.llama_sampler_apply(self._penalties.sampler, ctypes.byref(everything))
        token = int(candidates["id"][int(np.argmax(candidates["logit"]))])
        if not self._allows(token):
            lib.llama_sampler_apply(self._grammar, ctypes.byref(everything))
            token = int(candidates["id"][int(np.argmax(candidates["logit"]))])
        lib.llama_sampler_accept(self._grammar, token)
        lib.llama_sampler_accept(self._penalties.sampler, token)
        return token

    def _allows(self, token: int) -> bool:
        self._one[0] = self._lib.llama_token_data(token, 0.0, 0.0)
        one = self._array(ctypes.addressof(self._one), 1)
        self._lib.llama_sampler_apply(self._grammar, ctypes.byref(one))
        return self._one[0].logit != float("-inf")

    def _array(self, address: int, size: int) -> Any:
        lib = self._lib
        data = ctypes.cast(address, ctypes.POINTER(lib.llama_token_data))
        return lib.llama_token_data_array(data, size, -1, False)

    def close(self) -> None:
        """Free the grammar sampler (the penalties' chain frees itself)."""
        if self._grammar is not None:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None
        self._penalties.close()

    def __del__(self) -> None:
        self.close()
