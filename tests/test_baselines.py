"""The full-context and BM25 RAG baselines against a scripted backend (ALGORITHMS.md section 4)."""

import random
import re

import pytest

from longread.agents.baselines import (
    RAG,
    UNBOUNDED_DOCUMENT_TOKENS,
    FullContext,
    FullContextConfig,
    RAGConfig,
    middle_truncate,
)
from longread.agents.budget import fixed_cost
from longread.errors import UsageError
from longread.text.chunking import Chunk, chunk_text
from longread.text.tokenizers import HFTokenizer
from longread.trace import NO_BOXED_ANSWER

from .scripted import ScriptedBackend, WordTokenizer
from .text_helpers import PenaltyTokenizer, paragraph, train_bpe

MARKER = re.compile(r"\n\n\[\.\.\. (\d+) tokens omitted \.\.\.\]\n\n")
FIRST = "The story begins on a cold morning."
LAST = "The story ends with a quiet goodbye."
NEEDLE = "The password for the vault is ALBATROSS."


def story(n_sentences: int) -> str:
    """FIRST, numbered middle sentences, LAST: about 7 WordTokenizer tokens per sentence."""
    middle = " ".join(f"Sentence number {i} is in the middle." for i in range(n_sentences))
    return f"{FIRST} {middle} {LAST}"


def prompt_of(backend: ScriptedBackend, call: int = 0) -> str:
    return backend.requests[call][0][0]["content"]


def prompt_plus_answer(backend: ScriptedBackend, call: int = 0) -> int:
    messages, params = backend.requests[call]
    return sum(backend.tokenizer.count(m["content"]) for m in messages) + params.max_tokens


def full(backend: ScriptedBackend, tokenizer=None, **config) -> FullContext:
    return FullContext(backend, tokenizer or WordTokenizer(), FullContextConfig(**config))


def rag(backend: ScriptedBackend, **config) -> RAG:
    return RAG(backend, WordTokenizer(), RAGConfig(**config))


def document_template(tmp_path) -> str:
    """A prompt folder whose full_answer.txt brackets the document, to read it back exactly."""
    (tmp_path / "full_answer.txt").write_text("$question\n<doc>$document</doc>")
    return str(tmp_path)


def sent_document(prompt: str) -> str:
    return prompt.split("<doc>", 1)[1].rsplit("</doc>", 1)[0]


# --- full context ---------------------------------------------------------------------------------


async def test_full_short_document_goes_in_whole():
    document = story(10)
    backend = ScriptedBackend(["It is \\boxed{cold}."], context_window=4096)
    run = await full(backend).run("How does it begin?", document)
    assert run.calls == 1 and run.agent == "full"
    assert document in prompt_of(backend)
    assert run.steps[0].cut.cut_tokens == 0 and not run.notes
    assert run.answer == "cold" and run.boxed


async def test_full_long_document_keeps_head_and_tail_within_the_window(tmp_path):
    document = story(400)  # about 2800 tokens
    tok = WordTokenizer()
    backend = ScriptedBackend(["\\boxed{x}"], context_window=1024)
    agent = full(backend, final_tokens=100, prompt_dir=document_template(tmp_path))
    run = await agent.run("How does it end?", document)

    prompt = prompt_of(backend)
    assert FIRST in prompt and LAST in prompt
    assert "Sentence number 200 " not in prompt
    head, omitted, tail = MARKER.split(sent_document(prompt))
    assert document.startswith(head) and document.endswith(tail)
    assert document[len(head)].isspace() and document[-len(tail) - 1].isspace()
    # Head and tail share the budget evenly, and the budget is used, not squandered.
    assert abs(tok.count(head) - tok.count(tail)) <= 2
    assert prompt_plus_answer(backend) <= 1024 - fixed_cost(1024)
    assert prompt_plus_answer(backend) >= 1024 - fixed_cost(1024) - 10
    cut = tok.count(document) - tok.count(head) - tok.count(tail)
    assert run.steps[0].cut.cut_tokens == cut == int(omitted)
    assert any(
        f"{cut} of {tok.count(document)} tokens cut to fit the 1024-token window" in note
        for note in run.notes
    )


async def test_full_cuts_on_token_boundaries_with_a_decoding_tokenizer(tmp_path):
    tok = HFTokenizer.from_path(train_bpe(tmp_path))
    document = story(300)
    backend = ScriptedBackend(["\\boxed{x}"], context_window=1500)
    backend.tokenizer = tok  # the "server" counts with the model's tokenizer
    agent = full(backend, tok, final_tokens=100, prompt_dir=document_template(tmp_path))
    run = await agent.run("How does it end?", document)

    head, omitted, tail = MARKER.split(sent_document(prompt_of(backend)))
    assert document.startswith(head) and document.endswith(tail)
    # Cuts fall between words: token boundaries, moved back to the nearest space.
    assert document[len(head)].isspace() and document[-len(tail) - 1].isspace()
    assert prompt_plus_answer(backend) <= 1500 - fixed_cost(1500)
    assert prompt_plus_answer(backend) >= 1500 - fixed_cost(1500) - 20
    cut = tok.count(document) - tok.count(head) - tok.count(tail)
    assert run.steps[0].cut.cut_tokens == cut == int(omitted) > 0


