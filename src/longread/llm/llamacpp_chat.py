"""What the serial (``llamacpp``) and batched (``llamacpp_batch``) embedded paths share.

One chat call on llama.cpp, step for step as llama-cpp-python's ``create_chat_completion`` takes
it: the prompt its chat handler renders and tokenises (``render_prompt``), its seeding
(``seed_as_create_completion``), its token cap (``token_cap``) and its stopping rules
(``Stopping``). The sampler is ours (``build_sampler``): the one spec of ``SamplingParams``, in
place of llama-cpp-python's chat defaults (top-k 40, min-p 0.05, top-p before temperature).

Both paths import this module; neither imports the other's helpers.
"""

from __future__ import annotations

import contextlib
import inspect
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import BackendError, BudgetError
from .base import Message, SamplingParams
from .llamacpp_grammar import GreedyUnderGrammar, init_grammar_sampler
from .loops import LoopWatch


@dataclass
class Prompt:
    """A rendered chat prompt: its ids, its stop strings, the chat format's own criterion."""

    ids: list[int]
    stops: list[bytes]
    stopping_criteria: Any  # the chat format's StoppingCriteriaList, or None
    # The caller's stop strings that stay in the text when they end it (``include_stop``).
    kept_stops: frozenset[bytes] = frozenset()
    # End the reply where it falls into a loop (``SamplingParams.loop_stop``).
    loop_stop: bool = False


@dataclass
class Sampled:
    """A finished generation: the sampled ids, their logprobs, its text and why it ended."""

    ids: list[int]
    logprobs: list[float]
    text: bytes
    finish_reason: str
    eog: bool = False  # ended on the end-of-generation id (the last of ``ids``)


def llama_error(exc: ValueError, window: int) -> Exception:
    """llama-cpp-python's ValueError as ours: a prompt over the window is a BudgetError."""
    if "exceed context window" in str(exc):
        return BudgetError(f"prompt does not fit the {window}-token window: {exc}")
    return BackendError(f"llama.cpp failed: {exc}")


# -- the sampler ---------------------------------------------------------------------------


def build_sampler(llama: Any, params: SamplingParams, seed: int, *, full_mask: bool = False) -> Any:
    """A llama.cpp sampler chain drawing as ``SamplingParams`` says, seeded with ``seed``.

    Penalties, then temperature, then top-k, top-p and min-p on the tempered distribution, as
    vLLM and the transformers policy apply them (llama-cpp-python's own chain applies top-p
    and min-p before the temperature). A knob that is off adds nothing to the chain.

    A grammar comes first, so every later step sees only the ids it allows. Greedy under a
    grammar is ``GreedyUnderGrammar``, which checks only the argmax against the grammar and
    picks the same tokens as the chain; ``full_mask`` builds the chain instead (the grammar
    checks the whole vocabulary at every token), to compare the two."""
    from llama_cpp import _internals

    sampler = _internals.LlamaSampler()
    greedy = params.temperature <= 0.0
    if params.grammar is not None:
        grammar = init_grammar_sampler(llama, params.grammar)
        if greedy and not full_mask:
            add_penalties(sampler, llama, params)
            return GreedyUnderGrammar(grammar, sampler, int(llama.n_vocab()))
        # llama_sampler_sample accepts each sampled id into the chain, which moves it on
        llama_cpp_chain_add(sampler, grammar)
    add_penalties(sampler, llama, params)
    if greedy:
        sampler.add_greedy()
        return sampler
    sampler.add_temp(params.temperature)
    if params.top_k > 0:
        sampler.add_top_k(params.top_k)
    if params.top_p < 1.0:
        sampler.add_top_p(params.top_p, 1)
    if params.min_p > 0.0:
        sampler.add_min_p(params.min_p, 1)
    sampler.add_dist(seed)
    return sampler


def add_penalties(sampler: Any, llama: Any, params: SamplingParams) -> None:
    """Add ``params``' repetition penalties to ``sampler``'s chain, if any is on."""
    if params.penalised:
        # Window: the whole completion (the context holds no more), so every sampled id counts.
        sampler.add_penalties(
            n_vocab=int(llama.n_vocab()),
            penalty_last_n=int(llama.n_ctx()),
            penalty_repeat=params.repeat_penalty,
            penalty_freq=params.frequency_penalty,
            penalty_present=params.presence_penalty,
        )


