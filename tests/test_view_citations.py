"""The viewer shows where answers come from: each chunk marks the spans its memory drew on,
and a trace lists its answer's citations, or says plainly that nothing backs the answer."""

from __future__ import annotations

import html
import re

import pytest

from longread.citations.model import Citation, SourceSpan
from longread.trace import Run
from longread.view.chunks import FoundChunk
from longread.view.highlight import Piece, highlight

from .test_view_app import _run, _step, block, get, step_cards
from .view_helpers import PAYLOAD, make_run_folder, samples

MARK = re.compile(r'<mark class="source" title="([^"]*)">(.*?)</mark>', re.S)


@pytest.fixture
async def run_dir(tmp_path):
    return await make_run_folder(tmp_path)


def _marks(card: str) -> list[tuple[str, str]]:
    """(title, text) of each mark in a card's chunk, unescaped."""
    chunk = block(card, "chunk")
    return [(html.unescape(t), html.unescape(x)) for t, x in MARK.findall(chunk)]


def test_each_chunk_marks_exactly_the_document_text_its_memory_drew_on(run_dir):
    document = next(s for s in samples() if s.id == "wrong").context
    run = Run.load(run_dir / "traces/wrong.json")
    cards = step_cards(get(run_dir, "/traces/wrong.json"))
    for index, fact in enumerate(["Tom", "Felix", "Kit", "Max"]):
        (span,) = [s for s in run.steps[index].sources or [] if not s.inherited]
        line = f"Fact {index + 1} is {fact}."
        assert document[span.char_start : span.char_end] == line
        assert _marks(cards[index]) == [(f"backs the memory line: {line}", line)]
        # Marks only wrap text: without them, the chunk reads as the document does.
        chunk = html.unescape(re.sub(r"</?mark[^>]*>", "", block(cards[index], "chunk")))
        assert chunk.split('<pre class="text">', 1)[1].split("</pre>")[0] in document
        assert "1 span(s) the memory drew on" in block(cards[index], "chunk")


def test_the_sources_list_each_citation_and_link_the_call_that_read_it(run_dir):
    page = get(run_dir, "/traces/right.json")
    run = Run.load(run_dir / "traces/right.json")
    (citation,) = run.citations
    assert citation.quote == "Fact 3 is green."
    start = page.index('<section class="citations">')
    sources = page[start : page.index("</section>", start)]
    assert '<q class="text quote">Fact 3 is green.</q>' in sources
    assert f"characters {citation.char_start}-{citation.char_end}" in sources  # no pages: text
    reader = next(s for s in run.steps if s.chunk_index == citation.chunk)
    assert f'<a class="chunk-link" href="#step-{reader.step}">chunk {citation.chunk}</a>' in sources
    card = next(c for c in step_cards(page) if f'id="step-{reader.step}"' in c)
    assert ("backs the memory line: Fact 3 is green.", "Fact 3 is green.") in _marks(card)
    assert "unsupported" not in page


def test_an_answer_nothing_in_the_document_backs_is_marked_unsupported(run_dir):
    run = Run.load(run_dir / "traces/wrong.json")
    assert run.supported is False and run.citations == []
    page = get(run_dir, "/traces/wrong.json")
    assert '<span class="flag flag-unsupported">unsupported</span>' in page
    assert "Unsupported: nothing in the document backs this answer." in page


def test_cited_text_from_the_document_stays_escaped_inside_its_mark(run_dir):
    page = get(run_dir, "/traces/payload.json")
    assert PAYLOAD not in page and "<img" not in page
    marks = _marks(step_cards(page)[0])
    assert (f"backs the memory line: Fact 1 is {PAYLOAD}.", f"Fact 1 is {PAYLOAD}.") in marks
    quotes = re.findall(r'<q class="text quote">(.*?)</q>', page, re.S)
    assert [html.unescape(q) for q in quotes] == [f"Fact 1 is {PAYLOAD}."]


def _span(line: str, start: int, end: int, in_chunk: int, chunk: int = 0, quote: str = ""):
    return SourceSpan(line, start, end, chunk, in_chunk, 100.0, quote=quote)


def test_a_chunk_found_by_heuristic_is_marked_where_the_quote_really_is(tmp_path):
    chunk = "Intro line.\nAda was born in Turin. She painted."
    # An older prompt wording: the viewer finds the chunk after "Section:", not by template.
    prompt = f"Old wording.\nMemory:\nNo previous memory\n\nSection:\n{chunk}\n\nWrite notes."
    step = _step(0, "update", chunk_index=0, messages=[{"role": "user", "content": prompt}],
                 memory="Born in Turin.", sources=[
                     # offsets shifted by a header the chunk had when it was read
                     _span("Born in Turin.", 100, 122, 4, quote="Ada was born in Turin."),
                     _span("Painted.", 123, 135, 999, quote="not in this chunk"),
                     _span("Older note.", 5, 10, 2, chunk=7, quote="line."),
                 ])  # fmt: skip
    cited = Citation("Ada was born in Turin.", 100, 122, chunk=0, page=3, section="Early life",
                     line="Born in Turin.")  # fmt: skip
    run = _run("memagent", [step, _step(1, "final", answer="Turin")], supported=True,
               citations=[cited])  # fmt: skip
    run.save(tmp_path / "t.json")
    page = get(tmp_path / "t.json")
    card = step_cards(page)[0]
    assert "(from the prompt)" in block(card, "chunk")
    assert _marks(card) == [("backs the memory line: Born in Turin.", "Ada was born in Turin.")]
    assert "p. 3 · Early life" in page
    assert '<a class="chunk-link" href="#step-0">chunk 0</a>' in page


def test_overlapping_spans_mark_their_overlap_once_naming_both_lines():
    text = "alpha beta gamma delta"
    spans = [_span("A", 0, 10, 0), _span("B", 6, 16, 6)]
    pieces = highlight(FoundChunk(text, exact=True), 0, spans)
    assert pieces == [
        Piece("alpha ", ("A",)),
        Piece("beta", ("A", "B")),
        Piece(" gamma", ("B",)),
        Piece(" delta"),
    ]
    assert "".join(p.text for p in pieces) == text
    assert pieces[1].title == "backs the memory line: A\nbacks the memory line: B"
