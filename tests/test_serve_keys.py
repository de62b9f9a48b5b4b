"""Runs kept apart: with keys, each key lists and reads only the traces of the runs it made at
``/view``; another key's run is a 404, as if it did not exist. Without keys, as before, every
run is everyone's."""

from __future__ import annotations

import json

import pytest

from longread.trace import Run

from .serve_helpers import QUESTION, client, curl, document

pytest.importorskip("longread.view.app")

KEYS = ("alice-key-0123456789", "bob-key-9876543210")


def ask(server, key: str, number: int) -> tuple[str, str]:
    """A run about a document whose magic number is ``number``: its id and trace URL."""
    reply = client(server, api_key=key).chat.completions.create(
        model="longread-memagent",
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"longread": {"document": document(number)}},
    )
    assert reply.choices[0].message.content == str(number)
    extra = reply.model_extra["longread"]
    return extra["run_id"], extra["trace_url"]


def view(url: str, key: str | None = None) -> tuple[int, str]:
    """A viewer page as a browser gets it (the key as a Basic password); status and body."""
    status, _, body = curl(*(["-u", f"me:{key}"] if key else []), url)
    return status, body


def test_each_key_lists_and_reads_only_its_own_runs(start):
    server = start(keys=KEYS)
    alice, bob = KEYS
    alice_run, alice_url = ask(server, alice, 1111111)
    bob_run, bob_url = ask(server, bob, 2222222)
    view_root = server.url + "/view/"

    status, listing = view(view_root, alice)
    assert status == 200
    assert alice_run in listing and bob_run not in listing
    status, listing = view(view_root, bob)
    assert status == 200
    assert bob_run in listing and alice_run not in listing

    status, page = view(alice_url, alice)
    assert status == 200 and "1111111" in page
    # Bob's run, asked for by Alice, is not there: 404 (a 403 would say that it exists).
    for url in (bob_url, f"{view_root}raw/{bob_run}.json"):
        status, page = view(url, alice)
        assert status == 404
        assert "2222222" not in page
    status, raw = view(f"{view_root}raw/{alice_run}.json", alice)
    assert status == 200 and Run.from_dict(json.loads(raw)).run_id == alice_run
    assert view(bob_url, bob)[0] == 200
    assert view(bob_url)[0] == 401  # and without a key, nothing at all


def test_the_runs_folder_records_which_key_made_each_run_but_never_the_key(start):
    server = start(keys=KEYS)
    alice, bob = KEYS
    alice_run, _ = ask(server, alice, 1111111)
    bob_run, _ = ask(server, bob, 2222222)
    runs = server.settings.runs_dir
    traces = {path.stem: path for path in runs.rglob("*.json")}
    assert set(traces) == {alice_run, bob_run}
    assert traces[alice_run].parent != traces[bob_run].parent  # one folder per key
    assert all(path.parent.parent == runs for path in traces.values())
    for path in traces.values():
        for key in KEYS:
            assert key not in str(path.relative_to(runs))
            assert key not in path.read_text()


def test_without_keys_every_run_is_listed_for_everyone(start):
    server = start()
    first, _ = ask(server, "none", 1111111)
    second, _ = ask(server, "none", 2222222)
    status, listing = view(server.url + "/view/")
    assert status == 200
    assert first in listing and second in listing
    assert {p.name for p in server.traces()} == {f"{first}.json", f"{second}.json"}
