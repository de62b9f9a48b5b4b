"""Reports from real run folders: hand-computed accuracies, counts and means."""

from __future__ import annotations

import builtins
import json
import sqlite3
from pathlib import Path
from statistics import mean

import pytest
from click.testing import CliRunner

from longread.cli import cli
from longread.cli.eval import eval_group
from longread.errors import BackendError, UsageError
from longread.eval.report import (
    load_runs,
    markdown_report,
    plot_accuracy,
    run_time_report,
    run_times,
)
from longread.eval.runner import run_eval

from .eval_helpers import AnswerBackend, factory, open_store, question, sample

TOY = [
    sample("a1", ["Paris"], dataset="toy", context_tokens=1000),
    sample("a2", ["Paris"], dataset="toy", context_tokens=1000),
    sample("a3", ["Paris"], dataset="toy", context_tokens=1000),
    sample("a4", ["Paris"], dataset="toy", context_tokens=1000),
    sample("b1", ["Paris"], dataset="toy", context_tokens=8000),
    sample("b2", ["Paris"], dataset="toy", context_tokens=8000),
]
NIAH = [
    sample("r1", ["11", "22"], dataset="niah", kind="ruler", context_tokens=4096),
    sample("r2", ["11", "22"], dataset="niah", kind="ruler", context_tokens=4096),
]
FULL_REPLIES = {
    "a1": "\\boxed{Paris}",  # right
    "a2": "\\boxed{Rome}",  # wrong
    "a3": "Paris",  # right without a box: lenient metrics only
    "a4": BackendError("server answered 500"),  # failed: a null in the denominator
    "b1": "\\boxed{}",  # empty answer: a null, not a failure
    "b2": "\\boxed{The Paris}",  # right after normalisation, not strictly
    "r1": "\\boxed{11}",  # half the needles
    "r2": "\\boxed{11, 22}",  # all of them
}
FULL_TOKENS = {"a1": 2000, "a2": 3000, "a3": 4000, "b1": 1000, "b2": 2000, "r1": 100, "r2": 100}


def backend(replies, tokens) -> AnswerBackend:
    return AnswerBackend(
        {question(k): v for k, v in replies.items()},
        prompt_tokens={question(k): v for k, v in tokens.items()},
    )


@pytest.fixture
async def run_dirs(tmp_path):
    full = backend(FULL_REPLIES, FULL_TOKENS)
    with open_store(tmp_path / "full", "full") as store:
        await run_eval(TOY + NIAH, factory(full, "full"), store, 2, progress=False)
    rag = backend(dict.fromkeys(FULL_REPLIES, "\\boxed{Paris}"), dict.fromkeys(FULL_REPLIES, 500))
    with open_store(tmp_path / "rag", "rag") as store:
        await run_eval(TOY, factory(rag, "rag"), store, 2, progress=False)
    return [tmp_path / "full", tmp_path / "rag"]


def table_rows(markdown: str) -> dict[tuple[str, str, str], list[str]]:
    """(dataset, length, agent) -> the remaining cells of that table line (the accuracy
    tables; each dataset's citations table is tests/test_eval_citations.py's)."""
    rows, dataset, citations = {}, "", False
    for line in markdown.splitlines():
        if line.startswith("## "):
            dataset, citations = line[3:], False
        elif line == "Citations:":
            citations = True
        elif line.startswith("| ") and not line.startswith("| length") and not citations:
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[(dataset, cells[0], cells[1])] = cells[2:]
    return rows


def mean_seconds(rows, agent, length) -> str:
    done = [r for r in rows if r["agent"] == agent and r["context_length"] == length]
    return f"{mean(r['seconds'] for r in done if r['status'] == 'done'):.2f}"


