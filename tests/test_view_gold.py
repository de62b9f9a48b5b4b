"""The viewer finds a run's gold answers from the run folder, wherever the folder was copied,
and only when the data is the data the run read."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from longread.eval.store import read_results
from longread.view import create_app
from longread.view.runfolder import data_path, gold_or_reason, is_run_folder, read_config

from .view_helpers import make_run_folder

REPO = Path(__file__).resolve().parent.parent
GOLD = re.compile(r'<div class="gold">.*?<li class="text">(.*?)</li>', re.S)


def trace_page(run_dir: Path, name: str) -> str:
    response = TestClient(create_app(run_dir)).get(f"/traces/{name}")
    assert response.status_code == 200, response.text
    return response.text


async def test_a_checkout_copied_elsewhere_shows_its_gold_answers(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    run_dir = await make_run_folder(checkout)  # the data beside the run, not inside it
    assert read_config(run_dir)["data"] == "../data.jsonl"
    shutil.copytree(checkout, tmp_path / "clone")
    shutil.rmtree(checkout)  # nothing may lead back to the original
    page = trace_page(tmp_path / "clone" / "run", "wrong.json")
    assert GOLD.search(page)[1] == "Max"


async def test_data_changed_since_the_run_shows_no_gold_and_says_why(tmp_path):
    run_dir = await make_run_folder(tmp_path)
    data = tmp_path / "data.jsonl"
    data.write_text(data.read_text().replace('["Max"]', '["Tom"]'))
    page = trace_page(run_dir, "wrong.json")
    assert not GOLD.search(page)
    assert "is not the data the run read (its content has changed)" in page


def committed_run_folders() -> list[Path]:
    return sorted(
        p.parent for p in (REPO / "results").rglob("config.json") if is_run_folder(p.parent)
    )


@pytest.mark.parametrize(
    "run_dir", committed_run_folders(), ids=lambda p: str(p.relative_to(REPO / "results"))
)
def test_every_committed_run_finds_its_data_from_any_checkout(run_dir):
    config = read_config(run_dir)
    text = (run_dir / "config.json").read_text()
    assert not re.search(r'"(/|[A-Za-z]:\\)', text), "an absolute path in config.json"
    gold, reason = gold_or_reason(data_path(run_dir, config), config.get("data_hash"))
    assert reason is None
    assert {r.sample_id for r in read_results(run_dir)} <= set(gold)  # every row's gold
