"""Grammars on the real embedded model (llama.cpp + SmolLM2-135M): ``SamplingParams.grammar``
and rememr1's step grammar (``--format-grammar``).

The step grammar is checked with llama.cpp's own grammar engine, a character at a time, against
what ``parse_step_reply`` calls well formed; then replies are decoded under grammars.
"""

from __future__ import annotations

import asyncio
import ctypes
from collections.abc import Iterator
from typing import Any

import pytest

from longread.agents.rememr1 import parse_step_reply, step_grammar
from longread.errors import BackendError
from longread.llm.base import Completion, Message, SamplingParams
from longread.llm.llamacpp import LlamaCppBackend

pytestmark = pytest.mark.model

YES_NO = 'root ::= "yes" | "no"\n'
MESSAGES: list[Message] = [
    {"role": "user", "content": "Is Paris the capital of France? Answer yes or no."}
]
# A request SmolLM2-135M answers with tags of its own making (seen: <html>, <p>).
TAGGED_MESSAGES: list[Message] = [
    {
        "role": "user",
        "content": "Reply with the notes in <update></update>, like <update><memory>"
        "<update><section>. Notes: the van is parked before the storm; its number is 48.",
    }
]


@pytest.fixture(scope="module")
def backend() -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend(base_model=True)
    yield backend
    asyncio.run(backend.aclose())


def chat(backend: LlamaCppBackend, messages: list[Message], **params: Any) -> Completion:
    params.setdefault("max_tokens", 48)
    return asyncio.run(backend.chat(messages, SamplingParams(**params)))


# --- llama.cpp's grammar engine as a matcher --------------------------------------------------


class Matcher:
    """Whether llama.cpp's grammar sampler lets a text through, fed one character at a time
    (each as the vocabulary's one-character id), and ends it there (end of generation)."""

    def __init__(self, llama: Any) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._llama = llama
        self._vocab = llama._model.vocab
        self._eog = int(llama_cpp.llama_vocab_eos(self._vocab))

    def _id(self, char: str) -> int:
        ids = self._llama.tokenize(char.encode("utf-8"), add_bos=False, special=False)
        assert len(ids) == 1, f"{char!r} is not one id"
        return int(ids[0])

    def _allowed(self, sampler: Any, token: int) -> bool:
        lib = self._lib
        data = (lib.llama_token_data * 1)(lib.llama_token_data(token, 0.0, 0.0))
        candidates = lib.llama_token_data_array(data, 1, -1, False)
        lib.llama_sampler_apply(sampler, ctypes.byref(candidates))
        return data[0].logit != float("-inf")

    def accepts(self, grammar: str, text: str) -> bool:
        lib = self._lib
        sampler = lib.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
        assert sampler, "the grammar does not parse"
        try:
            for char in text:
                token = self._id(char)
                if not self._allowed(sampler, token):
                    return False
                lib.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, self._eog)
        finally:
            lib.llama_sampler_free(sampler)


@pytest.fixture(scope="module")
def matcher(backend: LlamaCppBackend) -> Matcher:
    return Matcher(backend.llama)


WELL_FORMED = [
    "<update>Ann wrote it.</update>",
    "The section names the van.\n<update>The van is 48.</update>",
    "<update>\nline one\nline two\n</update>\n<recall>the van</recall>",
    "<update>Ann wrote it.</update> <recall>Ann</recall>",
]
MALFORMED = [
    "<update><memory><update><section>",  # the held-out wordings' tag soup
    "<update>Ann wrote it.</update><update>Ann wrote it.</update>",
    "<update></update>",
    "<update>  </update>",
    "<recall>the van</recall>",
    "<update>Ann</update>\n<recall>a</recall>\n<recall>b</recall>",
    "<update>Ann wrote it.",
]


@pytest.mark.parametrize("reply", WELL_FORMED)
def test_the_step_grammar_lets_every_well_formed_reply_through(
    matcher: Matcher, reply: str
) -> None:
    assert parse_step_reply(reply).well_formed
    assert matcher.accepts(step_grammar(format_stop=False), reply)
    assert matcher.accepts(step_grammar(format_stop=True), reply)


