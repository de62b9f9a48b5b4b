"""The progress bar a user watches on a terminal during long runs."""

import io

from longread.cli.progress import RunProgress
from longread.trace import Step


def conversation(kind="update", chunk=None, phase="", prompt=900, completion=100, seconds=2.0):
    return Step(kind=kind, step=0, messages=[], reply="", prompt_tokens=prompt,
                        completion_tokens=completion, seconds=seconds, finish_reason="stop",
                        chunk_index=chunk, phase=phase)  # fmt: skip


def test_bar_shows_chunk_position_phase_and_throughput(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    with RunProgress(enabled=True) as progress:
        progress.start(chunks=12)
        progress.update(conversation(chunk=2, phase="root"), expected_calls=13)
        assert progress._bar.total == 13 and progress._bar.n == 1
        assert progress._bar.desc.startswith("chunk 3/12")
        progress.update(conversation(chunk=0, phase="reread-1"), expected_calls=30)
        assert progress._bar.desc.startswith("chunk 1/12 reread-1") and progress._bar.total == 30
        progress.update(conversation(kind="decide", phase="decide-1"), expected_calls=30)
        assert progress._bar.desc.startswith("decide-1")
    assert "tok/s=500" in err.getvalue()  # 3 x 1000 tokens in 3 x 2 s


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    with RunProgress() as progress:  # StringIO is not a tty
        progress.start(chunks=3)
        progress.update(conversation(chunk=0), expected_calls=4)
    assert err.getvalue() == ""
