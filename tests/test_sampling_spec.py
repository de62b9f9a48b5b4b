"""One sampling spec (``SamplingParams``) with the same meaning on every backend (issue 25).

The transformers policy's draw (``train.policy.pick``) is checked against the spec on made-up
logits; the OpenAI-compatible body sends the knobs only when they are on; the llama.cpp paths'
shared helpers live in one module that neither path's other half is needed for. The same spec on
the real llama.cpp engine: tests/test_sampler_agreement.py.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from longread.llm import EVAL_SAMPLING, TRAINING_SAMPLING, SamplingParams
from longread.llm.openai import _request_body

SRC = Path(__file__).resolve().parents[1] / "src" / "longread"


def test_the_defaults_are_the_full_distribution_and_the_presets_the_papers() -> None:
    spec = SamplingParams()
    assert (spec.top_k, spec.min_p, spec.top_p) == (0, 0.0, 1.0)
    assert not spec.penalised
    assert (EVAL_SAMPLING.temperature, EVAL_SAMPLING.top_p) == (0.7, 0.95)
    assert (TRAINING_SAMPLING.temperature, TRAINING_SAMPLING.top_p) == (1.0, 1.0)
    for preset in (EVAL_SAMPLING, TRAINING_SAMPLING):
        assert (preset.top_k, preset.min_p, preset.penalised) == (0, 0.0, False)


def test_training_rollouts_default_to_the_training_preset() -> None:
    from longread.train.config import RolloutSection

    rollout = RolloutSection()
    assert (rollout.temperature, rollout.top_p) == (
        TRAINING_SAMPLING.temperature,
        TRAINING_SAMPLING.top_p,
    )


@pytest.mark.parametrize(
    "field, value", [("top_k", -1), ("min_p", 1.5), ("repeat_penalty", 0.0), ("top_p", 0.0)]
)
def test_out_of_range_knobs_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        SamplingParams(**{field: value})


# -- the transformers policy's draw --------------------------------------------------------

torch = pytest.importorskip("torch")  # the 'train' extra; `make install` always installs it


def draws(logits: list[float], params: SamplingParams, n: int = 2000, **kw: object) -> set[int]:
    from longread.train.policy import pick

    generator = torch.Generator().manual_seed(0)
    tensor = torch.tensor(logits)
    return {pick(tensor, params, generator=generator, **kw) for _ in range(n)}  # type: ignore[arg-type]


# Probabilities at temperature 1: 0.4, 0.3, 0.2, 0.06, 0.04
LOGITS = [float(torch.log(torch.tensor(p))) for p in (0.4, 0.3, 0.2, 0.06, 0.04)]


def test_the_full_distribution_reaches_every_id() -> None:
    assert draws(LOGITS, TRAINING_SAMPLING) == {0, 1, 2, 3, 4}


def test_top_k_top_p_and_min_p_cut_the_tempered_distribution() -> None:
    assert draws(LOGITS, replace(TRAINING_SAMPLING, top_k=2)) == {0, 1}
    # 0.4 + 0.3 < 0.85 <= 0.4 + 0.3 + 0.2: three ids hold 0.85 at temperature 1...
    assert draws(LOGITS, replace(TRAINING_SAMPLING, top_p=0.85)) == {0, 1, 2}
    # ...and two at temperature 0.5 (0.54, 0.31, 0.14, ...): top-p reads the tempered one.
    assert draws(LOGITS, replace(TRAINING_SAMPLING, temperature=0.5, top_p=0.8)) == {0, 1}
    # min-p 0.2: ids at least 0.2 x 0.4 = 0.08 likely
    assert draws(LOGITS, replace(TRAINING_SAMPLING, min_p=0.2)) == {0, 1, 2}


def test_penalties_count_the_ids_this_completion_sampled() -> None:
    from longread.train.policy import pick

    logits = torch.tensor([2.0, 1.9, -1.0])
    greedy = SamplingParams(repeat_penalty=1.1)
    assert pick(logits, greedy) == 0
    assert pick(logits, greedy, sampled=[0]) == 1  # 2.0 / 1.1 < 1.9
    frequency = SamplingParams(frequency_penalty=0.06)
    assert pick(logits, frequency, sampled=[0]) == 0  # 1.94 > 1.9
    assert pick(logits, frequency, sampled=[0, 0]) == 1  # 1.88 < 1.9
    presence = SamplingParams(presence_penalty=0.2)
    assert pick(logits, presence, sampled=[0, 0]) == 1


def test_greedy_stays_greedy_whatever_the_cuts() -> None:
    params = SamplingParams(temperature=0.0, top_k=3, top_p=0.5, min_p=0.3)
    assert draws(LOGITS[::-1], params, n=20) == {4}


# -- the OpenAI-compatible body ------------------------------------------------------------


def test_the_http_body_sends_extra_knobs_only_when_they_are_on() -> None:
    messages = [{"role": "user", "content": "hi"}]
    plain = _request_body("m", messages, TRAINING_SAMPLING)  # type: ignore[arg-type]
    assert not {"top_k", "min_p", "repetition_penalty", "presence_penalty"} & set(plain)
    spec = SamplingParams(top_k=20, min_p=0.1, repeat_penalty=1.2, frequency_penalty=0.5)
    body = _request_body("m", messages, spec)  # type: ignore[arg-type]
    assert (body["top_k"], body["min_p"], body["frequency_penalty"]) == (20, 0.1, 0.5)
    assert body["repetition_penalty"] == body["repeat_penalty"] == 1.2  # vLLM's, llama.cpp's


# -- no import circle ----------------------------------------------------------------------


def test_the_batched_path_does_not_import_the_serial_one() -> None:
    code = "import sys, longread.llm.llamacpp_batch; print('longread.llm.llamacpp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    # Nor anywhere below module level: the shared helpers come from llamacpp_chat.
    tree = ast.parse((SRC / "llm" / "llamacpp_batch.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "llamacpp" not in imported and "llamacpp_chat" in imported
    tree = ast.parse((SRC / "llm" / "llamacpp_chat.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {"llamacpp", "llamacpp_batch"} & imported
