"""Real run folders and traces for the viewer's tests, made by the eval runner and the agents
themselves (a test-double backend stands in for the model), and a reader of HTML tables."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from html.parser import HTMLParser
from pathlib import Path

from longread.agents.base import Agent, ProgressCallback
from longread.agents.registry import make_agent, make_config
from longread.data.loaders import save_samples
from longread.data.records import Sample
from longread.errors import BackendError
from longread.eval.runner import run_eval
from longread.eval.store import RunStore, run_config
from longread.llm.base import Completion, Message, SamplingParams
from longread.llm.factory import BackendSettings

from .scripted import WordTokenizer

# Text that runs script if a page ever writes it unescaped: it sets window.__pwned.
PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
_FACT = re.compile(r"Fact \d+ is .+?\.(?=\s|$)")
_NO_MEMORY = "No previous memory"
# WordTokenizer tokens (words and punctuation marks): one paragraph of document() per chunk.
CHUNK_TOKENS = 40


def document(*facts: str, filler: int = 6) -> str:
    """Paragraphs holding ``Fact <i> is <fact>.`` between filler sentences."""
    paragraphs = []
    for i, fact in enumerate(facts, 1):
        paragraphs.append(" ".join(["The river ran slowly."] * filler + [f"Fact {i} is {fact}."]))
    return "\n\n".join(paragraphs)


class NotesBackend:
    """Answers memagent's prompts (the bundled ``paper`` set) like a tidy model: an update
    keeps the two latest facts it has seen (so older ones drop out of the memory), a final
    call gives the scripted reply for its question. Questions in ``failing`` raise a
    BackendError; in ``capped`` every update stops at the token cap."""

    name = "notes"
    context_window = None

    def __init__(
        self,
        finals: dict[str, str],
        *,
        failing: Sequence[str] = (),
        capped: Sequence[str] = (),
        with_tokens: bool = False,
    ) -> None:
        self.finals, self.failing, self.capped = finals, set(failing), set(capped)
        self.with_tokens = with_tokens
        self.tokenizer = WordTokenizer()

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        prompt = messages[-1]["content"]
        question = prompt.split("Problem: ", 1)[1].split("\n", 1)[0]
        if question in self.failing:
            raise BackendError("server answered 500")
        finish = "stop"
        if "\n\nSection:\n" in prompt:
            memory = prompt.split("\nMemory:\n", 1)[1].split("\n\nSection:\n", 1)[0]
            section = prompt.split("\n\nSection:\n", 1)[1].rsplit("\n\n", 1)[0]
            facts = [] if memory == _NO_MEMORY else memory.split("\n")
            reply = "\n".join([*facts, *_FACT.findall(section)][-2:])
            finish = "length" if question in self.capped else "stop"
        else:
            reply = self.finals[question]
        count = self.tokenizer.count
        completion = Completion(reply, finish, count(prompt), count(reply), 0.25)
        if params.record_tokens and self.with_tokens:
            completion.prompt_ids = self.tokenizer.encode(prompt)
            completion.token_ids = self.tokenizer.encode(reply)
            completion.logprobs = [-0.05 * (i % 4) for i in range(len(completion.token_ids))]
        return completion

    async def aclose(self) -> None:
        pass


def samples() -> list[Sample]:
    """Five samples of one small RULER-like set: right, wrong, script payload, failed, capped."""
    meta = {"dataset": "toy", "kind": "qa", "context_tokens": 64}
    return [
        Sample("right", "What is the colour of the door?", document("blue", "red", "green"),
               ["green"], {**meta}),
        Sample("wrong", "What is the name of the cat?", document("Tom", "Felix", "Kit", "Max"),
               ["Max"], {**meta, "context_tokens": 128}),
        Sample("payload", f"Which tag is this {PAYLOAD}?", document(PAYLOAD, "plain", filler=0),
               [PAYLOAD], {**meta}),
        Sample("failed", "What is the height of the tower?", document("tall"), ["tall"], {**meta}),
        Sample("capped", "What is the sound of the bell?", document("loud", "soft"),
               ["soft"], {**meta}),
    ]  # fmt: skip


def notes_backend(with_tokens: bool = False) -> NotesBackend:
    qs = {s.id: s.question for s in samples()}
    return NotesBackend(
        {
            qs["right"]: "The memory says \\boxed{green}",
            qs["wrong"]: "\\boxed{Felix}",
            qs["payload"]: f"\\boxed{{{PAYLOAD}}}",
            qs["capped"]: "no idea",
        },
        failing=[qs["failed"]],
        capped=[qs["capped"]],
        with_tokens=with_tokens,
    )


async def make_run_folder(
    root: Path, name: str = "run", *, record_tokens: bool = False, store: RunStore | None = None
) -> Path:
    """A memagent run folder made by ``run_eval`` over :func:`samples`, its data saved under
    ``root`` (so the run knows its gold answers). ``store``: record into an open one."""
    data = root / "data.jsonl"
    save_samples(samples(), data)
    backend = notes_backend(with_tokens=record_tokens)
    config = make_config("memagent", chunk_tokens=CHUNK_TOKENS, memory_tokens=64, final_tokens=32)

    def factory(progress: ProgressCallback) -> Agent:
        return make_agent(
            "memagent", backend, backend.tokenizer, config, progress, record_tokens=record_tokens
        )

    own = store is None
    store = store or RunStore(root / name, writer=True)
    try:
        store.save_config(
            run_config("memagent", {"chunk_tokens": CHUNK_TOKENS}, BackendSettings(), data,
                       samples(), record_tokens)
        )  # fmt: skip
        await run_eval(samples(), factory, store, 1, progress=False)
    finally:
        if own:
            store.close()
    return store.run_dir


class Tables(HTMLParser):
    """Every ``<table>`` of a page as rows of cell texts (header row first), with the
    ``href`` of each row's first link and the ``class`` of each table."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self._cell: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table":
            self.tables.append({"class": attributes.get("class") or "", "rows": [], "links": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
            self.tables[-1]["links"].append(None)
        elif tag in ("td", "th") and self.tables:
            self._cell = []
        elif tag == "a" and self.tables and self._cell is not None:
            links = self.tables[-1]["links"]
            links[-1] = links[-1] or attributes.get("href")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables:
            self.tables[-1]["rows"][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def named(self, css_class: str) -> dict:
        return next(t for t in self.tables if css_class in t["class"].split())


@contextlib.contextmanager
def served(path: Path) -> Iterator[str]:
    """``longread view PATH --no-browser`` running (a real uvicorn on 127.0.0.1): its URL."""
    command = [sys.executable, "-m", "longread", "view", str(path), "--no-browser"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        try:
            assert p.stdout is not None and p.stderr is not None
            line = p.stdout.readline()
            found = re.search(r"http://127\.0\.0\.1:\d+/", line)
            assert found, line + p.stderr.read()
            yield found[0]
        finally:
            p.terminate()


# What Debian's chromium needs here besides Playwright's own headless flags: no network.
CHROMIUM_FLAGS = ["--disable-background-networking", "--disable-component-update", "--no-first-run"]
