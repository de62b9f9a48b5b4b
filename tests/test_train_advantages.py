"""Group advantages (ALGORITHMS.md sections 2, 3 and 7). Every expected value is worked out by
hand in the comments next to it, never produced by the code under test."""

import math

import pytest

from longread.train.advantages import (
    broadcast,
    centred_step_terms,
    group_is_degenerate,
    grpo_advantages,
    mix_rea,
    rea_advantages,
    rememr1_advantages,
)

# --- GRPO (section 7) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        # mean 0.5 -> 1-0.5, 0-0.5, 0-0.5, 1-0.5
        ([1.0, 0.0, 0.0, 1.0], [0.5, -0.5, -0.5, 0.5]),
        # mean 1/4 -> 0.75, then -0.25 three times
        ([1.0, 0.0, 0.0, 0.0], [0.75, -0.25, -0.25, -0.25]),
        # mean (0.5 + 0.25) / 2 = 0.375 -> 0.125, -0.125
        ([0.5, 0.25], [0.125, -0.125]),
        # all equal: every reward is the mean
        ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0]),
        # a group of one is its own mean
        ([1.0], [0.0]),
        ([], []),
    ],
)
def test_grpo_subtracts_the_group_mean(rewards, expected):
    assert grpo_advantages(rewards) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        # mean 0.25; squared deviations 0.5625 + 3 * 0.0625 = 0.75; / (n - 1 = 3) = 0.25;
        # std 0.5 -> 0.75 / 0.5 = 1.5 and -0.25 / 0.5 = -0.5
        ([1.0, 0.0, 0.0, 0.0], [1.5, -0.5, -0.5, -0.5]),
        # mean 0.5; squared deviations 4 * 0.25 = 1; / 3 -> std sqrt(1/3) = 0.57735;
        # 0.5 / 0.57735 = sqrt(3) / 2 = 0.866025
        ([1.0, 0.0, 0.0, 1.0], [0.866025, -0.866025, -0.866025, 0.866025]),
        # std 0: 0 / (0 + eps) stays 0, no NaN
        ([1.0, 1.0], [0.0, 0.0]),
        # one rollout: no std to divide by; advantage 0
        ([1.0], [0.0]),
    ],
)
def test_grpo_divides_by_the_sample_std_when_asked(rewards, expected):
    got = grpo_advantages(rewards, std_normalise=True, eps=0.0)
    assert got == pytest.approx(expected, abs=1e-6)


def test_grpo_std_division_adds_eps_to_the_std():
    # mean 0.5, sample std of [1, 0] = sqrt((0.25 + 0.25) / 1) = 0.707107; eps 0.1 ->
    # 0.5 / 0.807107 = 0.619496
    got = grpo_advantages([1.0, 0.0], std_normalise=True, eps=0.1)
    assert got == pytest.approx([0.619496, -0.619496], abs=1e-6)


def test_broadcast_gives_the_rollout_advantage_to_every_step():
    assert broadcast(0.25, 3) == [0.25, 0.25, 0.25]
    assert broadcast(-1.0, 1) == [-1.0]
    assert broadcast(0.5, 0) == []
    with pytest.raises(ValueError, match="n_steps"):
        broadcast(0.5, -1)


@pytest.mark.parametrize(
    ("rewards", "degenerate"),
    [
        ([1.0, 1.0, 1.0], True),
        ([0.0, 0.0], True),
        ([0.5], True),
        ([], True),
        ([1.0, 0.0, 1.0], False),
        ([0.25, 0.5], False),
    ],
)
def test_a_group_is_degenerate_when_all_rewards_are_equal(rewards, degenerate):
    assert group_is_degenerate(rewards) is degenerate


# --- ReMemR1 (section 2) --------------------------------------------------------------------


