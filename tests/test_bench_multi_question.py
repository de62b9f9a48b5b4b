"""``bench/multi_question.py`` reads as ``longread ask`` does: the applied adapter's trained
settings and the memory options it shipped with, unless a flag says otherwise."""

from __future__ import annotations

import argparse

import pytest

from longread.llm.factory import BackendSettings
from longread.llm.memory_adapter import bundled_memory_adapter
from longread.llm.trained_settings import read_trained_settings

from .script_loader import load_script

multi_question = load_script("bench/multi_question.py")


def flags(**given: object) -> argparse.Namespace:
    unset = dict.fromkeys((*multi_question.UNTRAINED, *multi_question.READING))
    return argparse.Namespace(**{**unset, **given})


def test_unset_flags_read_as_the_shipped_adapter_was_trained_and_shipped():
    shipped = bundled_memory_adapter()
    assert shipped is not None
    trained = read_trained_settings(str(shipped))
    assert trained is not None
    reading = multi_question.reading_settings(flags(), BackendSettings(backend="llamacpp"))
    assert reading["chunk_tokens"] == trained.chunk_tokens
    assert reading["memory_tokens"] == trained.memory_tokens
    assert reading["final_tokens"] == max(trained.final_tokens, 64)  # a UUID needs 38 tokens
    for option in multi_question.READING:
        assert reading[option] == (option in trained.reads_with)


def test_flags_given_win_over_the_adapter():
    settings = BackendSettings(backend="llamacpp")
    reading = multi_question.reading_settings(
        flags(chunk_tokens=5000, focused_reread=False), settings
    )
    assert reading["chunk_tokens"] == 5000 and reading["focused_reread"] is False


def test_the_model_as_released_reads_with_the_bench_defaults_and_no_options():
    settings = BackendSettings(backend="llamacpp", base_model=True)
    reading = multi_question.reading_settings(flags(), settings)
    assert {k: reading[k] for k in multi_question.UNTRAINED} == multi_question.UNTRAINED
    assert not any(reading[option] for option in multi_question.READING)


def test_an_on_off_flag_takes_only_on_or_off():
    assert multi_question.on_off("on") is True and multi_question.on_off("off") is False
    with pytest.raises(argparse.ArgumentTypeError):
        multi_question.on_off("yes")
