"""``longread view``: the command, its one-file export, and the server it starts."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys

import httpx
import pytest
from click.testing import CliRunner

from longread.cli.main import cli
from longread.trace import Run
from longread.view import export_html

from .view_helpers import PAYLOAD, Tables, make_run_folder, served


@pytest.fixture
async def run_dir(tmp_path):
    return await make_run_folder(tmp_path)


def embedded_traces(page: str) -> dict[str, dict]:
    """Section id -> the trace JSON the export carries for it."""
    found = re.findall(
        r'<script type="application/json" id="(t\d+)-data">(.*?)</script>', page, re.S
    )
    return {anchor: json.loads(text) for anchor, text in found}


def test_export_writes_one_self_contained_page(run_dir, tmp_path):
    out = tmp_path / "run.html"
    assert export_html(run_dir, out) == 4  # every trace; the failed sample has none
    page = out.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl", "run", "run.html"]
    assert "<style>" in page and "table.sortable" in page  # the CSS, inline
    assert "function sortBy" in page  # the JavaScript, inline
    assert not re.search(r"<link|<script src|<img|@import|url\(", page)  # nothing to fetch
    table = Tables(page).named("samples")
    anchors = dict(zip([row[0] for row in table["rows"][1:]], table["links"][1:], strict=True))
    assert anchors == {"right": "#t2", "wrong": "#t3", "payload": "#t1", "failed": None,
                       "capped": "#t0"}  # fmt: skip
    for anchor in ("t0", "t1", "t2", "t3"):
        assert f'<section id="{anchor}" class="page-trace targeted">' in page
    saved = {name: Run.load(run_dir / "traces" / f"{name}.json").to_dict()
             for name in ("capped", "payload", "right", "wrong")}  # fmt: skip
    assert embedded_traces(page) == {"t0": saved["capped"], "t1": saved["payload"],
                                     "t2": saved["right"], "t3": saved["wrong"]}  # fmt: skip


def test_the_exported_json_cannot_close_its_script_element(run_dir, tmp_path):
    export_html(run_dir, tmp_path / "run.html")
    page = (tmp_path / "run.html").read_text(encoding="utf-8")
    assert PAYLOAD not in page
    data = page.split('id="t1-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data
    assert "\\u003cscript\\u003ewindow.__pwned=1\\u003c/script\\u003e" in data
    assert page.count("<script") == 1 + 4  # the viewer's script and four JSON blocks


def test_export_of_one_trace(run_dir, tmp_path):
    out = tmp_path / "one.html"
    assert export_html(run_dir / "traces/wrong.json", out) == 1
    page = out.read_text(encoding="utf-8")
    assert '<section id="t0" class="page-trace">' in page  # always shown: nothing to target
    assert "What is the name of the cat?" in page
    assert embedded_traces(page) == {"t0": Run.load(run_dir / "traces/wrong.json").to_dict()}


def test_the_command_exports_and_exits(run_dir, tmp_path):
    out = tmp_path / "page.html"
    result = CliRunner().invoke(cli, ["view", str(run_dir / "traces"), "--export", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output == f"wrote {out} (4 trace(s))\n"
    assert "Traces" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing", "does not exist"),
        ("empty", "is neither a trace JSON file, an eval run folder"),
        ("notes.txt", "is not a longread trace"),
    ],
)
def test_the_command_refuses_a_path_that_is_none_of_them(tmp_path, name, message):
    (tmp_path / "empty").mkdir()  # a folder with no trace and no config.json
    (tmp_path / "notes.txt").write_text("hello")
    result = CliRunner().invoke(cli, ["view", str(tmp_path / name), "--no-browser"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert result.output.startswith(f"longread: error: {tmp_path / name}")
    assert message in result.output


def test_a_port_in_use_is_one_line(run_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(cli, ["view", str(run_dir), "--port", str(port)])
    assert result.exit_code == 2
    assert result.output.startswith(f"longread: error: cannot listen on 127.0.0.1:{port}")


def test_the_command_opens_the_browser_once_the_server_listens(run_dir, monkeypatch):
    opened, served = [], []

    def fake_serve(app, sock, on_ready):  # what the server does once it accepts connections
        served.append(sock.getsockname())
        sock.close()
        on_ready()

    monkeypatch.setattr("longread.asgi.serve", fake_serve)
    monkeypatch.setattr("webbrowser.open", opened.append)
    result = CliRunner().invoke(cli, ["view", str(run_dir)])
    assert result.exit_code == 0, result.output
    ((host, port),) = served
    assert (host, port > 0) == ("127.0.0.1", True)
    assert opened == [f"http://127.0.0.1:{port}/"]
    assert f"http://127.0.0.1:{port}/" in result.output


def test_the_command_serves_the_run_on_localhost(run_dir):
    with served(run_dir) as url:
        page = httpx.get(url, timeout=30).text
        trace = httpx.get(url + "traces/right.json", timeout=30).text
    assert [row[0] for row in Tables(page).named("samples")["rows"][1:]] == [
        "right", "wrong", "payload", "failed", "capped",
    ]  # fmt: skip
    assert "What is the colour of the door?" in trace


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_viewer_stops_on_ctrl_c_or_sigterm_without_an_error(run_dir, sig):
    # SIGTERM used to kill it (uvicorn raises the signal again once it has shut down).
    command = [sys.executable, "-m", "longread", "view", str(run_dir), "--no-browser"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        assert "http://127.0.0.1:" in p.stdout.readline()
        p.send_signal(sig)
        _, stderr = p.communicate(timeout=60)  # a hang guard, not a timing
    assert p.returncode == 0, stderr
    assert "Traceback" not in stderr
