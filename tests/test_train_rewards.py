"""Reward functions on small hand-built runs (ALGORITHMS.md sections 2, 3 and 5). Every
expected value is worked out by hand in the comments next to it."""

import pytest

from longread.agents.memagent import NO_MEMORY
from longread.trace import FORMAT_ERROR, MEMORY_KEPT, NO_BOXED_ANSWER, Recall, Run, Step
from longread.train.rewards import (
    StepReward,
    contained_reward,
    final_memory,
    group_rewards,
    memory_recall_reward,
    outcome_reward,
    rememr1_step_rewards,
    reread_count,
)


def step(
    kind: str,
    index: int,
    *,
    prompt: str = "prompt",
    reply: str = "",
    memory: str | None = None,
    flags: tuple[str, ...] = (),
    recall: Recall | None = None,
) -> Step:
    return Step(
        kind=kind,
        step=index,
        messages=[{"role": "user", "content": prompt}],
        reply=reply,
        finish_reason="stop",
        prompt_tokens=1,
        completion_tokens=1,
        seconds=0.0,
        memory=memory,
        flags=list(flags),
        recall=recall,
    )


def run_of(final_reply: str, steps: list[Step] | None = None, agent: str = "rememr1") -> Run:
    return Run(
        agent=agent,
        question="Who hosted the meeting?",
        answer=final_reply,
        final_reply=final_reply,
        boxed="\\boxed{" in final_reply,
        steps=steps if steps is not None else [step("final", 0, reply=final_reply)],
        seconds=0.0,
    )


# --- outcome (section 5, strict) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("final_reply", "golds", "expected"),
    [
        # "new york" -> "newyork" on both sides: equal
        ("So the answer is \\boxed{New York}.", ["new york"], 1.0),
        # spaces do not count: "newyork" == "newyork" (second alias)
        ("\\boxed{NewYork}", ["New York City", "New York"], 1.0),
        # LaTeX text wrapper peeled by the scorer: "\text{Paris}" -> "paris"
        ("\\boxed{\\text{Paris}}", ["Paris"], 1.0),
        # the last box is the answer: "paris" != "lyon"
        ("\\boxed{Lyon} no wait \\boxed{Paris}", ["Lyon"], 0.0),
        # punctuation counts in strict: "newyork." != "newyork"
        ("\\boxed{New York.}", ["new york"], 0.0),
        # equality, not containment: "newyorkcity" != "newyork"
        ("\\boxed{New York City}", ["new york"], 0.0),
        # no box: strict gives nothing even for the right words
        ("New York", ["new york"], 0.0),
        # an empty box is a null
        ("\\boxed{}", ["new york"], 0.0),
    ],
)
def test_outcome_reward_is_the_strict_judge(final_reply, golds, expected):
    assert outcome_reward(run_of(final_reply), golds) == expected


def test_outcome_reward_passes_the_scoring_kind_through():
    # ruler with two needles: the values {"a1", "b2"} equal the needle set -> 1.0;
    # qa compares the whole "a1,b2" with each alias -> 0.0
    run = run_of("\\boxed{a1, b2}")
    assert outcome_reward(run, ["a1", "b2"], kind="ruler") == 1.0
    assert outcome_reward(run, ["a1", "b2"]) == 0.0


def test_group_rewards_maps_a_reward_over_the_rollouts_in_order():
    runs = [run_of("\\boxed{Carla}"), run_of("\\boxed{Bob}"), run_of("\\boxed{carla}")]
    assert group_rewards(outcome_reward, runs, ["Carla"]) == [1.0, 0.0, 1.0]


# --- partial credit -------------------------------------------------------------------------


def test_memory_recall_reward_reads_the_last_memory_left():
    steps = [
        step("update", 0, memory="Carla lives in Zurich."),
        step("update", 1, memory="Carla lives in New York."),
        step("final", 2, reply="\\boxed{Zurich}"),
    ]
    run = run_of("\\boxed{Zurich}", steps)
    assert final_memory(run) == "Carla lives in New York."
    # alias "New York City": words {new, york, city}; memory has new, york -> 2/3.
    # alias "NYC": {nyc} -> 0. Best: 2/3.
    assert memory_recall_reward(run, ["New York City", "NYC"]) == pytest.approx(2 / 3)


