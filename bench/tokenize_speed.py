"""How fast a long document is chunked exactly (issue 11, item 9), for each way of counting
tokens: tokens/s, and the seconds a 3.5M-token document takes at that rate.

    .venv/bin/python bench/tokenize_speed.py [--tokens 3500000] [--server-tokens 50000]
        [--delay-ms 20] [--llama-server] [--chunk-tokens 5000] [--repeat 2]

Local paths, on a document of ``--tokens`` tokens (best of ``--repeat`` runs, after a warm-up):

- the embedded model's vocabulary through llama.cpp, one paragraph at a time (the old path);
- the same vocabulary rebuilt as an HF ``tokenizers`` tokenizer, paragraphs counted in parallel
  batches and chunks summed from their pieces (the path the embedded backend now takes).

Server paths, on a document of ``--server-tokens`` tokens (one run each: the old one is slow),
each first one request a paragraph, one after another (the old path), then ``count_many``:

- a stub server on 127.0.0.1 that tokenises with the same vocabulary and waits ``--delay-ms``
  before each answer, standing in for a server's round trip (the measured round trip is
  printed), in llama.cpp's dialect (texts between separator ids, 128 a request) and in
  SGLang's (lists of texts: 128 a request);
- with ``--llama-server``, llama-cpp-python's own server (``python -m llama_cpp.server``, as
  the integration tests start it) serving the bundled GGUF file: no added delay.

The document is generated essay text (RULER's essay haystack generator: blank-line paragraphs
of 3-8 sentences). Every path must cut the same chunks as the HF path; the script checks that.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from longread.data._haystack import WordStream
from longread.llm.gguf import bundled_gguf
from longread.text import HFTokenizer, LlamaCppTokenizer, ServerTokenizer, Tokenizer, chunk_text
from longread.text.gguf_vocab import fast_tokenizer

TARGET = 3_500_000  # the document size


def essay(tokens: int, tokenizer: Tokenizer) -> str:
    """Paragraphs of generated essay sentences, about ``tokens`` tokens in all."""
    stream, rng = WordStream.generated(7), random.Random(7)
    per_word = tokenizer.count(" ".join(stream.sentences(2000))) / 2000
    sentences = stream.sentences(int(tokens / per_word))  # sentences of that many words
    paragraphs, at = [], 0
    while at < len(sentences):
        size = rng.randint(3, 8)
        paragraphs.append(" ".join(sentences[at : at + size]))
        at += size
    return "\n\n".join(paragraphs) + "\n"


class OneByOne:
    """A tokenizer's ``count`` alone, without ``count_many``: how chunking counted before."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.name = tokenizer.name
        self.encode = tokenizer.encode
        self.count = tokenizer.count


