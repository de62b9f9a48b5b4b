"""Where would ``--focused-reread on`` act on a run made without it?

A run with the option is the run without it, call for call, up to the first update where the
option acts: a reread call (the update left no note about the question, or gave up a note
restating it, and a sentence of the section restates enough of the question) or a restore
(the notes given up are kept). So replaying the option's test on the traces of a run made
without it says which samples the option can change; a run where it never acts is the same
run with the option on. Prints, per folder, the samples where it would act and how, and the
verdict. Stop 55's rule (shipped) acts on none of grpo26b's niah_single_2 samples at 8K-64K nor
niah_single_3 8K, and on 5, 4 and 5 of 20 HotpotQA samples at 2K, 8K and 16K; stop 54's
(``--stop54``) on 0, 3 and 3; stop 53's (``--stop53``) restores copied filler that shares a
key's word in 5 of 20 samples at 32K and 4 of 10 at 64K. A note's cited sentence is read from
the traces' sources (the run's provenance less its fuzzy inheritance).
``--made-with RUN`` checks the claim on a run made with the option (HotpotQA 2K: the same
calls in 20 of 20 samples). Stop 56's rule makes the same rereads (the replay prints the same
lines; ``--stop55`` for the rule before) and quotes the shown sentences where a reread's notes
still restate nothing: ``--quotes`` names those rereads on runs made with stop 55's rule (its
greenhouse run: 7 of 20 samples, its 7 misses; HotpotQA 2K, 8K, 16K: 3, 1 and 2 of 20).

    .venv/bin/python recipes/smollm2/reread_would_act.py \\
      results/v2/runs/memagent-grpo26b-run-step6-ruler_niah_single_2-65536-notes+focused
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longread.agents.memagent import NO_MEMORY, MemAgentConfig, missed_question
from longread.citations.align import note_key
from longread.citations.focus import Restating, focus_sentences, lost_notes, restates
from longread.trace import FOCUSED_REREAD, Run


def section_of(prompt: str) -> str:
    """The section an update prompt showed, in the papers' order or section first."""
    if prompt.find("Section:\n") < prompt.find("Problem: "):  # section first
        return prompt.split("Section:\n", 1)[1].split("\n\nProblem: ", 1)[0]
    return prompt.split("\n\nSection:\n", 1)[1].split("\n\nUpdate the memory", 1)[0]


def acts(run: Run, config: MemAgentConfig) -> list[str]:
    """How the option would act at each update of ``run`` where it would: "reread at step N"
    or "restore at step N" (the agent's own test, ``missed_question``). With
    ``reread_cites``, a note's cited sentence is the one its step's sources recorded for a
    note of the same words (the run's provenance, less its fuzzy inheritance)."""
    before, found, quotes = NO_MEMORY, [], {}
    cited = (lambda note: quotes.get(note_key(note))) if config.reread_cites else None
    rule = Restating(run.question, config.keep_notes_share, cited, config.reread_quotes)
    for step in run.steps:
        quotes.update({note_key(span.line): span.quote for span in step.sources or []})
        if step.kind != "update" or FOCUSED_REREAD in step.flags:
            continue
        step.memory = after = step.memory or before
        if missed_question(config, rule, before, step):
            section = section_of(step.messages[-1]["content"])
            if focus_sentences(section, run.question, least_share=config.reread_least_share):
                found.append(f"reread at step {step.step}")
            elif lost_notes(before, after, rule):
                found.append(f"restore at step {step.step}")
        before = after
    return found


def would_quote(run: Run, config: MemAgentConfig) -> list[str]:
    """On a run made with stop 55's rule (``reread_quotes`` false): "quote at step N" for each
    reread whose memory restates the question by none of its notes (a question never counts;
    a note's cited sentence as in ``acts``), where the shipped rule puts the shown sentences
    in the memory. The run is the same with the shipped rule up to the first of these."""
    found, quotes = [], {}
    cited = (lambda note: quotes.get(note_key(note))) if config.reread_cites else None
    for step in run.steps:
        quotes.update({note_key(span.line): span.quote for span in step.sources or []})
        if FOCUSED_REREAD not in step.flags:
            continue
        memory = step.memory or NO_MEMORY
        if not restates(memory, Restating(run.question, config.keep_notes_share, cited, True)):
            found.append(f"quote at step {step.step}")
    return found


def same_calls(without: Path, made_with: Path) -> None:
    """Print how many samples of ``made_with`` made the same calls as in ``without``."""
    same, paths = 0, sorted((without / "traces").glob("*.json"))
    for path in paths:
        a, b = Run.load(path), Run.load(made_with / "traces" / path.name)
        calls = [[(s.messages, s.reply) for s in run.steps] for run in (a, b)]
        same += calls[0] == calls[1]
    print(f"{made_with.name}: {same} of {len(paths)} samples made the same calls as {without.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders made without it")
    parser.add_argument(
        "--stop53", action="store_true", help="stop 53's rule: one shared term, two for a reread"
    )
    parser.add_argument(
        "--stop54",
        action="store_true",
        help="stop 54's rule: reread only after an update that left no note about the question",
    )
    parser.add_argument(
        "--stop55",
        action="store_true",
        help="stop 55's rule: a note that is a question counts as restating it",
    )
    parser.add_argument(
        "--quotes",
        action="store_true",
        help="on runs made with stop 55's rule: the rereads the shipped rule would quote",
    )
    parser.add_argument(
        "--made-with",
        type=Path,
        help="a run folder of the same data made with the option: count the samples whose "
        "calls (prompts and replies) are the same as the first folder's",
    )
    args = parser.parse_args()
    if args.made_with:
        same_calls(args.runs[0], args.made_with)
        return
    config = MemAgentConfig(focused_reread=True)
    if args.stop53:
        config = MemAgentConfig(
            focused_reread=True,
            reread_least_share=0,
            keep_notes_share=0,
            reread_unrestated=False,
            reread_cites=False,
            reread_quotes=False,
        )
    if args.stop54:
        config = MemAgentConfig(
            focused_reread=True, reread_unrestated=False, reread_cites=False, reread_quotes=False
        )
    if args.stop55:
        config = MemAgentConfig(focused_reread=True, reread_quotes=False)
    for run in args.runs:
        changed = 0
        traces = sorted((run / "traces").glob("*.json"))
        for path in traces:
            trace = Run.load(path)
            found = would_quote(trace, config) if args.quotes else acts(trace, config)
            if found:
                changed += 1
                print(f"  {trace.sample_id}: {', '.join(found[:4])}")
        verdict = "the same run with the rule on" if not changed else "may differ"
        print(f"{run.name}: acts in {changed} of {len(traces)} samples: {verdict}")


if __name__ == "__main__":
    main()
