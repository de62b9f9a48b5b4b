"""Traces streamed to disk while a run goes (``TraceWriter``), and chunks kept on disk
(``SpooledChunks``): a long document's run holds one step and one chunk in memory at a time."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence

import pytest

from longread.agents import make_agent
from longread.errors import BackendError
from longread.llm.base import Message
from longread.text.chunking import Chunk, SpooledChunks, achunk_file, chunk_text
from longread.trace import DISCARD, Run, TraceWriter

from .scripted import ScriptedBackend, WordTokenizer

# Replies for memagent, rememr1 and memreread over three chunks (one reread round).
REPLIES = {
    "memagent": ["memory A", "memory B", "memory C", "\\boxed{7}"],
    "rememr1": [
        "<update>seen A</update><recall>A</recall>",
        "<update>seen B</update>",
        "<update>seen C</update>",
        "\\boxed{7}",
    ],
    "memreread": [
        "memory A", "memory B", "memory C", "<subquestion>Where?</subquestion>",
        "sub A", "sub B", "sub C", "\\boxed{here}", "memory D", "<stop/>", "\\boxed{7}",
    ],
}  # fmt: skip


def chunks(*texts: str) -> list[Chunk]:
    tok = WordTokenizer()
    return [Chunk(i, t, tok.count(t)) for i, t in enumerate(texts)]


DOCUMENT = chunks("The first part.", "The second part.", "The third part.")


def comparable(data: dict) -> dict:
    """A trace's JSON without what differs between two runs of the same script."""
    data = {k: v for k, v in data.items() if k not in ("run_id", "started", "seconds")}
    data["steps"] = [
        {k: v for k, v in s.items() if k not in ("run_id", "started", "seconds")}
        for s in data["steps"]
    ]
    return data


@pytest.mark.parametrize("agent", list(REPLIES))
async def test_a_streamed_trace_is_the_trace_a_run_saves(tmp_path, agent):
    kept = await make_agent(agent, ScriptedBackend(REPLIES[agent]), WordTokenizer()).run(
        "Which number?", DOCUMENT, sample_id="s"
    )
    kept.save(tmp_path / "saved.json")
    writer = TraceWriter(tmp_path / "streamed.json")
    streamed = await make_agent(agent, ScriptedBackend(REPLIES[agent]), WordTokenizer()).run(
        "Which number?", DOCUMENT, sample_id="s", sink=writer
    )
    writer.finish(streamed)
    saved = json.loads((tmp_path / "saved.json").read_text())
    written = json.loads((tmp_path / "streamed.json").read_text())
    assert comparable(written) == comparable(saved)
    loaded = Run.load(tmp_path / "streamed.json")  # as the viewer and trace migrate read it
    assert [s.memory for s in loaded.steps] == [s.memory for s in kept.steps]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved.json", "streamed.json"]
    # What stays in memory: the bookkeeping of every step, the text of the final one only.
    assert (streamed.answer, streamed.calls, streamed.prompt_tokens) == (
        kept.answer,
        kept.calls,
        kept.prompt_tokens,
    )
    assert [s.flags for s in streamed.steps] == [s.flags for s in kept.steps]
    assert all(s.messages == [] and s.reply == "" for s in streamed.steps[:-1])
    assert streamed.steps[-1].reply == kept.steps[-1].reply
    with pytest.raises(ValueError, match="streamed"):
        streamed.save(tmp_path / "again.json")  # the steps' text is on disk, not here