def test_memory_recall_reward_of_memreread_uses_the_integrated_memory():
    # root memory lacks the answer, the reread's sub-memory has it, the integrated memory has
    # it too; the final decide leaves no memory, so the integrate step's is the one.
    steps = [
        step("update", 0, memory="Nothing yet."),
        step("decide", 1),
        step("update", 2, memory="Sub notes: Berlin."),
        step("final", 3, reply="\\boxed{Berlin}"),
        step("integrate", 4, memory="The meeting was in Berlin."),
        step("decide", 5),
        step("final", 6, reply="\\boxed{Berlin}"),
    ]
    run = run_of("\\boxed{Berlin}", steps, agent="memreread")
    assert final_memory(run) == "The meeting was in Berlin."
    # gold words {berlin}, present -> 1/1
    assert memory_recall_reward(run, ["Berlin"]) == 1.0


def test_memory_recall_reward_is_zero_without_memory():
    assert final_memory(run_of("\\boxed{x}")) is None
    assert memory_recall_reward(run_of("\\boxed{x}"), ["x"]) == 0.0


# --- ReMemR1 step rewards (section 2) --------------------------------------------------------

GOLD = ["Carla Mendez"]  # normalised words {carla, mendez}


def rememr1_run() -> Run:
    steps = [
        # format ok; memory has carla -> 1/2; previous = NO_MEMORY "No previous memory" -> 0;
        # update gain 0.5; no recall -> revisit 0. r = 1 + 0.5 + 0 = 1.5
        step(
            "update", 0, prompt="Problem: Who hosted?\nMemory: No previous memory\nThe host came.",
            reply="<update>The host was Carla.</update>", memory="The host was Carla.",
        ),
        # no <update>: format error, old memory kept -> f 0; gain 0.5 - 0.5 = 0;
        # the recall found nothing (memory None) -> revisit 0. r = 0
        step(
            "update", 1, prompt="Problem: Who hosted?\nMemory: The host was Carla.\nRain.",
            reply="Rain. <recall>host</recall>", memory="The host was Carla.",
            flags=(FORMAT_ERROR, MEMORY_KEPT), recall=Recall("host"),
        ),
        # format ok; memory has carla, mendez -> 1; gain 1 - 0.5 = 0.5.
        # prompt has carla only -> 1/2; recalled + prompt has carla, mendez -> 1;
        # revisit max(0, 1 - 0.5) = 0.5. r = 1 + 0.5 + 0.5 = 2.0
        step(
            "update", 2, prompt="Problem: Who hosted?\nMemory: The host was Carla.\nSurnames.",
            reply="<update>Carla Mendez hosted.</update><recall>surname</recall>",
            memory="Carla Mendez hosted.",
            recall=Recall("surname", "[step 0] Mendez is Carla's surname.", 0),
        ),
        # two <recall> blocks: format error though the memory was written -> f 0.
        # memory "Someone hosted." has no gold word -> 0; gain 0 - 1 = -1.
        # recalled "Carla was the host" adds nothing the prompt (carla, mendez) lacks:
        # 1 - 1 = 0. r = 0 - 1 + 0 = -1.0
        step(
            "update", 3, prompt="Problem: Who hosted?\nMemory: Carla Mendez hosted.\nMore.",
            reply="<update>Someone hosted.</update><recall>a</recall><recall>b</recall>",
            memory="Someone hosted.", flags=(FORMAT_ERROR,),
            recall=Recall("b", "[step 2] Carla was the host.", 2),
        ),
        # final: a non-empty box -> f 1; no memory, no recall -> gains 0. r = 1
        step("final", 4, reply="It is \\boxed{Carla Mendez}"),
    ]  # fmt: skip
    return run_of("It is \\boxed{Carla Mendez}", steps)


def test_rememr1_step_rewards_by_hand():
    got = rememr1_step_rewards(rememr1_run(), GOLD)
    assert got == [
        StepReward(0, "update", 1.0, 0.5, 0.0),
        StepReward(1, "update", 0.0, 0.0, 0.0),
        StepReward(2, "update", 1.0, 0.5, 0.5),
        StepReward(3, "update", 0.0, -1.0, 0.0),
        StepReward(4, "final", 1.0, 0.0, 0.0),
    ]
    assert [r.total for r in got] == [1.5, 0.0, 2.0, -1.0, 1.0]


