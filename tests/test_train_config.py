"""`longread train --config`: what a config file may say, and the errors when it is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from longread.cli.main import cli
from longread.errors import UsageError
from longread.train.config import TrainConfig, load_config


def write(tmp_path: Path, text: str, name: str = "train.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_toml_config_fills_defaults_and_resolves_paths_near_the_file(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, '[data]\ntrain = "train.jsonl"\n[rollout]\nrollouts = 8\n[optim]\nlr = 1\n')
    )
    assert config.data.train == [str(tmp_path / "train.jsonl")]
    assert config.rollout.rollouts == 8
    assert config.optim.lr == 1.0 and isinstance(config.optim.lr, float)
    assert config.rollout.temperature == 1.0  # the papers' rollout temperature
    assert config.model.path == "smollm2"


def test_yaml_is_read_too(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, "data:\n  train: [a.jsonl]\nagent:\n  name: rememr1\n", "t.yaml")
    )
    assert config.agent.name == "rememr1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[data]\ntrain = "x"\n[optim]\nlearning_rate = 1e-5\n', "unknown setting"),
        ('[data]\ntrain = "x"\n[optimiser]\nlr = 1e-5\n', "unknown section"),
        ('[data]\ntrain = "x"\n[rollout]\nrollouts = "four"\n', "expected int"),
        ('[data]\ntrain = "x"\n[reward]\nestimator = "ppo"\n', "estimator must be one of"),
        ("[rollout]\nrollouts = 4\n", "data.train is empty"),
        ('[data]\ntrain = "x"\n[rollout]\nrollouts = 0\n', "at least 1"),
        ("[data\n", "not valid TOML"),
        ('[data]\ntrain = "x"\n[run]\nrow_kinds = ["decision"]\n', "unknown kind 'decision'"),
        ('[data]\ntrain = "x"\n[run]\nfirst_hop = 1.5\n', "run.first_hop is a chance"),
        ('[data]\ntrain = "x"\n[run]\ndecision_weight = -1\n', "must be 0 or more"),
    ],
)
def test_bad_configs_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_config(write(tmp_path, text))


def test_the_cli_reports_a_bad_config_and_exits_non_zero(tmp_path: Path) -> None:
    path = write(tmp_path, '[data]\ntrain = "x"\n[optim]\nlearning_rate = 1\n')
    result = CliRunner().invoke(cli, ["train", "--config", str(path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"longread: error: {path} [optim]: unknown setting(s) learning_rate"
    ]


def test_missing_training_data_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, '[data]\ntrain = "nowhere.jsonl"\n')
    result = CliRunner().invoke(cli, ["train", "--config", str(path), "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "training data" in result.output and "nowhere.jsonl does not exist" in result.output


def test_print_config_needs_no_file() -> None:
    result = CliRunner().invoke(cli, ["train", "--print-config"])
    assert result.exit_code == 0
    assert "[rollout]" in result.output and "rollouts = 4" in result.output


def test_the_shipped_example_config_is_valid() -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "train" / "smollm2_memagent.toml"
    config = load_config(example)
    assert config.rollout.engine == "llamacpp" and config.model.path == "smollm2"


def test_the_llamacpp_engine_refuses_sampler_old_logprobs(tmp_path: Path) -> None:
    text = (
        '[data]\ntrain = "x"\n[rollout]\nengine = "llamacpp"\n[optim]\nold_logprobs = "sampler"\n'
    )
    with pytest.raises(UsageError, match="old_logprobs = 'auto' or 'recompute'"):
        load_config(write(tmp_path, text))


def test_held_out_sets_sharing_a_sample_id_are_refused_before_training(tmp_path: Path) -> None:
    """Two held-out folders built with the same task and length share ids; that must stop the
    run at once, not at its first evaluation after hours of training."""
    line = '{"id": "niah-8192-0", "question": "Q?", "context": "text", "answers": ["a"]}\n'
    for name in ("train", "eval_a", "eval_b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "set.jsonl").write_text(line)
    path = write(tmp_path, '[data]\ntrain = "train"\neval = ["eval_a", "eval_b"]\n')
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["train", "--config", str(path), "--out", str(out)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "longread: error: sample id 'niah-8192-0' occurs twice in the held-out data; "
        "ids must be unique"
    ]
    assert not out.exists()


@pytest.mark.parametrize(
    ("agent", "estimator", "options"),
    [
        ("memreread", "rememr1", ""),  # its decide/integrate calls have no memory chain
        ("memagent", "rea", ""),  # never rereads: ReA would rank rollouts by nothing
        ("rememr1", "rea", ""),
        ("memreread", "rea", "[agent.options]\nmax_reread = 0\n"),
    ],
)
def test_estimators_that_cannot_train_the_agent_are_refused_before_any_rollout(
    tmp_path: Path, agent: str, estimator: str, options: str
) -> None:
    text = (
        f'[data]\ntrain = "x"\n[agent]\nname = "{agent}"\n{options}'
        f'[reward]\nestimator = "{estimator}"\n'
    )
    path = write(tmp_path, text)
    with pytest.raises(UsageError, match=f"reward.estimator {estimator} cannot train") as error:
        load_config(path)
    message = str(error.value)
    assert "\n" not in message
    assert (
        "pairs that work: grpo with any agent, rememr1 with memagent or rememr1, rea with "
        "memreread" in message
    )
    # through the CLI: one line, exit 2, nothing trained
    result = CliRunner().invoke(cli, ["train", "--config", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("agent", "estimator"),
    [("memagent", "grpo"), ("memreread", "grpo"), ("memagent", "rememr1"),
     ("rememr1", "rememr1"), ("memreread", "rea")],
)  # fmt: skip
def test_pairs_that_work_are_accepted(tmp_path: Path, agent: str, estimator: str) -> None:
    text = f'[data]\ntrain = "x"\n[agent]\nname = "{agent}"\n[reward]\nestimator = "{estimator}"\n'
    config = load_config(write(tmp_path, text))
    assert (config.agent.name, config.reward.estimator) == (agent, estimator)


def test_an_unknown_agent_is_refused_by_the_config_check(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown agent 'memagnet'"):
        load_config(write(tmp_path, '[data]\ntrain = "x"\n[agent]\nname = "memagnet"\n'))


def test_a_run_saved_before_minibatches_existed_resumes_as_it_trained(tmp_path: Path) -> None:
    """Such a run took one optimizer step per training step: the new default (2) would change
    how it trains mid-run, so resuming it asks for optim.minibatches = 1."""
    from longread.train.runconfig import check_same_run

    config = TrainConfig.from_dict({"data": {"train": [str(tmp_path / "train.jsonl")]}})
    saved = config.to_dict()
    del saved["optim"]["minibatches"]
    with pytest.raises(UsageError, match="sections optim differ"):
        check_same_run(saved, config, tmp_path)
    config.optim.minibatches = 1
    check_same_run(saved, config, tmp_path)  # accepted


def test_a_resume_may_change_how_the_update_uses_memory_but_not_what_it_computes(
    tmp_path: Path,
) -> None:
    """A run that ran out of memory resumes with smaller micro-batches or checkpointing; a
    new learning rate is another run."""
    from longread.train.runconfig import check_same_run

    config = TrainConfig.from_dict({"data": {"train": [str(tmp_path / "train.jsonl")]}})
    saved = config.to_dict()
    config.optim.micro_batch = 1
    config.optim.gradient_checkpointing = True
    check_same_run(saved, config, tmp_path)  # accepted
    config.optim.lr *= 2
    with pytest.raises(UsageError, match="sections optim differ"):
        check_same_run(saved, config, tmp_path)


def test_a_resume_may_stop_or_start_keeping_rollouts(tmp_path: Path) -> None:
    """``run.save_rollouts`` decides what the run keeps for reading, not what it trains."""
    from longread.train.runconfig import check_same_run

    config = TrainConfig.from_dict({"data": {"train": [str(tmp_path / "train.jsonl")]}})
    saved = config.to_dict()
    del saved["run"]["save_rollouts"]  # a run folder from before the option: kept none
    config.run.save_rollouts = False
    check_same_run(saved, config, tmp_path)  # accepted
    config.run.save_rollouts = True
    check_same_run(saved, config, tmp_path)  # accepted
    config.run.seed += 1
    with pytest.raises(UsageError, match="sections run differ"):
        check_same_run(saved, config, tmp_path)
