"""The viewer's pages over HTTP: a run folder, its traces, folders of traces, one trace."""

from __future__ import annotations

import asyncio
import html
import json
import re
import shutil
import sqlite3
from pathlib import Path
from urllib.parse import urljoin

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from longread.errors import UsageError
from longread.eval.report import load_runs, markdown_report
from longread.eval.scoring import score_answer
from longread.eval.store import RunStore, SampleResult
from longread.trace import Recall, Reread, Run, Step
from longread.view import create_app

from .view_helpers import PAYLOAD, Tables, make_run_folder, samples

REPO = Path(__file__).resolve().parent.parent
COMMITTED_TRACE = REPO / "results/runs/memagent-ruler_niah_single_2-2048/traces"


@pytest.fixture
async def run_dir(tmp_path):
    return await make_run_folder(tmp_path)


def get(path: Path, url: str = "/", status: int = 200) -> str:
    response = TestClient(create_app(path)).get(url)
    assert response.status_code == status, response.text
    return response.text


def step_cards(page: str) -> list[str]:
    """The HTML of each call of a trace page's timeline."""
    return page.split('<li class="step ')[1:]


def block(page: str, css_class: str) -> str:
    """The first ``<details class=css_class>`` ... ``</details>`` of ``page``."""
    start = page.index(f'<details class="{css_class}">')
    return page[start : page.index("</details>", start)]


def markdown_tables(markdown: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]


# The run folder page


def test_the_run_page_shows_the_numbers_of_eval_report(run_dir):
    page = Tables(get(run_dir))
    assert page.named("report")["rows"] == markdown_tables(markdown_report(load_runs([run_dir])))


def test_the_sample_table_lists_every_sample_and_links_its_trace(run_dir):
    page = Tables(get(run_dir))
    table = page.named("samples")
    header, rows = table["rows"][0], table["rows"][1:]
    assert header[:10] == [
        "sample", "length", "correct", "score", "chunks", "calls", "prompt tokens",
        "completion tokens", "seconds", "flags",
    ]  # fmt: skip
    by_id = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert list(by_id) == [s.id for s in samples()]
    links = dict(zip([row[0] for row in rows], table["links"][1:], strict=True))
    assert links == {
        "right": "traces/right.json",
        "wrong": "traces/wrong.json",
        "payload": "traces/payload.json",
        "failed": None,  # it failed before a trace was written
        "capped": "traces/capped.json",
    }
    assert [by_id[i]["correct"] for i in by_id] == ["✓", "✗", "✓", "failed", "✗"]
    assert [by_id[i]["chunks"] for i in by_id] == ["3", "4", "1", "-", "2"]
    with RunStore(run_dir) as store:
        costs = {r.sample_id: r.cost for r in store.results()}
    for sample_id, row in by_id.items():
        assert row["calls"] == str(costs[sample_id]["calls"])
        assert row["prompt tokens"] == f"{costs[sample_id]['prompt_tokens']:,}"
    assert "server answered 500" in by_id["failed"]["flags"]
    assert "memory truncated ×2" in by_id["capped"]["flags"]
    assert "no boxed answer" in by_id["capped"]["flags"]


def test_the_run_page_reads_a_run_that_is_being_written(tmp_path):
    run_dir = tmp_path / "run"
    store = RunStore(run_dir, writer=True)  # what `eval run` holds while it runs
    try:
        asyncio.run(make_run_folder(tmp_path, store=store))
        client = TestClient(create_app(run_dir))
        assert len(Tables(client.get("/").text).named("samples")["rows"]) == 1 + 5
        store.record(_late_result("late-1"))  # written after the app opened the folder
        rows = Tables(client.get("/").text).named("samples")["rows"]
        assert [r[0] for r in rows][-1] == "late-1"
        store.record(_late_result("late-2"))  # the viewer's reads left the writer free
    finally:
        store.close()
    db = sqlite3.connect(run_dir / "results.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("SELECT count(*) FROM results").fetchone() == (7,)
    db.close()


def test_viewing_a_finished_run_changes_no_file_in_it(run_dir):
    before = _files(run_dir)
    assert "results.sqlite-wal" not in before  # the run ended: no writer, no write-ahead log
    client = TestClient(create_app(run_dir))
    for url in ("/", "/traces/right.json", "/raw/right.json"):
        assert client.get(url).status_code == 200
    assert _files(run_dir) == before  # no -wal or -shm left behind, nothing rewritten


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
    }