def test_step_terms_are_centred_per_step_index_over_the_rollouts_that_have_that_step():
    # t0: mean (2 + 1 + 0) / 3 = 1;  t1: mean (1 + 0 + 2) / 3 = 1;
    # t2: only A and C -> (2 + 0) / 2 = 1;  t3: only C -> 5, so C's t3 is 5 - 5 = 0
    steps = [[2.0, 1.0, 2.0], [1.0, 0.0], [0.0, 2.0, 0.0, 5.0]]
    assert centred_step_terms(steps) == [
        [1.0, 0.0, 1.0],
        [0.0, -1.0],
        [-1.0, 1.0, -1.0, 0.0],
    ]


def test_rememr1_mixes_outcome_and_step_terms_with_the_weights_as_written():
    outcomes = [1.0, 0.0, 0.0]
    steps = [[2.0, 1.0, 2.0], [1.0, 0.0], [0.0, 2.0, 0.0, 5.0]]
    # outcome mean 1/3 -> A: 2/3, B and C: -1/3; times alpha 0.8 -> 8/15, -4/15, -4/15.
    # centred step terms (previous test): A [1, 0, 1], B [0, -1], C [-1, 1, -1, 0];
    # times 1 - alpha = 0.2 = 3/15 -> A [3, 0, 3]/15, B [0, -3]/15, C [-3, 3, -3, 0]/15.
    expected = [
        [11 / 15, 8 / 15, 11 / 15],  # 8/15 + 3/15, 8/15 + 0, 8/15 + 3/15
        [-4 / 15, -7 / 15],  # -4/15 + 0, -4/15 - 3/15
        [-7 / 15, -1 / 15, -7 / 15, -4 / 15],  # -4/15 -3/15, -4/15 + 3/15, ..., -4/15 + 0
    ]
    got = rememr1_advantages(outcomes, steps)
    assert [len(a) for a in got] == [3, 2, 4]
    for row, want in zip(got, expected, strict=True):
        assert row == pytest.approx(want)


def test_rememr1_does_not_double_the_step_term():
    # alpha 0.5: outcome term 0.5 * (1 - 0.5) = 0.25, step term 0.5 * (1 - 0.5) = 0.25 -> 0.5.
    # The reference's doubled step term would give 0.25 + 2 * 0.25 = 0.75.
    got = rememr1_advantages([1.0, 0.0], [[1.0], [0.0]], alpha=0.5)
    assert got == [pytest.approx([0.5]), pytest.approx([-0.5])]


def test_rememr1_with_alpha_one_is_the_outcome_advantage_on_every_step():
    # mean 0.5 -> +0.5 on both steps of the first rollout, -0.5 on the second's three
    got = rememr1_advantages([1.0, 0.0], [[9.0, -3.0], [0.0, 0.0, 7.0]], alpha=1.0)
    assert got == [pytest.approx([0.5, 0.5]), pytest.approx([-0.5, -0.5, -0.5])]


def test_rememr1_refuses_mismatched_groups():
    with pytest.raises(ValueError, match="2 outcomes but 1 rollouts"):
        rememr1_advantages([1.0, 0.0], [[1.0]])
    with pytest.raises(ValueError, match="alpha"):
        rememr1_advantages([1.0], [[1.0]], alpha=1.5)


# --- ReA (section 3) ------------------------------------------------------------------------

SQRT2 = math.sqrt(2)
SQRT1_5 = math.sqrt(1.5)
E1 = math.exp(-1)  # 0.367879
E2 = math.exp(-2)  # 0.135335