@pytest.mark.parametrize("reply", MALFORMED)
def test_the_step_grammar_refuses_every_malformed_reply(matcher: Matcher, reply: str) -> None:
    assert not parse_step_reply(reply).well_formed
    assert not matcher.accepts(step_grammar(format_stop=False), reply)


def test_the_reply_ends_after_its_blocks(matcher: Matcher) -> None:
    # parse_step_reply reads past trailing text; the grammar ends the reply there instead
    assert not matcher.accepts(step_grammar(format_stop=False), "<update>Ann</update> and more")


def test_with_format_stops_a_second_update_may_open_where_the_stop_ends_the_reply(
    matcher: Matcher,
) -> None:
    # the format stop's string, whole: generation ends on it and the agent cuts after </update>
    ran_on = "<update>Ann wrote it.</update>\n<update>"
    assert matcher.accepts(step_grammar(format_stop=True), ran_on)
    assert not matcher.accepts(step_grammar(format_stop=False), ran_on)


# --- decoding under a grammar -----------------------------------------------------------------


def test_a_grammar_confines_the_reply_on_every_path(backend: LlamaCppBackend) -> None:
    plain = chat(backend, MESSAGES, grammar=YES_NO)
    assert plain.text in {"yes", "no"} and plain.finish_reason == "stop"
    # the recording loop (token ids, kept stops, loop stops) samples under it too
    recorded = chat(backend, MESSAGES, grammar=YES_NO, record_tokens=True)
    assert recorded.text == plain.text and recorded.token_ids is not None


def test_batched_calls_decode_under_their_own_grammars(backend: LlamaCppBackend) -> None:
    # each sequence of a batch has its own sampler, so its own grammar state
    batched = LlamaCppBackend(base_model=True, parallel=2)

    async def both() -> list[Completion]:
        params = SamplingParams(max_tokens=48, grammar=YES_NO)
        free = SamplingParams(max_tokens=48)
        return list(
            await asyncio.gather(batched.chat(MESSAGES, params), batched.chat(MESSAGES, free))
        )

    try:
        constrained, free = asyncio.run(both())
    finally:
        asyncio.run(batched.aclose())
    assert constrained.text == chat(backend, MESSAGES, grammar=YES_NO).text
    assert free.text == chat(backend, MESSAGES).text  # and the other one, unconstrained


def test_a_reply_that_follows_the_grammar_decodes_the_same(backend: LlamaCppBackend) -> None:
    free = chat(backend, MESSAGES)
    assert "<" not in free.text  # so the grammar below allows every id greedy decoding took
    assert chat(backend, MESSAGES, grammar="root ::= [^<]*\n").text == free.text


def test_tags_inside_a_block_are_decoded_away(backend: LlamaCppBackend) -> None:
    free = chat(backend, TAGGED_MESSAGES)
    constrained = chat(backend, TAGGED_MESSAGES, grammar=step_grammar(format_stop=False))
    assert not parse_step_reply(free.text).well_formed
    reply = parse_step_reply(constrained.text)
    # ended by itself, the reply is well formed; at the cap it is a well-formed reply cut short
    if constrained.finish_reason == "stop":
        assert reply.well_formed
    else:
        assert set(reply.problems) <= {"unclosed <update>", "unclosed <recall>"}
    assert constrained.text.count("<update>") == 1


def test_lookup_decoding_leaves_a_grammar_call_to_the_sampler(backend: LlamaCppBackend) -> None:
    # a draft is kept as the argmax of the raw logits, which the grammar's mask would not be
    lookup = LlamaCppBackend(base_model=True, lookup_decoding=True)
    try:
        constrained = chat(lookup, MESSAGES, grammar=YES_NO)
    finally:
        asyncio.run(lookup.aclose())
    assert constrained.text == chat(backend, MESSAGES, grammar=YES_NO).text


def test_a_grammar_llama_cpp_cannot_parse_is_a_one_line_error(backend: LlamaCppBackend) -> None:
    with pytest.raises(BackendError, match="could not parse the reply's grammar"):
        chat(backend, MESSAGES, grammar="root ::= (\n")
    # the model is still usable after it
    assert chat(backend, MESSAGES, grammar=YES_NO).text in {"yes", "no"}