async def test_full_without_a_window_never_truncates():
    document = story(2000)
    backend = ScriptedBackend(["\\boxed{x}"], context_window=None)
    agent = full(backend)
    run = await agent.run("q", document)
    assert document in prompt_of(backend)
    assert run.steps[0].cut.cut_tokens == 0 and not run.notes
    assert agent.plan("q").chunk_tokens == UNBOUNDED_DOCUMENT_TOKENS


async def test_full_chunks_input_equals_string_input():
    document = story(400)
    tok = WordTokenizer()
    prompts = []
    for given in (document, chunk_text(document, tok, 300), chunk_text(document, tok, 5000)):
        backend = ScriptedBackend(["\\boxed{x}"], context_window=1024)
        run = await full(backend, final_tokens=100).run("q", given)
        prompts.append((prompt_of(backend), run.steps[0].cut.cut_tokens, run.notes))
    assert prompts[0] == prompts[1] == prompts[2]


def test_full_plan_is_the_document_budget():
    plan = full(ScriptedBackend([], context_window=2048), final_tokens=100).plan("q")
    assert not plan.shrunk and plan.window == 2048
    assert 2048 - fixed_cost(2048) - 100 - 50 < plan.chunk_tokens < 2048 - fixed_cost(2048) - 100


@pytest.mark.parametrize("max_tokens", [50, 333, 1000])
def test_middle_truncate_fits_when_pieces_count_differently_joined(max_tokens):
    # One token per character, plus one wherever a sentence end meets the next sentence.
    tok = PenaltyTokenizer()
    text = story(100)
    cut = middle_truncate(text, tok, max_tokens)
    assert tok.count(cut.text) <= max_tokens
    assert tok.count(cut.text) >= max_tokens * 0.8
    head, omitted, tail = MARKER.split(cut.text)
    assert text.startswith(head) and text.endswith(tail)
    assert cut.cut_tokens == int(omitted) == tok.count(text) - tok.count(head) - tok.count(tail)


def test_middle_truncate_leaves_a_fitting_text_alone():
    cut = middle_truncate("short text", WordTokenizer(), 10)
    assert cut.text == "short text" and cut.cut_tokens == 0 and cut.total_tokens == 2


# --- RAG ------------------------------------------------------------------------------------------


def haystack(n: int, needles: dict[int, str], seed: int = 0) -> str:
    """``n`` filler paragraphs of 20 to 30 words; paragraph i is replaced by ``needles[i]``."""
    rng = random.Random(seed)
    paragraphs = [needles.get(i, paragraph(rng, 2)) for i in range(n)]
    return "\n\n".join(paragraphs) + "\n"


def chunk_holding(text: str, document: str, size: int) -> Chunk:
    return next(c for c in chunk_text(document, WordTokenizer(), size) if text in c.text)


async def test_rag_retrieves_the_chunk_with_the_answer():
    document = haystack(40, {23: NEEDLE})
    backend = ScriptedBackend(["It is \\boxed{ALBATROSS}."])
    run = await rag(backend, rag_chunk_tokens=60).run(
        "What is the password for the vault?", document
    )
    needle = chunk_holding(NEEDLE, document, 60)
    conversation = run.steps[0]
    assert run.calls == 1 and run.agent == "rag"
    assert conversation.retrieval.chunks is not None and len(conversation.retrieval.chunks) == 4
    assert conversation.retrieval.chunks[0] == needle.index  # best first
    assert needle.text.strip() in prompt_of(backend)
    assert run.answer == "ALBATROSS" and run.boxed


async def test_rag_presents_chunks_in_document_order():
    document = haystack(30, {5: "The vault is old.", 20: NEEDLE + " The vault password again."})
    backend = ScriptedBackend(["\\boxed{x}"])
    run = await rag(backend, rag_chunk_tokens=60, rag_k=2).run("vault password?", document)
    late = chunk_holding(NEEDLE, document, 60)
    early = chunk_holding("The vault is old.", document, 60)
    assert run.steps[0].retrieval.chunks == [late.index, early.index]
    prompt = prompt_of(backend)
    assert prompt.index(early.text.strip()) < prompt.index(late.text.strip())
    numbers = [int(n) for n in re.findall(r"\[Passage (\d+)\]", prompt)]
    assert numbers == sorted(numbers) == [early.index + 1, late.index + 1]