async def test_markdown_numbers_match_a_hand_count(run_dirs):
    rows = load_runs(run_dirs)
    tables = table_rows(markdown_report(rows))
    s = lambda agent, length: mean_seconds(rows, agent, length)  # noqa: E731
    # n, sub-EM, its 95% Wilson interval, EM, F1, strict, [match_all], nulls, failed, unboxed,
    # calls, prompt tokens, memory tokens per update and capped updates (none: these agents
    # keep no memory), s. Wilson at 95%: 2 of 4 is 15-85%, 1 of 2 9-91%, 4 of 4 51-100%, 2 of
    # 2 34-100% (z = 1.96; textbook values).
    toy_full = ["4", "50.0", "15-85", "50.0", "50.0", "25.0", "1", "1", "1", "1.0", "3000"]
    toy_full += ["-", "-"]
    toy_full_8k = ["2", "50.0", "9-91", "50.0", "50.0", "0.0", "1", "0", "0", "1.0", "1500"]
    toy_full_8k += ["-", "-"]
    rag_all_right = ["100.0", "100.0", "100.0", "0", "0", "0", "1.0", "500", "-", "-"]
    # Both needles are required: r1 "11" finds one of two (sub-EM, EM, strict 0; F1 2/3 against
    # "11 22"; match_all 50), r2 "11, 22" finds both (1 everywhere; match_all 100).
    niah = ["2", "50.0", "9-91", "50.0", "83.3", "50.0", "75.0", "0", "0", "0", "1.0", "100"]
    niah += ["-", "-"]
    assert tables == {
        ("toy", "1000", "full"): [*toy_full, s("full", 1000)],
        ("toy", "1000", "rag"): ["4", "100.0", "51-100", *rag_all_right, s("rag", 1000)],
        ("toy", "8000", "full"): [*toy_full_8k, s("full", 8000)],
        ("toy", "8000", "rag"): ["2", "100.0", "34-100", *rag_all_right, s("rag", 8000)],
        ("niah", "4096", "full"): [*niah, s("full", 4096)],
    }


async def test_rows_carry_what_reports_group_by(run_dirs):
    rows = load_runs(run_dirs)
    assert len(rows) == 8 + 6
    a4 = next(r for r in rows if r["sample_id"] == "a4" and r["agent"] == "full")
    assert (a4["status"], a4["null"], a4["accuracy"]) == ("failed", True, 0.0)
    assert a4["error"] == "BackendError: server answered 500"
    r1 = next(r for r in rows if r["sample_id"] == "r1")
    assert (r1["dataset"], r1["kind"], r1["context_length"], r1["accuracy"]) == (
        "niah",
        "ruler",
        4096,
        0.5,
    )


async def test_memory_agents_report_new_tokens_per_update(tmp_path):
    """Each short document is one chunk: one memory update and one final call per sample. The
    update's reply is "\\boxed{Paris}", five words, so five new tokens (the test tokenizer
    counts words and marks); no update hit the cap."""
    replies = dict.fromkeys(["a1", "a2"], "\\boxed{Paris}")
    with open_store(tmp_path / "m", "memagent") as store:
        await run_eval(TOY[:2], factory(backend(replies, {}), "memagent"), store, 1, progress=False)
    rows = load_runs([tmp_path / "m"])
    assert [(r["updates"], r["update_tokens"], r["updates_truncated"]) for r in rows] == [
        (1, 5, 0),
        (1, 5, 0),
    ]
    (cells,) = table_rows(markdown_report(rows)).values()
    assert cells[-3:-1] == ["5", "0%"]


async def test_a_run_with_a_lora_adapter_is_labelled_with_it(tmp_path):
    """A trained model's rows stand beside the base model's instead of merging with them."""
    for name, adapter in (("base", None), ("trained", "/models/memory-lora.gguf")):
        with open_store(tmp_path / name, "full") as store:
            saved = json.loads(store.config_path.read_text())
            saved["backend"]["adapter"] = adapter
            store.config_path.write_text(json.dumps(saved))
            replies = {"a1": "\\boxed{Paris}"}
            await run_eval(TOY[:1], factory(backend(replies, {})), store, 1, progress=False)
    agents = {r["agent"] for r in load_runs([tmp_path / "base", tmp_path / "trained"])}
    assert agents == {"full", "full + memory-lora"}


async def test_one_agent_with_two_configs_gets_two_labels(tmp_path):
    for name, config in (("x", {"final_tokens": 10}), ("y", {"final_tokens": 20})):
        with open_store(tmp_path / name, "full") as store:
            config_path = store.config_path
            saved = json.loads(config_path.read_text())
            config_path.write_text(json.dumps({**saved, "agent_config": config}))
            replies = {"a1": "\\boxed{Paris}"}
            await run_eval(TOY[:1], factory(backend(replies, {})), store, 1, progress=False)
    agents = {r["agent"] for r in load_runs([tmp_path / "x", tmp_path / "y"])}
    assert agents == {"full (final_tokens 10)", "full (final_tokens 20)"}


async def memagent_labels(tmp_path: Path, configs: dict[str, dict[str, object]]) -> list[str]:
    """The report's agent label of each of a few one-sample memagent runs, one per named
    agent config (as saved in each run folder's config.json)."""
    for name, config in configs.items():
        with open_store(tmp_path / name, "memagent") as store:
            saved = json.loads(store.config_path.read_text())
            store.config_path.write_text(json.dumps({**saved, "agent_config": config}))
            replies = {"a1": "\\boxed{Paris}"}
            await run_eval(
                TOY[:1], factory(backend(replies, {}), "memagent"), store, 1, progress=False
            )
    return [r["agent"] for r in load_runs([tmp_path / name for name in configs])]


async def test_a_run_made_before_a_setting_existed_is_labelled_with_its_old_value(tmp_path):
    """A folder saved before ``grounded_exit`` existed ran without it: "grounded_exit False",
    not "None", beside a run with it on."""
    configs = {
        "old": {"exit_probe": True},
        "new": {"exit_probe": True, "grounded_exit": True},
    }
    labels = await memagent_labels(tmp_path, configs)
    assert labels == ["memagent (grounded_exit False)", "memagent (grounded_exit True)"]


async def test_a_setting_that_acts_only_under_an_option_off_is_left_out_of_the_label(tmp_path):
    """Two runs without focused rereads read alike whatever share their rereads would keep
    notes at (an old folder records none: stop 53's 0.0), so neither is labelled with it; the
    run with rereads on is told apart by the option."""
    configs = {
        "old": {"focused_reread": False},
        "new": {"focused_reread": False, "keep_notes_share": 0.6},
        "reread": {"focused_reread": True, "keep_notes_share": 0.6},
    }
    labels = await memagent_labels(tmp_path, configs)
    assert labels == [
        "memagent (focused_reread False)",
        "memagent (focused_reread False)",
        "memagent (focused_reread True)",
    ]


async def test_runs_that_differ_only_where_no_setting_acts_share_the_plain_label(tmp_path):
    """Without focused rereads, recorded reread shares that differ change nothing the runs
    did: both rows are plain "memagent", not labelled by their folders' names."""
    configs = {
        "old": {"focused_reread": False},
        "new": {"focused_reread": False, "keep_notes_share": 0.6},
    }
    assert await memagent_labels(tmp_path, configs) == ["memagent", "memagent"]


async def test_report_command_writes_markdown_and_json(run_dirs, tmp_path):
    out, rows_path = tmp_path / "report.md", tmp_path / "rows.jsonl"
    args = ["report", *map(str, run_dirs), "--markdown", str(out), "--json", str(rows_path)]
    result = CliRunner().invoke(eval_group, args)
    assert result.exit_code == 0, result.output
    rows = load_runs(run_dirs)
    times = run_time_report(run_times(run_dirs))
    assert out.read_text() == markdown_report(rows) + "\n" + times
    assert [json.loads(line) for line in rows_path.read_text().splitlines()] == rows
    printed = CliRunner().invoke(eval_group, ["report", str(run_dirs[0])])
    expected = markdown_report(load_runs(run_dirs[:1])) + "\n"
    assert printed.stdout == expected + run_time_report(run_times(run_dirs[:1]))


def session(ran: int, wall: float, busy: float, **extra: object) -> str:
    times = {"wall_seconds": wall, "backend_busy_seconds": busy, "overhead_seconds": wall - busy}
    return json.dumps({"ran": ran, **times, **extra}) + "\n"


async def test_run_time_sums_every_session_including_interrupted_ones(run_dirs):
    full, rag = run_dirs
    (full / "sessions.jsonl").write_text(
        session(3, 100.0, 96.0, interrupted=True) + session(5, 300.0, 299.0)
    )
    (rag / "sessions.jsonl").unlink()  # every session killed outright: nothing recorded
    times = run_times(run_dirs)
    assert [(t["sessions"], t["samples"], t["wall_seconds"]) for t in times] == [
        (2, 8, 400.0),
        (0, 0, 0),
    ]
    lines = run_time_report(times).splitlines()
    assert "| full | 2 | 8 | 400.0 | 395.0 | 5.0 | 1.25% |" in lines
    assert "| rag | 0 | 0 | 0.0 | 0.0 | 0.0 | - |" in lines
    assert "| **total** | 2 | 8 | 400.0 | 395.0 | 5.0 | 1.25% |" in lines


def test_report_of_a_folder_without_a_run_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(eval_group, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert (
        result.stderr.strip() == f"longread: error: {tmp_path} is not a run folder (no config.json)"
    )


@pytest.fixture
def no_matplotlib(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)


async def test_plotting_without_matplotlib_says_how_to_get_it(run_dirs, tmp_path, no_matplotlib):
    rows = load_runs(run_dirs)
    with pytest.raises(UsageError) as error:
        plot_accuracy(rows, tmp_path / "plot.png")
    assert str(error.value) == "plotting needs matplotlib: pip install 'longread[eval]'"
    args = ["report", str(run_dirs[0]), "--plot", str(tmp_path / "plot.png")]
    result = CliRunner().invoke(eval_group, args)
    assert result.exit_code == 2
    assert "pip install 'longread[eval]'" in result.stderr
    assert not (tmp_path / "plot.png").exists()


async def test_plot_is_written(run_dirs, tmp_path):
    pytest.importorskip("matplotlib")
    plot_accuracy(load_runs(run_dirs), tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes().startswith(b"\x89PNG")
    new_folder = tmp_path / "docs" / "new"  # outputs into folders that do not exist yet
    args = ["report", *map(str, run_dirs), "--plot", str(new_folder / "p.png")]
    result = CliRunner().invoke(eval_group, [*args, "--markdown", str(new_folder / "r.md")])
    assert result.exit_code == 0, result.output
    assert (new_folder / "p.png").read_bytes().startswith(b"\x89PNG")
    assert (new_folder / "r.md").read_text().startswith("# Evaluation report")
    with pytest.raises(UsageError, match="no sample has a numeric context length"):
        plot_accuracy([], tmp_path / "empty.png")


async def test_a_damaged_session_log_is_a_one_line_error(run_dirs):
    full = run_dirs[0]
    with (full / "sessions.jsonl").open("a") as log:
        log.write('{"ran": 3, "wall_sec\n')  # cut short
    result = CliRunner().invoke(eval_group, ["report", str(full)])
    assert result.exit_code == 2
    assert result.stderr == f"longread: error: {full / 'sessions.jsonl'}:2: not a session record\n"


def test_length_ticks_read_like_the_papers():
    from longread.eval.report import _tick_label

    assert [_tick_label(x) for x in (2048, 8192, 131072, 1 << 20, 3500, 50)] == [
        "2K",
        "8K",
        "128K",
        "1M",
        "3500",
        "50",
    ]


def corrupt(run_dir) -> None:
    """Overwrite the run's results database with bytes that are not SQLite."""
    for name in ("results.sqlite", "results.sqlite-wal", "results.sqlite-shm"):
        (run_dir / name).unlink(missing_ok=True)
    (run_dir / "results.sqlite").write_bytes(b"\x00garbage, not a database\n" * 200)


async def test_a_corrupt_results_database_is_a_one_line_error(run_dirs):
    corrupt(run_dirs[0])
    result = CliRunner().invoke(cli, ["eval", "report", *map(str, run_dirs)])
    assert result.exit_code == 2, result.output
    database = run_dirs[0] / "results.sqlite"
    assert result.stderr.startswith(f"longread: error: {database} is not a readable results")
    assert len(result.stderr.splitlines()) == 1


async def test_rows_with_bad_json_are_skipped_and_counted(run_dirs):
    full = run_dirs[0]
    db = sqlite3.connect(full / "results.sqlite")
    with db:
        db.execute("""UPDATE results SET score = '{"sub_em": 1.0' WHERE sample_id = 'a1'""")
        db.execute("UPDATE results SET cost = 'null' WHERE sample_id = 'b2'")
    db.close()
    result = CliRunner().invoke(cli, ["eval", "report", str(full)])
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"longread: warning: {full / 'results.sqlite'}: skipped 2 unreadable rows "
        "(score or cost not valid JSON): a1, b2\n"
    )
    rows = table_rows(result.stdout)
    assert rows[("toy", "1000", "full")][0] == "3"  # a2, a3, a4 of the four
    assert rows[("toy", "8000", "full")][0] == "1"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("blocker/r.md", "blocker is not a folder"),
        ("blocker/sub/r.md", "blocker is not a folder"),
    ],
)
async def test_an_output_path_that_cannot_be_created_is_a_one_line_error(
    run_dirs, tmp_path, target, message
):
    (tmp_path / "blocker").write_text("a file where a folder should be")
    args = ["eval", "report", str(run_dirs[0]), "--markdown", str(tmp_path / target)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("longread: error: --markdown") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1


async def test_an_exit_gate_run_reports_the_share_of_the_document_read(tmp_path):
    """Every update ends with <exit/>: reading stops after the first chunk of each sample,
    and the report's read column says so (it is absent for runs without the gate). b1's
    answer is in its first chunk, b2's in its last: b2 stopped before its evidence."""
    from dataclasses import replace

    from longread.agents import make_agent, make_config

    replies = dict.fromkeys(["b1", "b2"], "\\boxed{Paris} <exit/>")
    answers = backend(replies, {})
    config = make_config("memagent", exit_gate=True, chunk_tokens=300)
    long = " ".join(f"Line {i} of a long document." for i in range(200))  # 1,200 words
    where = {"b1": f"The capital is Paris. {long}", "b2": f"{long} The capital is Paris."}
    samples = [replace(s, context=where[s.id]) for s in TOY[4:]]

    def gated(progress):
        return make_agent("memagent", answers, answers.tokenizer, config, progress)

    with open_store(tmp_path / "g", "memagent") as store:
        await run_eval(samples, gated, store, 1, progress=False)
    rows = load_runs([tmp_path / "g"])
    assert all(r["chunks_read"] == 1 and r["chunks"] >= 4 for r in rows)
    share = mean(1 / r["chunks"] for r in rows)
    markdown = markdown_report(rows)
    assert "| read |" in markdown
    (cells,) = table_rows(markdown).values()
    assert cells[-2:] == [f"{100 * share:.0f}%", "1 of 2"]
    assert [r["exit_before_evidence"] for r in rows] == [False, True]


async def test_the_report_counts_recalls_that_brought_back_the_answer_and_rereads(tmp_path):
    """ReMemR1's recalls (and the samples where one brought back a gold answer, from the
    step records) and MemReread's rereads get columns of their own, and both agents the share
    of their format-bound calls that kept the format."""
    from dataclasses import replace

    from longread.agents.rememr1 import ReMemR1, ReMemR1Config

    from .scripted import ScriptedBackend, WordTokenizer

    def update(memory: str, recall: str | None = None) -> str:
        asked = f"<recall>{recall}</recall>" if recall else ""
        return f"<update>{memory}</update>{asked}"

    replies = [
        update("Warehouse Delta's door code is 4720519."),  # the fact, first
        "Nothing about parcels.",  # no <update> tag: a format error, the memory kept
        update("The amber parcel went to Warehouse Delta.", recall="Warehouse Delta code"),
        "\\boxed{4720519}",
    ]
    scripted = ScriptedBackend(replies)
    config = ReMemR1Config(chunk_tokens=6)
    doc = "Delta code is 4720519 here. Filler words only here now. Amber parcel went to Delta."
    (one,) = [replace(s, context=doc, answers=["4720519"]) for s in TOY[:1]]

    def rememr1(progress):
        return ReMemR1(scripted, WordTokenizer(), config, progress)

    with open_store(tmp_path / "m", "rememr1") as store:
        await run_eval([one], rememr1, store, 1, progress=False)
    (row,) = load_runs([tmp_path / "m"])
    assert (row["recalls"], row["recall_hits"]) == (1, 1)
    assert (row["formatted_calls"], row["format_errors"]) == (3, 1)
    markdown = markdown_report([row])
    assert "| recalls | samples a recall helped | well formed |" in markdown
    (cells,) = table_rows(markdown).values()
    assert cells[-3:] == ["1.0", "1 of 1", "67% of 3"]

    from longread.agents.memreread import MemReread, MemRereadConfig

    from .test_memreread import Router

    router = Router(["<subquestion>Which warehouse got the parcel?</subquestion>", "<stop/>"])
    rereader = ScriptedBackend([router] * 20)

    def memreread(progress):
        return MemReread(rereader, WordTokenizer(), MemRereadConfig(chunk_tokens=6), progress)

    with open_store(tmp_path / "r", "memreread") as store:
        await run_eval([one], memreread, store, 1, progress=False)
    (reread,) = load_runs([tmp_path / "r"])
    assert reread["rereads"] == 1 and "recalls" not in reread
    both = markdown_report([row, reread])
    assert "| recalls | samples a recall helped | rereads | well formed |" in both
    cells = table_rows(both)
    assert [c[-4:] for c in cells.values()] == [
        ["-", "-", "1.0", "100% of 2"],
        ["1.0", "1 of 1", "-", "67% of 3"],
    ]