def _late_result(sample_id: str) -> SampleResult:
    score = score_answer("\\boxed{x}", ["x"]).to_dict()
    cost = {"calls": 1, "prompt_tokens": 10, "completion_tokens": 2, "seconds": 0.1}
    return SampleResult(sample_id, "done", "qa", score, cost, dataset="toy", context_length=64)


# Trace pages


def test_a_trace_page_shows_question_gold_answer_and_every_call(run_dir):
    page = get(run_dir, "/traces/wrong.json")
    assert "What is the name of the cat?" in page
    assert re.search(r'<div class="gold">.*<li class="text">Max</li>', page, re.S)
    assert re.search(r'class="final wrong">.*✗.*<p class="text answer">Felix</p>', page, re.S)
    cards = step_cards(page)
    assert [re.search(r'<span class="kind">(\w+)</span>', c)[1] for c in cards] == [
        "update", "update", "update", "update", "final",
    ]  # fmt: skip
    for index, fact in enumerate(["Tom", "Felix", "Kit", "Max"]):
        chunk = block(cards[index], "chunk")
        assert f"Fact {index + 1} is {fact}." in chunk  # the chunk, not the whole prompt
        assert "Update the memory" not in chunk
        assert "Update the memory" in block(cards[index], "raw")  # the raw prompt, on demand
    assert 'href="../traces/right.json"' in page  # the previous sample of the run
    assert 'href="../traces/payload.json"' in page  # the next one


def test_the_memory_diff_marks_what_each_update_added_and_dropped(run_dir):
    cards = step_cards(get(run_dir, "/traces/wrong.json"))
    first = block(cards[0], "memory")
    assert "Memory (first)" in first
    assert "<ins>Fact 1 is Tom.</ins>" in first
    third = block(cards[2], "memory")  # the notes keep two facts: the oldest drops out
    assert "<del>Fact 1 is Tom.\n</del>" in third
    assert "<span>Fact 2 is Felix.\n</span>" in third
    assert "<ins>Fact 3 is Kit.</ins>" in third
    assert re.search(r'ins-count">\+4</span> <span class="del-count">−4', third)


def test_flags_are_shown_on_their_calls(run_dir):
    cards = step_cards(get(run_dir, "/traces/capped.json"))
    for card in cards[:2]:
        assert '<span class="flag flag-memory_truncated">memory truncated</span>' in card
        assert "hit the token cap" in card
    assert '<span class="flag flag-no_boxed_answer">no boxed answer</span>' in cards[2]


def test_the_gold_answer_says_why_it_is_missing_when_the_data_has_moved(run_dir, tmp_path):
    (tmp_path / "data.jsonl").unlink()
    page = get(run_dir, "/traces/right.json")
    assert "the run&#39;s data is not at" in page


def test_token_records_show_the_sampled_ids(tmp_path):
    run_dir = asyncio.run(make_run_folder(tmp_path, record_tokens=True))
    run = Run.load(run_dir / "traces/wrong.json")
    cards = step_cards(get(run_dir, "/traces/wrong.json"))
    for card, step in zip(cards, run.steps, strict=True):
        assert step.tokens is not None
        tokens = block(card, "tokens")
        n = len(step.tokens.completion_ids)
        assert f"Completion tokens: {n} sampled ids" in tokens
        shown = re.findall(r'<span class="tok [\w-]+" title="logprob [-\d.]+">(\d+)</span>', tokens)
        assert shown == [str(i) for i in step.tokens.completion_ids]


def test_runs_without_token_records_show_none(run_dir):
    assert '<details class="tokens">' not in get(run_dir, "/traces/wrong.json")


def _step(step: int, kind: str, **fields) -> Step:
    defaults = dict(seconds=0.5, messages=[{"role": "user", "content": "p"}], reply="r",
                    finish_reason="stop", prompt_tokens=10, completion_tokens=2)  # fmt: skip
    return Step(step=step, kind=kind, **{**defaults, **fields})