async def test_rag_k_larger_than_the_number_of_chunks():
    document = haystack(2, {1: NEEDLE})
    backend = ScriptedBackend(["\\boxed{x}"])
    run = await rag(backend, rag_k=10).run("What is the password for the vault?", document)
    assert sorted(run.steps[0].retrieval.chunks) == [0]  # one 512-token chunk
    assert document.strip() in prompt_of(backend)
    assert any("fewer than rag_k=10" in note for note in run.notes)


@pytest.mark.parametrize(
    ("question", "why"),
    [("What is it about?", "no searchable term"), ("Who is Zanzibar?", "no term of the question")],
)
async def test_rag_without_matching_terms_falls_back_to_the_first_chunks(question, why):
    document = haystack(30, {})
    backend = ScriptedBackend(["\\boxed{x}"])
    run = await rag(backend, rag_chunk_tokens=60, rag_k=3).run(question, document)
    assert run.steps[0].retrieval.chunks == [0, 1, 2]
    assert any(why in note and "first 3 chunk(s)" in note for note in run.notes)


async def test_rag_uses_fewer_chunks_when_k_do_not_fit_the_window():
    document = haystack(30, {12: NEEDLE}, seed=3)
    chunk_size = 150
    backend = ScriptedBackend(["\\boxed{x}"], context_window=600)
    agent = rag(backend, rag_chunk_tokens=chunk_size, rag_k=4, final_tokens=50)
    assert agent.plan("q").chunk_tokens == chunk_size  # one chunk fits; four do not
    run = await agent.run("What is the password for the vault?", document)
    retrieved = run.steps[0].retrieval.chunks
    assert 1 <= len(retrieved) < 4
    assert retrieved[0] == chunk_holding(NEEDLE, document, chunk_size).index
    assert prompt_plus_answer(backend) <= 600 - fixed_cost(600)
    assert any(f"only {len(retrieved)} of the top 4 chunks fit" in note for note in run.notes)


async def test_rag_recuts_precut_chunks_at_its_own_size():
    document = haystack(40, {23: NEEDLE})
    prompts = []
    for given in (document, chunk_text(document, WordTokenizer(), 1000)):
        backend = ScriptedBackend(["\\boxed{x}"])
        run = await rag(backend, rag_chunk_tokens=60).run("password of the vault?", given)
        prompts.append((prompt_of(backend), run.steps[0].retrieval.chunks))
    assert prompts[0] == prompts[1]


# --- both -----------------------------------------------------------------------------------------


@pytest.fixture(params=["full", "rag"])
def make_agent(request):
    def make(backend: ScriptedBackend, **config):
        return (full if request.param == "full" else rag)(backend, **config)

    return make


async def test_one_call_and_sampling_settings(make_agent):
    seen = []
    backend = ScriptedBackend(["\\boxed{42}"], context_window=4096)
    agent = make_agent(backend, final_tokens=77, seed=5, temperature=0.7)
    agent.progress = lambda c, total: seen.append((c.kind, total))
    run = await agent.run("What is the number?", haystack(20, {7: "The number is 42."}))
    assert run.calls == len(backend.requests) == 1 and seen == [("final", 1)]
    params = backend.requests[0][1]
    assert (params.max_tokens, params.seed, params.temperature) == (77, 5, 0.7)
    assert run.answer == "42" and run.config["final_tokens"] == 77


async def test_answer_without_box_is_the_whole_reply_and_flagged(make_agent):
    backend = ScriptedBackend(["<think>hmm</think>Paris, I think"])
    run = await make_agent(backend).run("q", "Paris is in France.")
    assert run.answer == "Paris, I think" and not run.boxed
    assert NO_BOXED_ANSWER in run.steps[0].flags


@pytest.mark.parametrize("document", ["  \n", []])
async def test_empty_document_is_a_usage_error(make_agent, document):
    with pytest.raises(UsageError, match="empty"):
        await make_agent(ScriptedBackend([])).run("q", document)


async def test_empty_question_is_a_usage_error(make_agent):
    with pytest.raises(UsageError, match="question"):
        await make_agent(ScriptedBackend([])).run("  ", "text")


@pytest.mark.parametrize(
    "bad", [{"final_tokens": 0}, {"temperature": 3.0}, {"top_p": 0.0}, {"top_p": 1.5}]
)
@pytest.mark.parametrize("config", [FullContextConfig, RAGConfig])
def test_bad_config_values_are_usage_errors(config, bad):
    with pytest.raises(UsageError):
        config(**bad)


@pytest.mark.parametrize("bad", [{"rag_chunk_tokens": 0}, {"rag_k": 0}])
def test_bad_rag_values_are_usage_errors(bad):
    with pytest.raises(UsageError):
        RAGConfig(**bad)