@pytest.mark.parametrize(
    ("reply", "flags", "expected"),
    [
        ("\\boxed{Carla}", (), 1.0),  # one non-empty box
        ("\\boxed{}", (), 0.0),  # empty box
        ("Carla", (NO_BOXED_ANSWER,), 0.0),  # no box
        ("<think>\\boxed{Carla}</think> I do not know", (NO_BOXED_ANSWER,), 0.0),  # box in think
    ],
)
def test_final_step_format_needs_a_non_empty_box(reply, flags, expected):
    run = run_of(reply, [step("final", 0, reply=reply, flags=flags)])
    assert rememr1_step_rewards(run, GOLD) == [StepReward(0, "final", expected, 0.0, 0.0)]


def test_first_update_gain_counts_from_the_placeholder():
    assert NO_MEMORY == "No previous memory"  # the words this hand computation relies on
    # gold "previous results": {previous, results}; the placeholder has previous -> 1/2;
    # new memory "The results." has results -> 1/2; gain 1/2 - 1/2 = 0
    run = run_of("\\boxed{x}", [step("update", 0, memory="The results.")])
    assert rememr1_step_rewards(run, ["previous results"])[0].update_gain == 0.0


def test_rememr1_step_rewards_refuse_memreread_calls():
    run = run_of("\\boxed{x}", [step("decide", 0), step("final", 1, reply="\\boxed{x}")])
    with pytest.raises(ValueError, match="'decide' call"):
        rememr1_step_rewards(run, GOLD)


# --- MemReread (section 3) ------------------------------------------------------------------


def test_reread_count_counts_integrate_calls():
    kinds = ["update", "update", "decide", "update", "update", "final", "integrate",
             "decide", "update", "update", "final", "integrate", "decide", "final"]  # fmt: skip
    steps = [step(kind, i) for i, kind in enumerate(kinds)]
    # two integrate calls (steps 6 and 11)
    assert reread_count(run_of("\\boxed{x}", steps, agent="memreread")) == 2
    assert reread_count(run_of("\\boxed{x}", [step("update", 0), step("final", 1)])) == 0


@pytest.mark.parametrize(
    ("final_reply", "golds", "expected"),
    [
        # "theanswerisnewyorkcity" contains "newyork"
        ("\\boxed{The answer is New York City}", ["new york"], 1.0),
        # "newyork" contains "newyork" (case and spaces ignored)
        ("\\boxed{NEWYORK}", ["New York"], 1.0),
        # "york" does not contain "newyork"
        ("\\boxed{York}", ["New York"], 0.0),
        # the prediction must be boxed
        ("New York", ["New York"], 0.0),
        # empty box: null
        ("\\boxed{}", ["New York"], 0.0),
        # blank aliases never match (they would be in every string)
        ("\\boxed{anything}", ["", "  "], 0.0),
        # second alias: "usa" in "theusa."
        ("\\boxed{The USA.}", ["United States", "USA"], 1.0),
    ],
)
def test_contained_reward(final_reply, golds, expected):
    assert contained_reward(run_of(final_reply), golds) == expected


def test_contained_reward_is_looser_than_the_outcome_reward():
    # "newyorkcity" contains "newyork" but is not equal to it
    run = run_of("\\boxed{New York City}")
    assert contained_reward(run, ["new york"]) == 1.0
    assert outcome_reward(run, ["new york"]) == 0.0


# --- notes the document does not support (made-up answers) ---------------------------------

DOCUMENT = "Filler about hills. The special magic number for calm-planet is: 8981983. More filler."


def notes_run(*memories: str) -> Run:
    steps = [step("update", i, memory=m) for i, m in enumerate(memories)]
    final = step("final", len(memories), reply="\\boxed{8981983}")
    return run_of("\\boxed{8981983}", [*steps, final], agent="memagent")