def llama_cpp_chain_add(sampler: Any, member: Any) -> None:
    """Append llama.cpp sampler ``member`` to ``sampler``'s chain, which then owns it."""
    import llama_cpp

    llama_cpp.llama_sampler_chain_add(sampler.sampler, member)


@contextlib.contextmanager
def spec_sampler(llama: Any, params: SamplingParams) -> Iterator[None]:
    """Within the block, llama-cpp-python's own generation (``create_chat_completion``,
    ``generate``) samples with ``build_sampler``'s chain for ``params``.

    ``Llama.generate`` builds its sampler through ``_init_sampler`` from knobs with its own
    defaults; the instance's method is shadowed for the call (calls on one ``Llama`` never
    overlap: the backend runs them one at a time). The seed is read when the sampler is built,
    after ``create_completion`` has reseeded, as ``_init_sampler`` reads it."""

    def init_sampler(**knobs: Any) -> Any:
        if knobs.get("grammar") is not None or knobs.get("logits_processor") is not None:
            # longread's grammar comes in SamplingParams.grammar, through build_sampler
            raise BackendError("llama-cpp-python's grammar and logits processors are not used")
        return build_sampler(llama, params, int(llama._seed))

    llama._init_sampler = init_sampler
    try:
        yield
    finally:
        del llama._init_sampler


def seed_as_create_completion(llama: Any, seed: int | None) -> None:
    """Reseed as ``create_completion`` does on every call: from the given seed, or else from
    the last one, so the recording and batched paths stay on the plain path's random stream."""
    if seed is not None:
        llama.set_seed(seed)
    else:
        llama.set_seed(random.Random(llama._seed).randint(0, 2**32))


def sampled_logprob(ctx: Any, row: int, n_vocab: int, token: int) -> float:
    """log p(token) under the raw logits of output ``row`` of the last decode (log-softmax)."""
    import numpy as np

    values = row_logits(ctx, row, n_vocab).astype(np.float64)
    top = values.max()
    return float(values[token] - top - np.log(np.exp(values - top).sum()))


def row_logits(ctx: Any, row: int, n_vocab: int) -> Any:
    """The raw logits of output ``row`` of the last decode, as a numpy view (not a copy)."""
    import llama_cpp
    import numpy as np

    # The row llama_sampler_sample reads; the sampler copies it before top-k &c.
    logits = llama_cpp.llama_get_logits_ith(ctx, row)
    return np.ctypeslib.as_array(logits, shape=(n_vocab,))


# -- the prompt ----------------------------------------------------------------------------


def render_prompt(llama: Any, messages: list[Message], params: SamplingParams) -> Prompt:
    """The token ids ``create_chat_completion`` would feed the model, and its stop strings
    (``params.stop``); with ``params.include_stop`` the caller's stop strings stay in the text
    they end (never the chat format's own); ``params.loop_stop`` ends a reply in a loop."""
    result = chat_formatter(llama)(
        messages=messages, functions=None, function_call=None, tools=None, tool_choice=None
    )
    # Exactly as chat_formatter_to_chat_completion_handler tokenises: a template that writes
    # its own BOS says so (added_special), and its special tokens are parsed as such.
    ids = llama.tokenize(
        result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
    )
    format_stops = [result.stop] if isinstance(result.stop, str) else list(result.stop or [])
    stop = params.stop
    stops = [*stop, *format_stops]  # the handler appends the format's stops to the caller's
    kept = frozenset(s.encode("utf-8") for s in stop) if params.include_stop else frozenset()
    encoded = [s.encode("utf-8") for s in stops]
    return Prompt(list(ids), encoded, result.stopping_criteria, kept, params.loop_stop)


