"""Requests and seconds to chunk a long document through a llama.cpp-style ``/tokenize``
endpoint (issue 25, item 12), against counting locally with the model's tokenizer.json.

    .venv/bin/python bench/server_tokenize.py [--tokens 2000000] [--delay-ms 20]
        [--chunk-tokens 5000] [--concurrency 16] [--old]

The server is a stub on 127.0.0.1 that speaks llama.cpp's dialect faithfully: ``content`` is a
text, or a list of texts and token ids of which each text is tokenised alone and each id kept
(llama.cpp's ``tokenize_mixed``). It tokenises with the bundled SmolLM2 vocabulary (read from
the GGUF file's metadata; the model is not loaded) and waits ``--delay-ms`` before each answer,
standing in for a round trip to a busy server. Rows:

- ``one text a request``: ``count_many`` sending each text alone, ``--concurrency`` at a time,
  and each chunk counted alone (what ``ask`` did before: 27,037 requests for a 2M-token
  document);
- ``texts between separator ids``: llama.cpp's mixed requests, ``BATCH_TEXTS`` paragraphs a
  request, each chunk still counted alone;
- ``+ chunks guessed ahead`` (the default now): each chunk counted with the next
  ``_GUESSED_CHUNKS`` chunks as the paragraphs' counts predict them, in one request;
- ``local tokenizer.json``: the same vocabulary counted in this process, no server at all
  (the exact path when the tokenizer file is at hand: ``--tokenizer PATH``);
- with ``--old``, first ``one request a paragraph``: no ``count_many``, one request after
  another (slow: minutes at 2M tokens).

Every row must cut the same chunks as the local tokenizer; the script checks that. Requests are
counted by the stub, split into those that carry one text and those that carry many.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from longread.data._haystack import WordStream
from longread.llm.gguf import bundled_gguf
from longread.text import Chunk, HFTokenizer, ServerTokenizer, Tokenizer, chunk_text, chunking
from longread.text.gguf_vocab import build_tokenizer, read_vocabulary


def essay(tokens: int, tokenizer: Tokenizer) -> str:
    """Blank-line paragraphs of 3-8 generated essay sentences, about ``tokens`` tokens."""
    stream, rng = WordStream.generated(7), random.Random(7)
    per_word = tokenizer.count(" ".join(stream.sentences(2000))) / 2000
    sentences = stream.sentences(int(tokens / per_word))
    paragraphs, at = [], 0
    while at < len(sentences):
        size = rng.randint(3, 8)
        paragraphs.append(" ".join(sentences[at : at + size]))
        at += size
    return "\n\n".join(paragraphs) + "\n"


class LlamaCppStub(ThreadingHTTPServer):
    """``POST /tokenize`` as llama.cpp's server answers it, after ``delay`` seconds."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, tokenizer: HFTokenizer, delay: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tokenizer, self.delay = tokenizer, delay
        self.single = self.batched = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def tokenize(self, content: Any) -> list[int]:
        if isinstance(content, str):
            with self.lock:
                self.single += 1
            return self.tokenizer.encode(content)
        with self.lock:
            self.batched += 1
        ids: list[int] = []
        for piece in content:  # each text alone, each id as it is
            ids += self.tokenizer.encode(piece) if isinstance(piece, str) else [piece]
        return ids


class _Handler(BaseHTTPRequestHandler):
    server: LlamaCppStub
    protocol_version = "HTTP/1.1"  # keep-alive, as llama.cpp's server
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(self.server.delay)
        tokens = self.server.tokenize(body["content"]) if "content" in body else []
        data = json.dumps({"tokens": tokens}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def stub(tokenizer: HFTokenizer, delay: float) -> Iterator[LlamaCppStub]:
    server = LlamaCppStub(tokenizer, delay)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class OneByOne:
    """``count`` alone, without ``count_many``: one request after another."""

    def __init__(self, tokenizer: ServerTokenizer) -> None:
        self.name, self.encode, self.count = tokenizer.name, tokenizer.encode, tokenizer.count


def row(name: str, seconds: float, chunks: list[Chunk], reference: list[Chunk], sent: str) -> None:
    same = "same chunks" if chunks == reference else "DIFFERENT CHUNKS"
    print(f"  {name:30s} {seconds:8.2f} s  {sent:44s} {len(chunks):,} chunks, {same}")


def through_server(
    server: LlamaCppStub, args: argparse.Namespace, text: str, reference: list[Chunk]
) -> None:
    guessed = chunking._GUESSED_CHUNKS
    rows: list[tuple[str, bool, int, bool]] = [  # name, batches, guessed chunks, one by one
        ("one text a request", False, 0, False),
        ("texts between separator ids", True, 0, False),
        ("+ chunks guessed ahead", True, guessed, False),
    ]
    if args.old:
        rows.insert(0, ("one request a paragraph", False, 0, True))
    for name, batches, guesses, one_by_one in rows:
        with ServerTokenizer(server.url, concurrency=args.concurrency) as tokenizer:
            tokenizer.count_many(["warm", "up"])  # probe, and learn whether it batches
            tokenizer._batches = batches and tokenizer._batches  # False: the path before
            chunking._GUESSED_CHUNKS = guesses  # 0: no guesses, as before
            counting: Any = OneByOne(tokenizer) if one_by_one else tokenizer
            server.single = server.batched = 0
            start = time.perf_counter()
            chunks = chunk_text(text, counting, args.chunk_tokens)
            seconds = time.perf_counter() - start
        chunking._GUESSED_CHUNKS = guessed
        total = server.single + server.batched
        sent = f"{total:>6,} requests ({server.batched:,} of many texts)"
        row(name, seconds, chunks, reference, sent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=2_000_000)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--chunk-tokens", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--old", action="store_true", help="also one request after another")
    args = parser.parse_args()

    built = build_tokenizer(read_vocabulary(bundled_gguf()))
    if built is None:
        raise SystemExit("the bundled vocabulary cannot be rebuilt as a tokenizer.json")
    local = HFTokenizer(built, "hf:smollm2")
    text = essay(args.tokens, local)
    paragraphs = text.count("\n\n") + 1
    start = time.perf_counter()
    reference = chunk_text(text, local, args.chunk_tokens)
    local_seconds = time.perf_counter() - start
    tokens = sum(c.tokens for c in reference)
    print(
        f"{tokens:,} tokens, {paragraphs:,} paragraphs, {args.chunk_tokens}-token chunks; "
        f"stub llama.cpp /tokenize, {args.delay_ms:g} ms a request, "
        f"{args.concurrency} in flight"
    )
    row("local tokenizer.json", local_seconds, reference, reference, "no requests")
    with stub(local, args.delay_ms / 1000) as server:
        through_server(server, args, text, reference)


if __name__ == "__main__":
    main()
