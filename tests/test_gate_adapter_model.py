"""The update gate's shipped adapter on the embedded model (issue 29): with ``--update-gate on``
its updates reply ``<keep/>`` to RULER's filler sections before the needle, and it still takes
the needle in. (It learnt that on RULER's keyed wording; on make demo's key-less one it keeps
little: recipes/smollm2/CAMPAIGN.md, stop 80.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_model_integration import longread

pytestmark = pytest.mark.model


def test_the_gate_keeps_filler_unwritten_and_finds_the_needle(tmp_path: Path) -> None:
    built = longread(
        "data", "ruler", "--task", "niah_single_2", "--lengths", "4096", "--n", "6",
        "--seed", "7", "--out", str(tmp_path),
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    samples = [json.loads(line) for line in (tmp_path / "ruler_niah_single_2_4096.jsonl").open()]
    sample = max(samples, key=lambda s: s["meta"]["depth"])  # the needle in the last section
    document = tmp_path / "haystack.txt"
    document.write_text(sample["context"])
    trace_path = tmp_path / "trace.json"
    result = longread(
        "ask", str(document), "--question", sample["question"], "--update-gate", "on",
        "--exit-probe", "off", "--json", "--trace", str(trace_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # the run says which adapter it read with, and the settings that adapter brought
    assert "the update gate's memory adapter was trained with" in result.stderr
    updates = [s for s in json.loads(trace_path.read_text())["steps"] if s["kind"] == "update"]
    kept = [s for s in updates if "gate_keep" in s["flags"]]
    assert len(updates) >= 4 and kept  # sections of filler left the memory unwritten
    assert sample["answers"][0] in json.loads(result.stdout)["answer"]