class StubServer(ThreadingHTTPServer):
    """A tokenize endpoint that answers after ``delay`` seconds, in llama.cpp's dialect
    (``{"content": text}``) or SGLang's (``{"prompt": text or [texts]}``)."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, tokenizer: HFTokenizer, delay: float, dialect: str) -> None:
        super().__init__(("127.0.0.1", 0), _StubHandler)
        self.tokenizer, self.delay, self.dialect, self.requests = tokenizer, delay, dialect, 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _StubHandler(BaseHTTPRequestHandler):
    server: StubServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests += 1
        time.sleep(self.server.delay)
        # Like llama.cpp's server, answer no tokens to a body in another dialect.
        text = body.get("content" if self.server.dialect == "llama.cpp" else "prompt")
        if isinstance(text, list) and self.server.dialect == "llama.cpp":
            # llama.cpp: one id list, each text tokenised alone and each integer kept.
            encode = self.server.tokenizer.encode
            tokens: Any = [i for t in text for i in (encode(t) if isinstance(t, str) else [t])]
        elif isinstance(text, list):
            tokens = [self.server.tokenizer.encode(t) for t in text]
        else:
            tokens = self.server.tokenizer.encode(text) if isinstance(text, str) else []
        data = json.dumps({"tokens": tokens}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def stub_server(tokenizer: HFTokenizer, delay: float, dialect: str) -> Iterator[StubServer]:
    server = StubServer(tokenizer, delay, dialect)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def llama_server() -> Iterator[str]:
    """llama-cpp-python's server on the bundled GGUF file; its base URL once it answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_gguf())]
    command += ["--n_ctx", "8192", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(240):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            if process.poll() is not None:
                raise SystemExit("llama_cpp.server exited (pip install 'llama-cpp-python[server]')")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def timed(tokenizer: Tokenizer, text: str, chunk_tokens: int, repeat: int) -> tuple[float, list]:
    """The best time of ``repeat`` chunkings of ``text`` (after a warm-up when repeating)."""
    if repeat > 1:
        chunk_text(text[:200_000], tokenizer, chunk_tokens)
    best, chunks = float("inf"), []
    for _ in range(repeat):
        start = time.perf_counter()
        chunks = chunk_text(text, tokenizer, chunk_tokens)
        best = min(best, time.perf_counter() - start)
    return best, chunks


def report(name: str, seconds: float, chunks: list, reference: list, extra: str = "") -> None:
    total = sum(c.tokens for c in chunks)
    rate = total / seconds
    same = "same chunks" if chunks == reference else "DIFFERENT CHUNKS"
    print(
        f"  {name:44s} {total:>10,} tokens {seconds:8.2f} s {rate:>12,.0f} tokens/s "
        f"{TARGET / rate:9.1f} s per 3.5M  {same}{extra}"
    )


def round_trip(url: str) -> float:
    """The mean seconds of a tokenize request to the stub, one at a time."""
    with httpx.Client() as client:
        start = time.perf_counter()
        for _ in range(10):
            client.post(url + "/tokenize", json={"content": "Hi.", "prompt": "Hi."})
        return (time.perf_counter() - start) / 10


def server_paths(url: str, text: str, reference: list, chunk_tokens: int, requests: Any) -> None:
    """The old and the new way of chunking ``text`` through the server at ``url``."""
    tokenizer = ServerTokenizer.probe(url)
    if tokenizer is None:
        raise SystemExit(f"{url} has no tokenize endpoint")
    with tokenizer:
        tokenizer.count_many(["warm", "up"])  # learn whether it takes lists
        for name, counting in (
            ("one request a paragraph", OneByOne(tokenizer)),
            ("count_many", tokenizer),
        ):
            before = requests()
            seconds, chunks = timed(counting, text, chunk_tokens, repeat=1)
            sent = f", {requests() - before:,} requests" if before is not None else ""
            report(name, seconds, chunks, reference, sent)


def local_paths(args: argparse.Namespace, llama: LlamaCppTokenizer, fast: HFTokenizer) -> None:
    text = essay(args.tokens, fast)
    print(f"local: a document of {len(text):,} characters, chunks of {args.chunk_tokens} tokens")
    fast_time, reference = timed(fast, text, args.chunk_tokens, args.repeat)
    llama_time, chunks = timed(llama, text, args.chunk_tokens, args.repeat)
    report("llama.cpp vocabulary, one paragraph at a time", llama_time, chunks, reference)
    report("HF tokenizers, batched (new)", fast_time, reference, reference)


def remote_paths(args: argparse.Namespace, fast: HFTokenizer) -> None:
    text = essay(args.server_tokens, fast)
    reference = chunk_text(text, fast, args.chunk_tokens)
    print(f"servers: a document of {len(text):,} characters")
    for dialect in ("llama.cpp", "sglang"):
        with stub_server(fast, args.delay_ms / 1000, dialect) as stub:
            trip = round_trip(stub.url) * 1000
            print(
                f" stub server in {dialect}'s dialect, {args.delay_ms:g} ms added a request "
                f"(measured round trip {trip:.1f} ms):"
            )
            server_paths(stub.url, text, reference, args.chunk_tokens, lambda: stub.requests)
    if args.llama_server:
        with llama_server() as url:
            print(" llama-cpp-python's server (python -m llama_cpp.server), no added delay:")
            server_paths(url, text, reference, args.chunk_tokens, lambda: None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=TARGET)
    parser.add_argument("--server-tokens", type=int, default=50_000)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--llama-server", action="store_true")
    parser.add_argument("--chunk-tokens", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    llama = LlamaCppTokenizer.from_gguf(bundled_gguf())
    fast = fast_tokenizer(bundled_gguf(), llama)
    if fast is None:
        raise SystemExit("the fast tokenizer disagrees with llama.cpp's on this vocabulary")
    local_paths(args, llama, fast)
    if args.server_tokens > 0:
        remote_paths(args, fast)


if __name__ == "__main__":
    main()
