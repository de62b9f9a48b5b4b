"""Grammars on the real embedded model (llama.cpp + SmolLM2-135M): ``SamplingParams.grammar``
and rememr1's step grammar (``--format-grammar``).

The step grammar is checked with llama.cpp's own grammar engine, a character at a time, against
what ``parse_step_reply`` calls well formed; then replies are decoded under grammars.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
from collections.abc import Iterator
from typing import Any

import pytest

from longread.agents.rememr1 import parse_step_reply, step_grammar, step_messages
from longread.errors import BackendError
from longread.llm import llamacpp_batch, llamacpp_chat
from longread.llm.base import Completion, Message, SamplingParams
from longread.llm.llamacpp import LlamaCppBackend
from longread.llm.llamacpp_grammar import GreedyUnderGrammar
from longread.llm.memory_adapter import bundled_memory_adapter

pytestmark = pytest.mark.model

YES_NO = 'root ::= "yes" | "no"\n'
MESSAGES: list[Message] = [
    {"role": "user", "content": "Is Paris the capital of France? Answer yes or no."}
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
    "<update><memory><<update></<update></<update>",
    "<update>Ann <UPDATE>wrote</update>",
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


def test_no_other_tag_is_let_into_a_block(matcher: Matcher) -> None:
    # parse_step_reply reads these as well formed; the grammar has the model write plain text
    # there (sft28q's tag soup on held-out wordings, <update><memory><update>..., starts so)
    for reply in (
        "<update>The code is <b>48</b>.</update>",
        "<update>a</update><recall><m>1</m></recall>",
    ):
        assert parse_step_reply(reply).well_formed
        assert not matcher.accepts(step_grammar(format_stop=False), reply)


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


# A rememr1 step whose section holds tags of its own: rememr1's shipped adapter answers it with
# tag soup to the cap (seen: "<recall><memory><update><section><update>..."), as it does on
# held-out wordings.
TAGGED_SECTION = (
    "The page template nests a <memory> element inside each <section> element, and the "
    "<update> element holds the edits. Browsers render <section> and <memory> as blocks. "
) * 5
QUESTION = "To what number must the dial be turned to open lonely-flame's locker?"


@pytest.fixture(scope="module")
def adapter() -> Iterator[LlamaCppBackend]:
    adapter = LlamaCppBackend(adapter=str(bundled_memory_adapter("rememr1")))
    yield adapter
    asyncio.run(adapter.aclose())


TAG_SOUP_STEP = step_messages(QUESTION, "None", "No previous memory", TAGGED_SECTION, None)


def test_a_step_the_shipped_adapter_writes_as_tag_soup_decodes_well_formed(
    adapter: LlamaCppBackend,
) -> None:
    free = chat(adapter, TAG_SOUP_STEP, max_tokens=256)
    constrained = chat(adapter, TAG_SOUP_STEP, max_tokens=256, grammar=step_grammar(False))
    assert not parse_step_reply(free.text).well_formed
    # the grammar leaves no tag to open inside a block: the reply closes and ends
    assert constrained.finish_reason == "stop"
    assert parse_step_reply(constrained.text).well_formed


def test_only_greedy_calls_under_a_grammar_check_their_pick(backend: LlamaCppBackend) -> None:
    # the check is exact for greedy decoding only; a sampled call masks every id first
    greedy = llamacpp_chat.build_sampler(backend.llama, SamplingParams(grammar=YES_NO), 0)
    sampled = SamplingParams(grammar=YES_NO, temperature=0.7)
    try:
        assert isinstance(greedy, GreedyUnderGrammar)
        assert not isinstance(
            llamacpp_chat.build_sampler(backend.llama, sampled, 0), GreedyUnderGrammar
        )
        masked = llamacpp_chat.build_sampler(
            backend.llama, SamplingParams(grammar=YES_NO), 0, full_mask=True
        )
        assert not isinstance(masked, GreedyUnderGrammar)
    finally:
        greedy.close()


@pytest.mark.parametrize("knobs", [{}, {"repeat_penalty": 1.3}, {"record_tokens": True}])
def test_greedy_under_a_grammar_picks_what_masking_every_id_picks(
    adapter: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch, knobs: dict[str, Any]
) -> None:
    # Greedy checks only its argmax against the grammar, and masks the whole vocabulary only
    # when the grammar refuses it; on the tag-soup step it refuses the adapter's pick at once
    # (free, the reply opens a tag inside <update>), so both branches are taken.
    params = {"max_tokens": 256, "grammar": step_grammar(False), **knobs}
    checked = chat(adapter, TAG_SOUP_STEP, **params)
    full_mask = functools.partial(llamacpp_chat.build_sampler, full_mask=True)
    monkeypatch.setattr(llamacpp_chat, "build_sampler", full_mask)
    masked = chat(adapter, TAG_SOUP_STEP, **params)
    assert checked.text == masked.text
    assert checked.completion_tokens == masked.completion_tokens
    assert checked.token_ids == masked.token_ids  # both None unless recorded


def test_a_batched_greedy_call_under_a_grammar_picks_what_masking_picks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batched = LlamaCppBackend(adapter=str(bundled_memory_adapter("rememr1")), parallel=2)
    params = SamplingParams(max_tokens=256, grammar=step_grammar(False))
    try:
        checked = asyncio.run(batched.chat(TAG_SOUP_STEP, params))
        full_mask = functools.partial(llamacpp_batch.build_sampler, full_mask=True)
        monkeypatch.setattr(llamacpp_batch, "build_sampler", full_mask)
        masked = asyncio.run(batched.chat(TAG_SOUP_STEP, params))
    finally:
        asyncio.run(batched.aclose())
    assert checked.text == masked.text
    assert parse_step_reply(checked.text).well_formed


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