@pytest.mark.parametrize(
    ("rewards", "rereads", "expected"),
    [
        # all correct: -k = [0, -1, -2, -1], mean -1, deviations [1, 0, -1, 0],
        # population variance 2/4 = 0.5, std sqrt(0.5) -> z = [sqrt 2, 0, -sqrt 2, 0]
        ([1.0, 1.0, 1.0, 1.0], [0, 1, 2, 1], [SQRT2, 0.0, -SQRT2, 0.0]),
        # all wrong (0.5 is not above 0.9): +k = [0, 2, 1], mean 1, deviations [-1, 1, 0],
        # variance 2/3, std sqrt(2/3) -> 1 / sqrt(2/3) = sqrt(1.5) = 1.224745
        ([0.0, 0.0, 0.5], [0, 2, 1], [-SQRT1_5, SQRT1_5, 0.0]),
        # mixed. correct: #0 (k 0), #2 (k 1), #4 (k 0): exp(-k) = 1, e^-1, 1; sum 2 + e^-1
        #   -> 1 / 2.367879 = 0.422319 and e^-1 / 2.367879 = 0.155362
        # wrong: #1 (k 1), #3 (k 2): e^-1, e^-2; sum 0.503215
        #   -> -0.367879 / 0.503215 = -0.731059 and -0.135335 / 0.503215 = -0.268941
        (
            [1.0, 0.0, 1.0, 0.0, 1.0],
            [0, 1, 1, 2, 0],
            [1 / (2 + E1), -E1 / (E1 + E2), E1 / (2 + E1), -E2 / (E1 + E2), 1 / (2 + E1)],
        ),
    ],
)
def test_rea_cases(rewards, rereads, expected):
    assert rea_advantages(rewards, rereads) == pytest.approx(expected)


def test_rea_mixed_values_by_number():
    # The same mixed group as above, as decimals worked out by hand.
    got = rea_advantages([1.0, 0.0, 1.0, 0.0, 1.0], [0, 1, 1, 2, 0])
    assert got == pytest.approx([0.422319, -0.731059, 0.155362, -0.268941, 0.422319], abs=1e-6)


@pytest.mark.parametrize(
    ("rewards", "rereads", "expected"),
    [
        # all correct, all k equal: std 0 -> z-score 0 (no NaN)
        ([1.0, 1.0, 1.0], [1, 1, 1], [0.0, 0.0, 0.0]),
        # all wrong, all k equal: the same
        ([0.0, 0.0], [2, 2], [0.0, 0.0]),
        # one correct rollout: a group of one, std 0 -> 0
        ([1.0], [3], [0.0]),
        # mixed with ties: two correct share 1/2 each, three wrong share -1/3 each
        ([1.0, 1.0, 0.0, 0.0, 0.0], [2, 2, 1, 1, 1], [0.5, 0.5, -1 / 3, -1 / 3, -1 / 3]),
        # theta is strict: 0.9 is wrong, 0.95 correct; each alone in its set -> -1 and +1
        ([0.9, 0.95], [0, 0], [-1.0, 1.0]),
        ([], [], []),
    ],
)
def test_rea_ties_and_edges(rewards, rereads, expected):
    got = rea_advantages(rewards, rereads)
    assert got == pytest.approx(expected)
    assert not any(math.isnan(a) for a in got)


def test_rea_theta_is_a_parameter():
    # theta 0.4: 0.5 is now correct, 0.0 wrong -> each alone in its set: +1 and -1
    assert rea_advantages([0.5, 0.0], [3, 1], theta=0.4) == pytest.approx([1.0, -1.0])


def test_rea_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="2 rewards but 1 reread"):
        rea_advantages([1.0, 0.0], [1])


def test_mix_rea_adds_a_small_step_term():
    # (1 - 0.05) * 0.5 = 0.475; + 0.05 * 1 = 0.525, + 0.05 * -1 = 0.425
    # (1 - 0.05) * -0.5 = -0.475; + 0.05 * 0 = -0.475
    got = mix_rea([0.5, -0.5], [[1.0, -1.0], [0.0]])
    assert got == [pytest.approx([0.525, 0.425]), pytest.approx([-0.475])]
    # alpha 0: ReA alone on every step
    assert mix_rea([0.5], [[4.0, 4.0]], alpha=0.0) == [pytest.approx([0.5, 0.5])]
    with pytest.raises(ValueError, match="2 ReA advantages but 1 rollouts"):
        mix_rea([0.5, -0.5], [[0.0]])
