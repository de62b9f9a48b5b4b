"""Training paths that travel: a run folder keeps its config's paths relative to itself and its
data by content hash, so a run copied elsewhere with its config and data resumes there, a run
on changed data is refused, and the committed GRPO snapshot resumes in any clone."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from longread.errors import UsageError
from longread.train.config import load_config
from longread.train.run_folder import CONFIG_FILE, RunFolder
from longread.train.runconfig import check_same_run, saved_config

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "smollm2"
CONFIG = """\
[model]
adapter = "stages/warm"
[agent]
chunk_tokens = 250
[data]
train = ["data/train"]
eval = ["data/heldout.jsonl"]
"""


def sample(i: int) -> str:
    return json.dumps({"id": f"s{i}", "question": "q?", "context": f"text {i}", "answers": ["a"]})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A training config, its data and a starting adapter folder, in one folder."""
    root = tmp_path / "a"
    (root / "data" / "train").mkdir(parents=True)
    (root / "data" / "train" / "part.jsonl").write_text("\n".join(sample(i) for i in range(3)))
    (root / "data" / "heldout.jsonl").write_text(sample(9))
    (root / "stages" / "warm").mkdir(parents=True)
    (root / "train.toml").write_text(CONFIG)
    return root


def open_run(root: Path) -> dict:
    """Start or resume ``root/runs/r`` with ``root/train.toml``; the config it saved."""
    run = RunFolder(root / "runs" / "r", load_config(root / "train.toml"))
    run.open()
    return json.loads((root / "runs" / "r" / CONFIG_FILE).read_text())


def test_the_saved_config_names_paths_relative_to_the_run_and_data_by_content(project):
    saved = open_run(project)
    assert saved["data"]["train"] == ["../../data/train"]
    assert saved["data"]["eval"] == ["../../data/heldout.jsonl"]
    assert saved["model"]["adapter"] == "../../stages/warm"
    assert saved["model"]["path"] == "smollm2"  # the bundled model's name is no path
    hashes = saved["data_sha256"]
    assert len(hashes["train"]) == len(hashes["eval"]) == 1
    assert hashes["train"][0].startswith("sha256:")
    assert str(project) not in json.dumps(saved)


def test_a_run_copied_elsewhere_with_its_config_and_data_resumes_there(project, tmp_path):
    open_run(project)
    copy = tmp_path / "elsewhere" / "b"
    shutil.copytree(project, copy)
    shutil.rmtree(project)  # nothing of the first place is left to find
    assert open_run(copy)["data"]["train"] == ["../../data/train"]


def test_data_that_moved_is_accepted_by_its_content_and_changed_data_refused(project, tmp_path):
    open_run(project)
    moved = tmp_path / "moved"
    shutil.move(project / "data", moved)  # the config now names it where it went
    (project / "train.toml").write_text(CONFIG.replace('"data/', f'"{moved}/'))
    open_run(project)
    (moved / "train" / "part.jsonl").write_text(sample(0))  # same place, other content
    with pytest.raises(UsageError, match="data differ"):
        open_run(project)


def test_another_setting_is_still_refused(project):
    open_run(project)
    (project / "train.toml").write_text(CONFIG.replace("chunk_tokens = 250", "chunk_tokens = 300"))
    with pytest.raises(UsageError, match="sections agent differ"):
        open_run(project)


def test_a_run_folder_saved_with_absolute_paths_resumes_and_is_rewritten(project):
    config = load_config(project / "train.toml")
    run = project / "runs" / "r"
    run.mkdir(parents=True)
    (run / CONFIG_FILE).write_text(json.dumps(config.to_dict()))  # as the trainer saved it
    saved = open_run(project)
    assert saved["data"]["train"] == ["../../data/train"] and "data_sha256" in saved


def snapshot_script(recipe: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("snapshot", RECIPE / "snapshot.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.RECIPE = recipe  # type: ignore[attr-defined]
    return module


def test_snapshot_save_and_restore_need_no_text_replacement(project, tmp_path):
    recipe = tmp_path / "clone" / "recipes" / "smollm2"
    shutil.copytree(project, recipe)
    config = load_config(recipe / "train.toml")
    run = recipe / "runs" / "train"
    (run / "checkpoints" / "step-000002").mkdir(parents=True)
    (run / "checkpoints" / "step-000002" / "position.json").write_text('{"step": 2}')
    (run / CONFIG_FILE).write_text(json.dumps(saved_config(config, run)))
    snapshot = snapshot_script(recipe)
    snapshot.save("train")
    shutil.rmtree(run)
    moved = tmp_path / "another-clone"
    shutil.move(tmp_path / "clone", moved)  # the clone moves between save and restore
    recipe = moved / "recipes" / "smollm2"
    snapshot_script(recipe).restore("train")
    restored = json.loads((recipe / "runs" / "train" / CONFIG_FILE).read_text())
    check_same_run(restored, load_config(recipe / "train.toml"), recipe / "runs" / "train")
    origin = json.loads((recipe / "stages" / "train-run" / "snapshot.json").read_text())
    assert origin == {"stage": "train", "step": 2}


def test_the_committed_grpo_snapshot_restores_in_a_clone_anywhere(tmp_path):
    """``train.sh`` restores ``stages/grpo-run`` as ``runs/grpo`` and resumes it with
    ``grpo.toml``: in a copy of the recipe elsewhere, the trainer accepts it."""
    clone = tmp_path / "clone" / "recipes" / "smollm2"
    (clone / "stages").mkdir(parents=True)
    shutil.copy(RECIPE / "grpo.toml", clone)
    shutil.copytree(RECIPE / "stages" / "grpo-run", clone / "stages" / "grpo-run")
    snapshot_script(clone).restore("grpo")
    restored = json.loads((clone / "runs" / "grpo" / CONFIG_FILE).read_text())
    check_same_run(restored, load_config(clone / "grpo.toml"), clone / "runs" / "grpo")
