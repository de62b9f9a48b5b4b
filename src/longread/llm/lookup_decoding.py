"""Prompt-lookup decoding: greedy calls on the embedded model that copy decode several ids a step.

A memory agent's replies are mostly copies: an update writes the old notes out again, the
question's words and a sentence of the section; a runaway update copies filler line after line.
On a small CPU one ``llama_decode`` of a few ids costs little more than one of a single id (the
step is mostly reading every weight once), so guessing the next ids from the text already read
and checking them in one step decodes a copy several ids at a time.

The guess (``propose``): the longest n-gram that ends the ids so far (prompt and reply) and
also occurs earlier; the ids that followed its latest earlier occurrence are the draft. The
check: the draft is decoded behind the id just chosen, with logits at every position; each
drafted id is kept while it is the argmax of the logits before it, so the kept ids are the ones
greedy decoding chooses from those logits. The first id that differs is replaced by that argmax
and the rest of the draft leaves the KV cache.

Greedy only: a sampled call needs speculative sampling's acceptance rule, and penalties make the
argmax depend on the ids before it. The logits of a batch of ids come from llama.cpp's batched
kernels rather than its one-id kernels, which round differently, so on a near-tie the argmax
can differ from the one-id path (``bench/lookup_decoding.py`` counts how often).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .llamacpp_chat import Prompt, Sampled, Stopping, row_logits, sampled_logprob

DRAFT_TOKENS = 10  # the most ids guessed a step; a longer draft mostly costs when it misses
MAX_NGRAM = 3  # the longest suffix looked up; shorter ones are tried when it is not found
# A single recurring id is weak evidence: its drafts miss more often than they pay (a step of 11
# ids costs about 4 one-id steps here; bench/lookup_decoding.py).
MIN_NGRAM = 2


def propose(
    history: Sequence[int],
    *,
    max_ngram: int = MAX_NGRAM,
    min_ngram: int = MIN_NGRAM,
    draft: int = DRAFT_TOKENS,
) -> list[int]:
    """The ids expected next: what followed the latest earlier occurrence of the longest
    n-gram (``max_ngram`` ids down to ``min_ngram``) ending ``history``; empty when none
    recurs."""
    import numpy as np

    ids = np.asarray(history, dtype=np.int64)
    length = len(ids)
    for n in range(min(max_ngram, length - 1), min_ngram - 1, -1):
        suffix = ids[length - n :]
        # Start positions i < length - n (an earlier occurrence) whose n ids equal the suffix.
        starts = length - n
        hit = np.ones(starts, dtype=bool)
        for k in range(n):
            hit &= ids[k : starts + k] == suffix[k]
        found = np.flatnonzero(hit)
        if len(found):
            follow = int(found[-1]) + n
            return [int(token) for token in ids[follow : follow + draft]]
    return []


def lookup_generate(
    llama: Any,
    prompt: Prompt,
    rules: Stopping,
    *,
    draft: int = DRAFT_TOKENS,
    max_ngram: int = MAX_NGRAM,
) -> Sampled:
    """Greedy generation of ``prompt`` on ``llama`` with prompt-lookup drafts, stopping by
    ``rules`` (the same ids and text as ``Llama.generate`` with a greedy sampler, up to the
    batched kernels' rounding: see the module docstring).

    Reuses the KV cache's common prefix with the last call as ``Llama.generate`` does, and
    leaves ``llama``'s record of its cache (``input_ids``, ``n_tokens``) true for the next call.
    """
    import numpy as np

    n_vocab = int(llama.n_vocab())
    window = int(llama.n_ctx())
    _prefill(llama, prompt.ids)
    history = list(prompt.ids)
    row = -1  # the output row of the last decode that predicts the next id
    criteria = prompt.stopping_criteria

    def take(token: int, row: int, logits: Any) -> Sampled | None:
        """Take the id output ``row`` chose (its ``logits``); the finished generation if it
        ends here."""
        if criteria is not None and criteria(np.asarray(history, dtype=np.intc), logits):
            return rules.ran_dry()  # as generate() returns before yielding the id
        history.append(token)
        return rules.add(token, sampled_logprob(llama.ctx, row, n_vocab, token))

    while True:
        logits = row_logits(llama.ctx, row, n_vocab)
        token = int(np.argmax(logits))
        if (done := take(token, row, logits)) is not None:
            return done
        guess = propose(history, max_ngram=max_ngram, draft=draft)
        guess = guess[: max(0, window - llama.n_tokens - 1)]
        start = llama.n_tokens  # ``token``'s cell: history holds start + 1 ids
        _decode_all_logits(llama, [token, *guess], start)
        for drafted_row, drafted in enumerate(guess):
            logits = row_logits(llama.ctx, drafted_row, n_vocab)
            if int(np.argmax(logits)) != drafted:
                break
            if (done := take(drafted, drafted_row, logits)) is not None:
                _keep(llama, len(history))
                return done
        # the cells of the ids taken stay (history is the cache's true content); the rest of
        # the draft leaves, and the row after the last id taken predicts the next one
        _keep(llama, len(history))
        row = len(history) - start - 1


def _prefill(llama: Any, ids: list[int]) -> None:
    """Read the prompt, reusing the longest prefix the KV cache already holds (at least the
    last id is read again, so its logits are fresh)."""
    cached = llama.input_ids[: llama.n_tokens].tolist()
    common = 0
    for held, wanted in zip(cached, ids, strict=False):
        if held != wanted:
            break
        common += 1
    reuse = min(common, len(ids) - 1)
    if not llama._ctx.kv_cache_seq_rm(-1, reuse, -1):
        reuse = 0
        llama.reset()
    llama.n_tokens = reuse
    llama.eval(ids[reuse:])  # removes cells from n_tokens on, then decodes in n_batch chunks


def _decode_all_logits(llama: Any, ids: list[int], start: int) -> None:
    """Decode ``ids`` at positions ``start``.. in one step, with logits at every position."""
    llama._batch.set_batch(batch=ids, n_past=start, logits_all=True)
    llama._ctx.decode(llama._batch)
    llama.input_ids[start : start + len(ids)] = ids
    llama.n_tokens = start + len(ids)


def _keep(llama: Any, n_tokens: int) -> None:
    """Drop the KV cells from ``n_tokens`` on (the rejected draft) and say so in ``llama``."""
    llama._ctx.kv_cache_seq_rm(-1, n_tokens, -1)
    llama.n_tokens = n_tokens
    # The context's last logits are a draft row's, not the last kept id's: the next
    # generate() must read an id again rather than sample from them.
    llama._requires_eval = True