def test_a_made_up_number_in_the_notes_counts_until_it_is_replaced():
    from longread.train.rewards import unsupported_note_share

    made_up = notes_run(
        "The special magic number for calm-planet is 11.",  # 11: stated nowhere
        "The special magic number for calm-planet is 11.",
        "The special magic number for calm-planet is 8981983.",  # replaced at the needle
        "The special magic number for calm-planet is 8981983.",
    )
    honest = notes_run(
        "Nothing yet.", "Nothing yet.", "calm-planet: 8981983.", "calm-planet: 8981983."
    )
    assert unsupported_note_share(made_up, DOCUMENT) == 0.5  # 2 of 4 updates
    assert unsupported_note_share(honest, DOCUMENT) == 0.0
    # A gold answer is stated even where a state-reset sample's few sections do not hold it.
    carried = notes_run("calm-planet: 8981983.")
    assert unsupported_note_share(carried, "Filler only.", ["8981983"]) == 0.0
    assert unsupported_note_share(carried, "Filler only.") == 1.0


def test_the_group_credit_prefers_the_rollout_that_made_nothing_up():
    from longread.train.credit import group_credit

    made_up = notes_run("Magic number is 11.", "Magic number is 8981983.")
    honest = notes_run("Nothing yet.", "Magic number is 8981983.")
    plain = group_credit([made_up, honest], ["8981983"])
    assert plain.rewards == [1.0, 1.0] and plain.degenerate  # the outcome cannot tell them apart
    penalised = group_credit(
        [made_up, honest], ["8981983"], unsupported_penalty=0.5, document=DOCUMENT
    )
    assert penalised.rewards == [0.75, 1.0] and not penalised.degenerate


# --- no credit before the evidence ----------------------------------------------------------

NEEDLE = "The special magic number for calm-planet is: 8981983."


def sections_run(sections: list[str], memories: list[str], answer: str) -> Run:
    """A memagent run that read ``sections`` (one update prompt each) and answered."""
    steps = [
        step("update", i, prompt=f"Section:\n{text}", memory=m)
        for i, (text, m) in enumerate(zip(sections, memories, strict=True))
    ]
    final = step("final", len(sections), reply=f"\\boxed{{{answer}}}")
    return run_of(f"\\boxed{{{answer}}}", [*steps, final], agent="memagent")


def test_the_steps_before_the_evidence_are_the_filler_sections_read_ahead_of_it():
    from longread.train.rewards import steps_before_evidence

    run = sections_run(["Filler one.", "Filler two.", NEEDLE], ["a", "b", "c"], "8981983")
    assert steps_before_evidence(run, [NEEDLE]) == 2  # the two filler updates
    assert steps_before_evidence(run, []) == 0  # nothing to watch for
    unseen = sections_run(["Filler one.", "Filler two."], ["a", "b"], "11")
    assert steps_before_evidence(unseen, [NEEDLE]) == 0  # never shown: nothing marks it


def test_without_credit_before_the_evidence_filler_turns_are_neither_paid_nor_blamed():
    """A made-up claim at a filler section that the needle later replaced earns its rollout's
    advantage under the papers' broadcast; the "No previous memory" of a failed rollout at the
    same section is blamed. Without credit before the evidence, both filler turns get 0 and the
    turns from the needle's section on keep the outcome's advantage."""
    from longread.train.credit import group_credit

    sections = ["Filler one.", NEEDLE]
    claimed = sections_run(sections, ["calm-planet is 11.", "calm-planet is 8981983."], "8981983")
    skipped = sections_run(sections, [NO_MEMORY, NO_MEMORY], "none")
    broadcast = group_credit([claimed, skipped], ["8981983"], evidence=[NEEDLE])
    assert broadcast.advantages == [[0.5, 0.5, 0.5], [-0.5, -0.5, -0.5]]  # rewards 1 and 0
    masked = group_credit(
        [claimed, skipped], ["8981983"], evidence=[NEEDLE], credit_before_evidence=False
    )
    assert masked.advantages == [[0.0, 0.5, 0.5], [0.0, -0.5, -0.5]]
    assert masked.rewards == broadcast.rewards and not masked.degenerate


def test_the_trainer_config_turns_off_credit_before_the_evidence():
    """`reward.credit_before_evidence = false` reaches the trainer's credit step, which finds
    the evidence itself: the sentence of the sample's document that holds the gold answer."""
    from longread.data.records import Sample
    from longread.train.config import TrainConfig
    from longread.train.rollouts import credit_of

    sample = Sample("s1", "What is the number?", f"Filler one.\n{NEEDLE}", ["8981983"], {})
    sections = ["Filler one.", NEEDLE]
    runs = [
        sections_run(sections, ["calm-planet is 11.", "calm-planet is 8981983."], "8981983"),
        sections_run(sections, [NO_MEMORY, NO_MEMORY], "none"),
    ]

    def credit(**reward):
        config = TrainConfig.from_dict({"data": {"train": ["unused.jsonl"]}, "reward": reward})
        return credit_of(config, sample, runs).advantages

    assert credit() == [[0.5, 0.5, 0.5], [-0.5, -0.5, -0.5]]  # the papers' broadcast
    assert credit(credit_before_evidence=False) == [[0.0, 0.5, 0.5], [0.0, -0.5, -0.5]]


