"""Citations by alignment: every agent's answer traced to the document spans that hold it."""

from __future__ import annotations

from longread.agents.baselines import RAG, FullContext, FullContextConfig, RAGConfig
from longread.agents.memagent import MemAgent, MemAgentConfig
from longread.agents.memreread import MemReread, MemRereadConfig
from longread.agents.rememr1 import ReMemR1, ReMemR1Config
from longread.citations import Citation, Provenance, locate, sources_line
from longread.citations.align import align, split_notes
from longread.text.chunking import chunk_text
from longread.text.positions import PositionMap
from longread.trace import Run

from .scripted import ScriptedBackend, WordTokenizer

FILLER = "The grass grew tall in the meadow. Birds sang over the quiet river. " * 12
NEEDLE = "One of the special magic numbers for lonely-flame is: 4331324."
QUESTION = "What is the special magic number for lonely-flame mentioned in the provided text?"
DOCUMENT = f"{FILLER}\n\n{FILLER}\n\n{NEEDLE} {FILLER}\n\n{FILLER}"


def cut(document: str = DOCUMENT, tokens: int = 80):
    return chunk_text(document, WordTokenizer(), tokens)


def chunk_holding(chunks, text: str) -> int:
    return next(c.index for c in chunks if text in c.text)


def copying_updates(chunks, note: str):
    """Update replies as a good memory writes them: nothing until the needle, then its note."""
    seen = chunk_holding(chunks, NEEDLE)
    return [note if c.index >= seen else "Nothing relevant yet." for c in chunks]


async def test_memagent_cites_the_needle_sentence_at_its_document_offsets():
    chunks = cut()
    backend = ScriptedBackend([*copying_updates(chunks, NEEDLE), "\\boxed{4331324}"])
    run = await MemAgent(backend, WordTokenizer(), MemAgentConfig()).run(QUESTION, chunks)

    assert run.supported is True
    [citation] = run.citations
    assert citation.quote == NEEDLE
    assert DOCUMENT[citation.char_start : citation.char_end] == NEEDLE
    assert citation.chunk == chunk_holding(chunks, NEEDLE)
    assert citation.line == NEEDLE


async def test_a_reworded_note_still_finds_its_needle():
    chunks = cut()
    note = "The magic number for lonely-flame is 4331324."
    backend = ScriptedBackend([*copying_updates(chunks, note), "\\boxed{4331324}"])
    run = await MemAgent(backend, WordTokenizer(), MemAgentConfig()).run(QUESTION, chunks)

    assert [c.quote for c in run.citations] == [NEEDLE]
    needle_step = run.steps[chunk_holding(chunks, NEEDLE)]
    [source] = needle_step.sources
    assert source.line == note and source.quote == NEEDLE and not source.inherited


async def test_an_answer_the_document_does_not_hold_is_unsupported():
    chunks = cut()
    made_up = "The magic number for lonely-flame is 7777777."
    backend = ScriptedBackend([made_up] * len(chunks) + ["\\boxed{7777777}"])
    run = await MemAgent(backend, WordTokenizer(), MemAgentConfig()).run(QUESTION, chunks)

    assert run.supported is False and run.citations == []
    assert sources_line(run.citations, run.supported).endswith("(unsupported answer)")
    assert run.summary()["supported"] is False


async def test_a_garbled_note_is_cited_only_where_the_answer_is_written():
    # The note aligns with the needle but names another number: the citation must hold the
    # answer the model gave, else the answer is unsupported.
    chunks = cut()
    garbled = "One of the special magic numbers for lonely-flame is: 4331325."
    backend = ScriptedBackend([*copying_updates(chunks, garbled), "\\boxed{4331325}"])
    run = await MemAgent(backend, WordTokenizer(), MemAgentConfig()).run(QUESTION, chunks)

    assert run.supported is False and run.citations == []


async def test_notes_carried_over_keep_the_span_of_the_update_that_read_them():
    chunks = cut()
    backend = ScriptedBackend([*copying_updates(chunks, NEEDLE), "\\boxed{4331324}"])
    run = await MemAgent(backend, WordTokenizer(), MemAgentConfig()).run(QUESTION, chunks)

    seen = chunk_holding(chunks, NEEDLE)
    # Only the update that added the note records a source; later ones carried it unchanged.
    added = [bool(step.sources) for step in run.steps[:-1]]
    assert added == [i == seen for i in range(len(chunks))]
    assert run.citations[0].chunk == seen


async def test_several_questions_read_together_each_get_their_citations():
    chunks = cut()
    seen = chunk_holding(chunks, NEEDLE)
    replies = []
    for chunk in chunks:  # chunk-major: question 1 then question 2 for each chunk
        replies += [NEEDLE if chunk.index >= seen else "Nothing yet.", "Nothing about birds."]
    replies += ["\\boxed{4331324}", "\\boxed{no idea}"]
    agent = MemAgent(ScriptedBackend(replies), WordTokenizer(), MemAgentConfig())
    first, second = await agent.run_many([QUESTION, "What colour are the birds?"], chunks)

    assert [c.quote for c in first.citations] == [NEEDLE] and first.supported
    assert second.citations == [] and second.supported is False


