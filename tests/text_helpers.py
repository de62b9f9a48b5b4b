"""Test tokenizers and documents for the text tests (never used outside tests)."""

from __future__ import annotations

import contextlib
import json
import random
import re
import socket
import struct
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

_TOKEN = re.compile(r"\w+|[^\w\s]")


class RegexTokenizer:
    """One token per word or punctuation mark; whitespace is free. Ids come from a growing
    vocabulary, so they are deterministic within one instance."""

    name = "regex-words"
    exact = True

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return [self.vocab.setdefault(t, len(self.vocab)) for t in _TOKEN.findall(text)]

    def count(self, text: str) -> int:
        return len(_TOKEN.findall(text))


class PenaltyTokenizer:
    """Adversarial: one token per character plus one more wherever a sentence end meets the
    next sentence (". "), so pieces cut at sentence ends under-count the joined text."""

    name = "penalty"
    exact = True

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text] + [0] * text.count(". ")

    def count(self, text: str) -> int:
        return len(text) + text.count(". ")


WORDS = [
    *("the", "of", "and", "to", "in", "is", "was", "that", "for", "on", "with", "as", "by"),
    *("at", "from", "this", "it", "be", "are", "an", "or", "which", "his", "her", "their"),
    *("memory", "agent", "reads", "chunk", "document", "question", "answer", "model", "token"),
    *("window", "river", "castle", "number", "seven", "garden", "letter"),
]


def sentence(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return " ".join(words).capitalize() + rng.choice([".", "!", "?", '."'])


def paragraph(rng: random.Random, n_sentences: int) -> str:
    return " ".join(sentence(rng, rng.randint(4, 20)) for _ in range(n_sentences))


def document(n_paragraphs: int, seed: int = 0, max_sentences: int = 8) -> str:
    """A deterministic pseudo-English document with blank-line separated paragraphs."""
    rng = random.Random(seed)
    body = "\n\n".join(paragraph(rng, rng.randint(1, max_sentences)) for _ in range(n_paragraphs))
    return body + "\n"


def train_bpe(folder: Path, vocab_size: int = 400, bos: bool = False) -> Path:
    """Train a tiny byte-level BPE (GPT-2 style pre-tokenizer) and save its tokenizer.json.

    With ``bos`` its post-processor adds a ``<s>`` token, which ``encode`` must leave out.
    """
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<unk>", "<s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Paragraph ends in the training data teach it a "\n\n" merge, so that a chunk ending in
    # "\n\n" and one where "\n\n" precedes a word tokenise differently, as in real models.
    text = document(400, seed=1)
    tokenizer.train_from_iterator([p + "\n\n" for p in text.split("\n\n")], trainer)
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))]
        )
    path = folder / "tokenizer.json"
    tokenizer.save(str(path))
    return path


# --- a tokenize server on 127.0.0.1, in each server family's dialect --------------------------

BOS = 1


def server_ids(text: str) -> list[int]:
    """What the fake server's model tokenizer produces (deterministic across processes)."""
    return [zlib.crc32(t.encode()) % 50_000 + 10 for t in _TOKEN.findall(text)]


def answer(style: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """Mimic each server family's tokenize endpoint, quirks included."""
    if style in ("vllm", "sglang") and path == "/tokenize":
        prompt = body.get("prompt")
        bos = [BOS] if body.get("add_special_tokens", True) else []
        if isinstance(prompt, str):
            return 200, {"tokens": bos + server_ids(prompt), "max_model_len": 8192}
        if style == "sglang" and isinstance(prompt, list):  # a batch: one id list per prompt
            return 200, {"tokens": [bos + server_ids(p) for p in prompt]}
        return 400, {"error": "prompt: input should be a valid string"}
    if style == "llama.cpp" and path == "/tokenize":
        # The real server answers an empty list, not an error, to a body without "content".
        # A list "content" is tokenised piece by piece: each text alone, each integer kept.
        content = body.get("content", "")
        pieces = content if isinstance(content, list) else [content]
        ids = [i for p in pieces for i in (server_ids(p) if isinstance(p, str) else [p])]
        return 200, {"tokens": ([BOS] if body.get("add_special") else []) + ids}
    if style == "llama-cpp-python" and path == "/extras/tokenize":
        return 200, {"tokens": [BOS, *server_ids(body["input"])]}  # always adds BOS
    return 404, {"detail": "Not Found"}


LINGER_RESET = struct.pack("ii", 1, 0)  # close with a TCP reset instead of a clean shutdown


class FakeServer(ThreadingHTTPServer):
    """A tokenize server of one ``style`` that takes ``delay`` seconds to answer each request,
    and records the requests and the most it had in flight at once."""

    daemon_threads = True
    request_queue_size = 64  # many clients connect at once, as to a real server

    def __init__(self, style: str, delay: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.style = style
        self.delay = delay
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.lock = threading.Lock()
        self.connections: list[socket.socket] = []
        self.drop = 0  # the next this many requests lose their connection before any answer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> FakeServer:
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and drop the kept-alive connections too, as a server that exits."""
        self.shutdown()
        self.server_close()
        with self.lock:
            for connection in self.connections:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server: FakeServer
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers: a client reuses connections
    disable_nagle_algorithm = True  # else each answer waits for the client's delayed ACK

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections.append(self.connection)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append((self.path, body))
            dropped, self.server.drop = self.server.drop > 0, max(0, self.server.drop - 1)
        if dropped:  # a reset, as a server that closed a kept-alive connection
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
            self.close_connection = True
            return
        with self.server.lock:
            self.server.in_flight += 1
            self.server.most_in_flight = max(self.server.most_in_flight, self.server.in_flight)
        time.sleep(self.server.delay)
        with self.server.lock:
            self.server.in_flight -= 1
        status, payload = answer(self.server.style, self.path, body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean
