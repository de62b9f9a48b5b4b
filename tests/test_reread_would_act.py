"""recipes/smollm2/reread_would_act.py: the replay behind stop 54's claim that a run made
without focused rereads is the same run with them on wherever the option never acts. Checked
against the agent itself: the replay of a run without the option names exactly the updates
where the run with it reread or restored."""

from __future__ import annotations

from dataclasses import replace

from longread.agents.memagent import MemAgent, MemAgentConfig
from longread.trace import FOCUS_QUOTED, FOCUSED_REREAD, NOTES_RESTORED

from .script_loader import load_script
from .scripted import WordTokenizer
from .test_focused_reread import (
    DECOY,
    ECHO,
    GREENHOUSE_NEEDLE,
    NEEDLE,
    PROSE,
    QUESTION,
    SECTION,
    STOP55,
    chunks_of,
    greenhouse_reading,
    needle_then,
    reading,
    run_greenhouse,
)

would_act = load_script("recipes/smollm2/reread_would_act.py")
GENERIC = 'The rule "strings" and the token "NUMBER" are defined in the standard grammar.'


async def replay_and_run(make_backend, chunks, plain: MemAgentConfig):
    """The replay's verdict on the run without the option, and the run with it."""
    without = await MemAgent(make_backend(), WordTokenizer(), plain).run(QUESTION, chunks)
    on = replace(plain, focused_reread=True)
    with_option = await MemAgent(make_backend(), WordTokenizer(), on).run(QUESTION, chunks)
    return would_act.acts(without, on), without, with_option


def acted(run) -> list[str]:
    """Where the run with the option reread or restored, in the replay's words."""
    found = []
    for step in run.steps:
        if FOCUSED_REREAD in step.flags:
            found.append(f"reread at step {step.step - 1}")  # the reread follows its update
        elif NOTES_RESTORED in step.flags:
            found.append(f"restore at step {step.step}")
    return found


async def test_the_replay_names_the_reread_the_agent_made():
    chunks = chunks_of("Filler about kettles.", SECTION, "Last filler.")
    found, without, on = await replay_and_run(
        lambda: reading(PROSE), chunks, MemAgentConfig(focused_notes=True)
    )
    assert found == acted(on) == ["reread at step 1"]
    assert (without.answer, on.answer) == ("1", "4243307")


async def test_the_replay_names_the_restore_the_agent_made():
    chunks = chunks_of(NEEDLE, f"{GENERIC} {PROSE}")
    found, without, on = await replay_and_run(
        lambda: needle_then(GENERIC), chunks, MemAgentConfig()
    )
    assert found == acted(on) == ["restore at step 1"]
    assert (without.answer, on.answer) == ("0", "4243307")


async def test_where_the_replay_finds_nothing_the_runs_are_the_same():
    chunks = chunks_of("Filler about kettles.", SECTION, f"{PROSE} {DECOY}")
    found, without, on = await replay_and_run(
        lambda: reading(NEEDLE), chunks, MemAgentConfig(focused_notes=True)
    )
    assert found == acted(on) == []
    assert [s.messages for s in without.steps] == [s.messages for s in on.steps]
    assert [s.memory for s in without.steps] == [s.memory for s in on.steps]


async def test_the_quote_replay_names_the_reread_the_shipped_rule_quotes():
    """``--quotes``: on a run made with stop 55's rule, the rereads whose notes restate
    nothing (here the question written back) are where the shipped rule quotes the needle."""
    for reply in (ECHO, GREENHOUSE_NEEDLE):
        stop55 = await run_greenhouse(greenhouse_reading(reply), **STOP55)
        shipped = await run_greenhouse(greenhouse_reading(reply))
        quoted = [f"quote at step {s.step}" for s in shipped.steps if FOCUS_QUOTED in s.flags]
        assert would_act.would_quote(stop55, MemAgentConfig(focused_reread=True)) == quoted
        assert bool(quoted) == (reply == ECHO)


async def test_the_earlier_rule_runner_reads_as_stop_55_did(monkeypatch):
    """recipes/smollm2/earlier_rule.py, behind the stop-55 ablation cells: every config made
    under it carries stop 55's rule, which answers the echoed question with a guess."""
    monkeypatch.setattr(MemAgentConfig, "__post_init__", MemAgentConfig.__post_init__)
    load_script("recipes/smollm2/earlier_rule.py").with_rule("stop55")
    assert MemAgentConfig(focused_reread=True).reread_quotes is False
    run = await run_greenhouse(greenhouse_reading(ECHO))
    assert run.answer == "18" and not any(FOCUS_QUOTED in s.flags for s in run.steps)