async def test_rag_cites_the_retrieved_chunk_that_holds_the_answer():
    backend = ScriptedBackend(["\\boxed{4331324}"])
    agent = RAG(backend, WordTokenizer(), RAGConfig(rag_chunk_tokens=60, rag_k=2))
    run = await agent.run(QUESTION, DOCUMENT)

    [citation] = run.citations
    assert citation.quote == NEEDLE
    assert DOCUMENT[citation.char_start : citation.char_end] == NEEDLE
    assert citation.chunk in run.steps[0].retrieval.chunks


async def test_full_cites_the_span_of_the_document_that_holds_the_answer():
    backend = ScriptedBackend(["\\boxed{4331324}"])
    run = await FullContext(backend, WordTokenizer(), FullContextConfig()).run(QUESTION, DOCUMENT)

    [citation] = run.citations
    assert DOCUMENT[citation.char_start : citation.char_end] == NEEDLE


async def test_full_does_not_cite_text_cut_from_the_prompt():
    # A window too small for the whole document: the needle's middle part is cut out, so an
    # answer that names it cannot have been read there.
    document = f"{FILLER * 3}\n\n{NEEDLE}\n\n{FILLER * 3}"
    backend = ScriptedBackend(["\\boxed{4331324}"], context_window=700)
    run = await FullContext(backend, WordTokenizer(), FullContextConfig(final_tokens=32)).run(
        QUESTION, document
    )

    assert run.steps[0].cut.cut_tokens > 0
    assert NEEDLE not in run.steps[0].messages[0]["content"]
    assert run.citations == [] and run.supported is False


async def test_yes_no_answers_cite_the_notes_about_the_question():
    text = (
        f"{FILLER}\n\nArthur Blake was an American painter born in Ohio.\n\n{FILLER}\n\n"
        f"Celia Moss was an American sculptor from Maine.\n\n{FILLER}"
    )
    chunks = cut(text, 60)
    blake, moss = chunk_holding(chunks, "Arthur Blake"), chunk_holding(chunks, "Celia Moss")
    notes = {
        blake: "Arthur Blake was an American painter born in Ohio.",
        moss: "Arthur Blake was an American painter born in Ohio.\n"
        "Celia Moss was an American sculptor from Maine.",
    }
    memory, replies = "Nothing yet.", []
    for chunk in chunks:
        memory = notes.get(chunk.index, memory)
        replies.append(memory)
    backend = ScriptedBackend([*replies, "\\boxed{yes}"])
    run = await MemAgent(backend, WordTokenizer(), MemAgentConfig()).run(
        "Were Arthur Blake and Celia Moss both American?", chunks
    )

    assert run.supported is True
    assert sorted(c.chunk for c in run.citations) == [blake, moss]
    assert all(text[c.char_start : c.char_end] == c.quote for c in run.citations)


async def test_rememr1_cites_its_update_notes():
    chunks = cut()
    seen = chunk_holding(chunks, NEEDLE)
    replies = [f"<update>{NEEDLE if c.index >= seen else 'Nothing yet.'}</update>" for c in chunks]
    backend = ScriptedBackend([*replies, "\\boxed{4331324}"])
    run = await ReMemR1(backend, WordTokenizer(), ReMemR1Config()).run(QUESTION, chunks)

    assert [c.quote for c in run.citations] == [NEEDLE]


async def test_memreread_integrated_notes_inherit_the_reread_span():
    chunks = cut()
    seen = chunk_holding(chunks, NEEDLE)
    root = ["Nothing about the number yet."] * len(chunks)
    reread = copying_updates(chunks, NEEDLE)
    replies = [
        *root,
        "<subquestion>Which number belongs to lonely-flame?</subquestion>",
        *reread,
        "\\boxed{4331324}",  # the sub-answer
        f"Found on rereading: {NEEDLE}",  # integrate: the note rewritten into the root memory
        "<stop/>",
        "\\boxed{4331324}",
    ]
    config = MemRereadConfig(max_reread=2)
    run = await MemReread(ScriptedBackend(replies), WordTokenizer(), config).run(QUESTION, chunks)

    [citation] = run.citations
    assert citation.quote == NEEDLE and citation.chunk == seen
    integrate = next(step for step in run.steps if step.kind == "integrate")
    assert integrate.sources and integrate.sources[0].inherited


def test_citations_are_located_on_their_page_and_section():
    positions = PositionMap()
    positions.add(0, page=1, section="Intro")
    positions.add(100, page=2, section="Vaults")
    cited = locate([Citation("q", 120, 130, 0), Citation("r", 5, 9, 0)], positions)

    assert [(c.page, c.section) for c in cited] == [(2, "Vaults"), (1, "Intro")]
    assert sources_line(cited, True) == "Sources: p. 2, p. 1"
    assert sources_line([Citation("q", 3, 9, 0, section="Ch. 2")], True) == "Sources: \u00a7 Ch. 2"
    assert sources_line([Citation("q", 3, 9, 0)], True) == "Sources: chars 3-9"