def _run(agent: str, steps: list[Step], **fields) -> Run:
    defaults = dict(agent=agent, question="Where?", answer="Turin", final_reply="\\boxed{Turin}",
                    boxed=True, seconds=1.0, run_id="abc", sample_id="s1")  # fmt: skip
    return Run(steps=steps, **{**defaults, **fields})


def test_recalls_are_marked_with_what_they_brought_back(tmp_path):
    run = _run("rememr1", [
        _step(0, "update", chunk_index=0, memory="Ada was a painter.",
              recall=Recall("birthplace", None, None)),
        _step(1, "update", chunk_index=1, memory="Ada was born in Turin.",
              recall=Recall("painter", "Ada was a painter.", 0)),
        _step(2, "final", answer="Turin"),
    ])  # fmt: skip
    run.save(tmp_path / "t.json")
    cards = step_cards(get(tmp_path / "t.json"))
    assert "recall: nothing found" in cards[0]
    assert "brought nothing back" in cards[0]
    assert '<span class="mark mark-recall">recall</span>' in cards[1]
    assert re.search(r"query <q>painter</q>.*memory of step 0.*Ada was a painter", cards[1], re.S)
    assert "recalled" in cards[1].split(">", 1)[0]  # the card itself is marked


def test_rereads_are_marked_and_each_reread_builds_its_own_memory(tmp_path):
    ask = Reread("Where was Ada born?")
    run = _run("memreread", [
        _step(0, "update", phase="root", chunk_index=0, memory="Ada was a painter."),
        _step(1, "decide", phase="decide-1", reread=ask),
        _step(2, "update", phase="reread-1", chunk_index=0, memory="Born in Turin.", reread=ask),
        _step(3, "integrate", phase="integrate-1", memory="Ada was a painter. Born in Turin.",
              reread=ask),
        _step(4, "decide", phase="decide-2"),
        _step(5, "final", phase="final", answer="Turin"),
    ])  # fmt: skip
    run.save(tmp_path / "t.json")
    cards = step_cards(get(tmp_path / "t.json"))
    assert '<span class="mark mark-reread">sub-question</span>' in cards[1]
    assert "<q>Where was Ada born?</q>" in cards[1]
    assert '<span class="mark mark-reread">reread</span>' in cards[2]
    assert "Memory (first)" in block(cards[2], "memory")  # a reread starts from nothing
    integrate = block(cards[3], "memory")  # ... and is folded into the first pass's memory
    assert "<span>Ada was a painter. </span><ins>Born in Turin.</ins>" in integrate
    assert "stop: the memory is enough" in cards[4]


def test_a_trace_from_before_schema_2_shows_the_chunks_of_its_older_prompts(tmp_path):
    shutil.copy(COMMITTED_TRACE / "niah_single_2-2048-0.json", tmp_path)
    page = get(tmp_path / "niah_single_2-2048-0.json")
    assert "What is the special magic number for lonely-flame" in page
    cards = step_cards(page)
    assert len(cards) == 4
    chunk = block(cards[0], "chunk")
    assert "One of the special magic numbers for lonely-flame is: 4331324." in chunk
    assert "Write the new notes" not in chunk
    assert "memory truncated" in cards[0]


# Escaping


def test_text_from_documents_and_models_is_escaped_everywhere(run_dir):
    escaped = html.escape(PAYLOAD, quote=True).replace("&#x27;", "&#39;").replace("&quot;", "&#34;")
    for url in ("/", "/traces/payload.json"):
        page = get(run_dir, url)
        assert "window.__pwned" in page
        assert PAYLOAD not in page
        assert "<script>" not in page and "<img" not in page
        assert page.count("<script") == 1  # the viewer's own script
    page = get(run_dir, "/traces/payload.json")
    assert re.search(r'class="question">.*' + re.escape(escaped), page, re.S)
    assert re.search(r'class="final right">.*' + re.escape(escaped), page, re.S)
    (card,) = step_cards(page)[:1]
    assert escaped in block(card, "chunk")
    assert escaped in block(card, "memory")