async def test_steps_are_on_disk_before_the_run_ends(tmp_path):
    trace = tmp_path / "trace.json"
    on_disk: list[int] = []

    def final(messages: Sequence[Message]) -> str:
        # What a reader of the trace file sees while the answer is being written.
        text = trace.with_name("trace.json.tmp").read_text()
        on_disk.append(text.count('"kind": "update"'))
        return "\\boxed{7}"

    backend = ScriptedBackend(["memory A", "memory B", "memory C", final])
    writer = TraceWriter(trace)
    agent = make_agent("memagent", backend, WordTokenizer())
    run = await agent.run("Which number?", DOCUMENT, sink=writer)
    assert on_disk == [3]  # every update, complete with its memory, before the last call
    assert not trace.exists()  # under its name only once whole
    writer.finish(run)
    assert [s["memory"] for s in json.loads(trace.read_text())["steps"][:3]] == [
        "memory A",
        "memory B",
        "memory C",
    ]


async def test_a_failed_run_leaves_no_trace(tmp_path):
    def down(messages: Sequence[Message]) -> str:
        raise BackendError("the server went away")

    writer = TraceWriter(tmp_path / "trace.json")
    agent = make_agent("memagent", ScriptedBackend(["memory A", down]), WordTokenizer())
    with pytest.raises(BackendError):
        await agent.run("Which number?", DOCUMENT, sink=writer)
    writer.discard()
    assert list(tmp_path.iterdir()) == []


async def test_a_run_without_a_trace_still_sheds_its_prompts():
    agent = make_agent("memagent", ScriptedBackend(REPLIES["memagent"]), WordTokenizer())
    run = await agent.run("Which number?", DOCUMENT, sink=DISCARD)
    assert run.answer == "7" and run.calls == 4
    assert all(s.messages == [] for s in run.steps[:-1])


async def test_a_write_error_waits_for_finish_so_the_answer_is_kept(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    writer = TraceWriter(folder / "trace.json")
    (folder / "trace.json.tmp").unlink()
    folder.rmdir()  # the folder goes while the run is writing to it
    agent = make_agent("memagent", ScriptedBackend(REPLIES["memagent"]), WordTokenizer())
    run = await agent.run("Which number?", DOCUMENT, sink=writer)
    assert run.answer == "7"
    with pytest.raises(FileNotFoundError):
        writer.finish(run)


# -- chunks on disk -----------------------------------------------------------------------


async def test_spooled_chunks_read_back_exactly_and_one_at_a_time(tmp_path):
    text = "".join(f"Paragraph {i}: caf\u00e9, na\u00efve, \u65e5\u672c.\n\n" for i in range(300))
    path = tmp_path / "doc.txt"
    path.write_text(text, encoding="utf-8")
    tok = WordTokenizer()
    spooled = await achunk_file(path, tok, max_tokens=40)
    assert isinstance(spooled, SpooledChunks)
    assert list(spooled) == chunk_text(text, tok, max_tokens=40)  # lossless, same cuts
    assert spooled[-1] == spooled[len(spooled) - 1] and spooled[1:3] == [spooled[1], spooled[2]]
    assert list(spooled.token_counts()) == [c.tokens for c in spooled]
    with pytest.raises(IndexError):
        spooled[len(spooled)]
    spooled.close()


async def test_a_cancelled_chunking_returns_at_once_and_its_thread_stops(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("\n\n".join(f"Paragraph {i} of many." for i in range(500)))
    inside, release = threading.Event(), threading.Event()
    counted: list[str] = []

    class Stuck(WordTokenizer):
        """Blocks inside the first count until released: a tokenizer that hangs."""

        def count(self, text: str) -> int:
            counted.append(text)
            inside.set()
            release.wait()
            return super().count(text)

    task = asyncio.create_task(achunk_file(path, Stuck(), max_tokens=50))
    while not inside.is_set():
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # returns although the thread is stuck in the tokenizer
    release.set()
    (thread,) = [t for t in threading.enumerate() if t.name == "longread-chunking"]
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert len(counted) < 500  # it stopped at the next paragraph, not at the end


def test_spooled_chunks_must_arrive_in_order():
    spooled = SpooledChunks()
    spooled.append(Chunk(0, "a", 1))
    with pytest.raises(ValueError, match="appended as chunk 1"):
        spooled.append(Chunk(2, "c", 1))
    spooled.close()