def test_a_run_keeps_its_citations_through_json():
    run = Run("memagent", "q", "a", "\\boxed{a}", True, [], 1.0)
    run.citations, run.supported = [Citation("quote", 1, 6, 0, page=3, line="n")], True
    again = Run.from_dict(run.to_dict())

    assert again.citations == run.citations and again.supported is True


def test_notes_are_lines_and_sentences_without_list_markers():
    memory = "- The vault code is 58213. It opens the Lisbon door.\n* ok\n2. Ann wrote the memo."
    assert split_notes(memory) == [
        "The vault code is 58213.",
        "It opens the Lisbon door.",
        "Ann wrote the memo.",
    ]


async def test_a_note_padded_with_the_questions_phrasing_still_finds_its_needle():
    # The shipped adapter copies a needle with the question's words inside it: as it stands
    # the note is too far from the sentence to align, without the words the section lacks it
    # is the sentence again.
    chunks = cut()
    note = "One of the special magic numbers for lonely-flame mentioned in the provided text is "
    note += "4331324."
    assert align(note, chunks[chunk_holding(chunks, NEEDLE)].text) is None
    backend = ScriptedBackend([*copying_updates(chunks, note), "\\boxed{4331324}"])
    run = await MemAgent(backend, WordTokenizer(), MemAgentConfig()).run(QUESTION, chunks)

    assert [c.quote for c in run.citations] == [NEEDLE] and run.supported is True
    [source] = run.steps[chunk_holding(chunks, NEEDLE)].sources
    assert source.line == note and source.quote == NEEDLE


def test_the_question_restated_is_not_taken_for_a_padded_copy():
    from longread.citations.align import without_echo

    made_up = "The special magic number for lonely-flame mentioned in the provided text is 7."
    assert without_echo(made_up, QUESTION, FILLER) == made_up


def test_a_made_up_note_aligns_with_nothing():
    assert align("Penguins invented the telescope in 1803.", FILLER) is None


def test_provenance_forgets_the_oldest_notes_past_its_limit():
    chunks = cut()
    provenance = Provenance(limit=2)
    for number in range(3):
        sentence = f"Birds sang over the quiet river number {number}."
        chunk = chunks[0].__class__(0, f"{FILLER} {sentence}", 10, 0)
        provenance.on_update("", sentence, chunk)
    assert len(provenance._spans) == 2


async def test_a_long_unboxed_answer_is_cited_sentence_by_sentence():
    # The base model often answers with a copied sentence and no box: rag and full cite the
    # sentences it copied (here numbered, as the model writes lists).
    reply = f"1. {NEEDLE}\n2. {NEEDLE}"
    backend = ScriptedBackend([reply])
    agent = RAG(backend, WordTokenizer(), RAGConfig(rag_chunk_tokens=60, rag_k=2))
    run = await agent.run(QUESTION, DOCUMENT)

    assert run.supported is True
    assert [c.quote for c in run.citations] == [NEEDLE]


async def test_a_memory_agents_unboxed_answer_is_traced_through_its_notes():
    chunks = cut()
    backend = ScriptedBackend([*copying_updates(chunks, NEEDLE), f"I found it. {NEEDLE}"])
    run = await MemAgent(backend, WordTokenizer(), MemAgentConfig()).run(QUESTION, chunks)

    assert not run.boxed and run.supported is True
    assert [c.quote for c in run.citations] == [NEEDLE]


async def test_an_answer_that_restates_the_question_is_found_by_what_it_adds():
    # rag on the bundled model answers in a sentence of its own: only the number is the
    # document's, and the needle sentence holding it is the citation.
    reply = "The special magic number for lonely-flame mentioned in the provided text is 4331324."
    agent = RAG(ScriptedBackend([reply]), WordTokenizer(), RAGConfig(rag_chunk_tokens=60, rag_k=2))
    run = await agent.run(QUESTION, DOCUMENT)

    assert [c.quote for c in run.citations] == [NEEDLE] and run.supported is True


def test_a_note_read_in_this_chunk_is_not_taken_for_a_similar_earlier_one():
    # Headings differ by a number only: "part 7", read now, must not inherit "part 1"'s span.
    first = chunk_text("Regional notes, part 1\n\nThe board met.", WordTokenizer(), 100)[0]
    later = first.__class__(1, "Regional notes, part 7\n\nThe drivers met.", 8, 200)
    provenance = Provenance()
    provenance.on_update("", "Regional notes, part 1", first)
    [source] = provenance.on_update("Regional notes, part 1", "Regional notes, part 7", later)

    assert (source.chunk, source.char_start, source.inherited) == (1, 200, False)