# --- a per-turn term for notes the sections do not hold -------------------------------------

CLAIM_QUESTION = "What is the special magic number for calm-planet mentioned in the text?"


async def grounded_rollout(first_note: str) -> Run:
    """A real memagent run with grounded notes over a filler section, then the needle's: the
    scripted model writes ``first_note`` at the filler and copies the needle at its section.
    Whether the first update is flagged ``notes_ungrounded`` is the agent's own check."""
    from collections.abc import Sequence

    from longread.agents.memagent import MemAgent, MemAgentConfig
    from longread.llm.base import Message
    from longread.text.chunking import Chunk

    from .scripted import ScriptedBackend, WordTokenizer

    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            return "\\boxed{8981983}"
        return NEEDLE if "8981983" in prompt.split("Section:", 1)[1] else first_note

    tok = WordTokenizer()
    sections = ["The hills were quiet that year.", NEEDLE]
    chunks = [Chunk(i, t, tok.count(t)) for i, t in enumerate(sections)]
    agent = MemAgent(ScriptedBackend([reply] * 3), tok, MemAgentConfig(grounded_notes=True))
    return await agent.run(CLAIM_QUESTION, chunks)


async def test_a_claim_before_the_needle_loses_against_the_rollout_that_wrote_none():
    """Both rollouts find the needle, so the outcome cannot tell them apart (a degenerate group
    the papers drop). The one that claimed a value at the filler section is cut by grounded
    notes; with the penalty that update is pushed down and the other's "No previous memory"
    up, by half the weight each (half the group was flagged there), and nothing else moves."""
    from longread.trace import NOTES_UNGROUNDED
    from longread.train.credit import group_credit

    claimed = await grounded_rollout("The special magic number for calm-planet is 11.")
    honest = await grounded_rollout(NO_MEMORY)
    assert NOTES_UNGROUNDED in claimed.steps[0].flags
    assert not any(NOTES_UNGROUNDED in s.flags for s in honest.steps)
    plain = group_credit([claimed, honest], ["8981983"])
    assert plain.degenerate and plain.advantages == [[0.0] * 3, [0.0] * 3]
    turned = group_credit([claimed, honest], ["8981983"], ungrounded_penalty=0.4)
    assert turned.advantages == [[-0.2, 0.0, 0.0], [0.2, 0.0, 0.0]]
    assert turned.rewards == plain.rewards and not turned.degenerate
    alike = group_credit([claimed, claimed], ["8981983"], ungrounded_penalty=0.4)
    assert alike.degenerate  # every rollout claimed: nothing to prefer


async def test_the_ungrounded_penalty_needs_grounded_notes_and_reaches_the_credit_step():
    from longread.data.records import Sample
    from longread.errors import UsageError
    from longread.train.config import TrainConfig
    from longread.train.rollouts import credit_of

    raw: dict = {"data": {"train": ["unused.jsonl"]}, "reward": {"ungrounded_penalty": 0.4}}
    with pytest.raises(UsageError, match="grounded_notes = true"):
        TrainConfig.from_dict(raw).check()
    raw["agent"] = {"options": {"grounded_notes": True}}
    config = TrainConfig.from_dict(raw)
    config.check()  # accepted
    sample = Sample("s1", CLAIM_QUESTION, f"The hills were quiet that year.\n{NEEDLE}", ["8981983"])
    runs = [await grounded_rollout("The special magic number for calm-planet is 11."),
            await grounded_rollout(NO_MEMORY)]  # fmt: skip
    assert credit_of(config, sample, runs).advantages == [[-0.2, 0.0, 0.0], [0.2, 0.0, 0.0]]
    raw["reward"] = {"ungrounded_penalty": -1.0}
    with pytest.raises(UsageError, match="sizes: 0 or more"):
        TrainConfig.from_dict(raw).check()