# Folders of traces, single traces


def test_a_folder_of_traces_is_listed_again_on_every_request(tmp_path, run_dir):
    folder = tmp_path / "served"
    folder.mkdir()
    client = TestClient(create_app(folder))  # an empty folder a server will write into
    assert "No trace in this folder yet." in client.get("/").text
    shutil.copy(run_dir / "traces/right.json", folder / "a.json")
    (folder / "notes.json").write_text('{"not": "a trace"}')
    page = client.get("/").text
    table = Tables(page).named("traces")
    assert [row[0] for row in table["rows"][1:]] == ["right"]
    assert table["links"][1:] == ["traces/a.json"]
    assert "1 JSON file(s) that are not traces" in page
    assert "What is the colour of the door?" in client.get("/traces/a.json").text
    assert client.get("/traces/notes.json").status_code == 422


def test_links_are_relative_so_the_app_works_under_a_prefix(run_dir):
    outer = Starlette(routes=[Mount("/view", app=create_app(run_dir))])
    client = TestClient(outer)
    seen = set()
    for page_url in ("http://testserver/view/", "http://testserver/view/traces/wrong.json"):
        response = client.get(page_url)
        assert response.status_code == 200
        for link in re.findall(r'(?:href|src)="([^"#][^"]*)"', response.text):
            target = urljoin(page_url, html.unescape(link))
            assert target.startswith("http://testserver/view/"), link
            seen.add(target)
            assert client.get(target).status_code == 200, target
    assert "http://testserver/view/static/view.css" in seen
    assert "http://testserver/view/raw/wrong.json" in seen
    assert str(client.get("/view").url) == "http://testserver/view/"  # the slash is added


def test_raw_gives_the_trace_as_saved(run_dir):
    text = get(run_dir, "/raw/right.json")
    assert json.loads(text) == json.loads((run_dir / "traces/right.json").read_text())


# Bad input


def test_unknown_and_outside_traces_are_not_found(run_dir):
    client = TestClient(create_app(run_dir))
    for url in ("/traces/nothere.json", "/traces/..%2Fconfig.json", "/raw/config.json",
                "/traces/.hidden.json", "/raw/..%2Fresults.sqlite"):  # fmt: skip
        assert client.get(url).status_code == 404, url


@pytest.mark.parametrize("name", ["missing", "notes.txt", "list.json"])
def test_a_path_that_is_no_trace_nor_folder_is_refused(tmp_path, name):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(UsageError, match=re.escape(str(tmp_path / name))):
        create_app(tmp_path / name)


def test_a_run_folder_whose_config_is_broken_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(UsageError, match=r"config\.json is not valid JSON"):
        create_app(tmp_path)


def test_a_trace_that_an_exit_gate_stopped_says_where_and_finds_its_chunks(tmp_path):
    """A real memagent run with --exit-gate on: the page says how much was read, marks the
    call after which reading stopped, and still finds each gated prompt's chunk exactly."""
    from longread.agents.memagent import MemAgent, MemAgentConfig
    from longread.text.chunking import Chunk

    from .scripted import ScriptedBackend, WordTokenizer

    sections = ["Ann wrote it.", "The code is 4412.", "Filler.", "More filler."]
    chunks = [Chunk(i, text, 3) for i, text in enumerate(sections)]
    backend = ScriptedBackend(["Ann wrote it.", "The code is 4412. <exit/>", "\\boxed{4412}"])
    agent = MemAgent(backend, WordTokenizer(), MemAgentConfig(exit_gate=True, update_gate=True))
    run = asyncio.run(agent.run("What is the code?", chunks))
    run.save(tmp_path / "t.json")
    page = get(tmp_path / "t.json")
    assert "2 of 4 chunks (the exit gate stopped reading)" in page
    cards = step_cards(page)
    assert "gate exit" in cards[1]
    stopped = page.index('<li class="stopped">The exit gate stopped reading here: 2 chunk(s)')
    assert page.index('id="step-1"') < stopped < page.index('id="step-2"')
    for card, section in zip(cards[:2], sections, strict=False):
        chunk = block(card, "chunk")
        assert section in chunk and "(from the prompt)" not in chunk