def chat_formatter(llama: Any) -> Any:
    """The formatter behind the chat handler ``create_chat_completion`` picks for this model."""
    from llama_cpp import llama_chat_format

    handler = (
        llama.chat_handler
        or llama._chat_handlers.get(llama.chat_format)
        or llama_chat_format.get_chat_completion_handler(llama.chat_format)
    )
    # Handlers made from a formatter (the GGUF's own template, the named formats) keep it in
    # their closure; llama-cpp-python has no other way to render a prompt without generating.
    formatter = None
    if inspect.isfunction(handler):
        formatter = inspect.getclosurevars(handler).nonlocals.get("chat_formatter")
    if formatter is None:
        raise BackendError(
            f"cannot record tokens with this model's chat handler ({llama.chat_format or handler})"
            ": it is not built from a chat template; run without --record-tokens"
        )
    return formatter


def token_cap(window: int, prompt_tokens: int, max_tokens: int) -> int:
    """``max_tokens`` as ``_create_completion`` applies it: unlimited if <= 0, cut to the window."""
    if prompt_tokens >= window:
        # The plain path's own words, which the backend turns into a BudgetError.
        raise ValueError(f"Requested tokens ({prompt_tokens}) exceed context window of {window}")
    room = window - prompt_tokens
    return room if max_tokens <= 0 else min(max_tokens, room)


# -- stopping ------------------------------------------------------------------------------


class Stopping:
    """``_create_completion``'s stopping rules, fed one sampled id at a time.

    End-of-generation, stop strings (checked only once no UTF-8 character is incomplete), a
    loop (``Prompt.loop_stop``: finish_reason "loop", the text kept through the byte that made
    it certain, as ``loops.loop_end`` cuts a whole reply), the token cap: shared by the serial
    loop and the batched one, so both stop at the same token with the same text.
    """

    def __init__(self, llama: Any, prompt: Prompt, max_tokens: int) -> None:
        import llama_cpp

        self._llama = llama
        self._vocab = llama_cpp.llama_model_get_vocab(llama.model)
        self._is_eog = llama_cpp.llama_vocab_is_eog
        self._prompt = prompt
        self._max_tokens = max_tokens
        self._held = 0
        self._loops = LoopWatch() if prompt.loop_stop else None
        self._watched = 0  # bytes of the text the loop watch has read
        self.ids: list[int] = []
        self.logprobs: list[float] = []

    def add(self, token: int, logprob: float) -> Sampled | None:
        """Take one sampled id; the finished generation if it ends here, else None."""
        self.logprobs.append(logprob)
        self.ids.append(token)
        ids, previous = self.ids, self._prompt.ids
        if self._is_eog(self._vocab, token):
            text = self._llama.detokenize(ids[:-1], previous)
            return Sampled(ids, self.logprobs, text, "stop", eog=True)
        text = self._llama.detokenize(ids, previous)
        self._held = _utf8_hold(text, self._held)
        if self._held > 0:  # a character is still incomplete: no stop check, no cap check yet
            self._held -= 1
            return None
        found = _stop_found(text, self._prompt.stops)
        if found is not None:
            cut, stop = found
            kept = len(stop) if stop in self._prompt.kept_stops else 0
            return Sampled(ids, self.logprobs, text[: cut + kept], "stop")
        if self._loops is not None:
            end = self._loops.feed(text[self._watched :])
            self._watched = len(text)
            if end is not None:
                return Sampled(ids, self.logprobs, text[:end], "loop")
        if len(ids) >= self._max_tokens:
            return Sampled(ids, self.logprobs, text, "length")
        return None

    def ran_dry(self) -> Sampled:
        """The generation when the chat format's stopping criterion ended it."""
        text = self._llama.detokenize(self.ids, self._prompt.ids)
        return Sampled(self.ids, self.logprobs, text, "stop")


def _utf8_hold(text: bytes, held: int) -> int:
    """``_create_completion``'s count of tokens to wait for an incomplete UTF-8 character.

    Copied as is (quirks included) so stop strings and the cap are checked at the same tokens.
    """
    for i, byte in enumerate(text[-3:]):
        back = 3 - i
        for length, lead in ((2, 192), (3, 224), (4, 240)):
            if length > back and lead & byte == lead:
                held = length - back
    return held


def _stop_found(text: bytes, stops: list[bytes]) -> tuple[int, bytes] | None:
    """Where the text is cut, and by which stop string: the first listed one it contains
    (not the earliest)."""
    return next(((text.index(stop), stop) for stop in stops if stop in text), None)
