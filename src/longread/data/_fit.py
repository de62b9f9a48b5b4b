"""Fit a generated record to a token budget by searching over its haystack size."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import UsageError


def largest_fitting(
    measure: Callable[[int], int],
    target: int,
    *,
    lo: int = 0,
    hi: int | None = None,
    start: int | None = None,
    what: str = "record",
) -> int:
    """The largest size in ``[lo, hi]`` whose ``measure`` (a token count) is at most ``target``.

    ``measure`` should grow with size; where a tokenizer makes it wobble, the result still
    satisfies ``measure(size) <= target < measure(size + 1)``. The search starts at ``start``
    (a neighbour's size is a good hint) or at a secant estimate, gallops outward and bisects,
    so a close start costs a handful of measurements. Raises UsageError when even ``lo`` is over.
    """
    memo: dict[int, int] = {}

    def m(size: int) -> int:
        if size not in memo:
            memo[size] = measure(size)
        return memo[size]

    if m(lo) > target:
        raise UsageError(f"{what}: {target} tokens is too short; the smallest takes {m(lo)}")
    if start is None:
        start = _secant_estimate(m, target, lo, hi)
    start = max(lo, start if hi is None else min(start, hi))
    below, above = _bracket(m, target, start, lo, hi)
    if above is None:
        return below
    while above - below > 1:
        mid = (below + above) // 2
        if m(mid) <= target:
            below = mid
        else:
            above = mid
    return below


def _secant_estimate(m: Callable[[int], int], target: int, lo: int, hi: int | None) -> int:
    """A few secant steps on the size -> tokens line: usually lands within a unit or two."""
    a, b = lo, lo + 64 if hi is None else min(lo + 64, hi)
    for _ in range(3):
        if b == a or m(b) == m(a):
            return b
        guess = b + (target - m(b)) * (b - a) / (m(b) - m(a))
        nxt = max(lo, int(guess) if hi is None else min(int(guess), hi))
        a, b = b, nxt
    return b


def _bracket(
    m: Callable[[int], int], target: int, start: int, lo: int, hi: int | None
) -> tuple[int, int | None]:
    """``(below, above)`` with ``m(below) <= target < m(above)``; ``above`` None when even
    ``hi`` fits. Steps double away from ``start``."""
    step = 1
    if m(start) <= target:
        below = start
        while hi is None or below < hi:
            cand = below + step if hi is None else min(below + step, hi)
            if m(cand) > target:
                return below, cand
            below, step = cand, step * 2
        return below, None
    above = start
    while True:  # m(lo) <= target was checked, so this ends at lo at the latest
        cand = max(above - step, lo)
        if m(cand) <= target:
            return cand, above
        above, step = cand, step * 2
