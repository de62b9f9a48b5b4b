import pytest

from longread.agents.budget import MIN_CHUNK_TOKENS, check_fits, fixed_cost, plan_chunk
from longread.errors import BudgetError


def test_no_window_keeps_requested_chunk():
    plan = plan_chunk(
        window=None, requested=5000, prompt_tokens_without_chunk=9999, max_new_tokens=1024
    )
    assert plan.chunk_tokens == 5000 and not plan.shrunk and plan.note() is None


def test_large_window_keeps_requested_chunk():
    plan = plan_chunk(
        window=32768, requested=5000, prompt_tokens_without_chunk=1200, max_new_tokens=1024
    )
    assert plan.chunk_tokens == 5000


def test_small_window_shrinks_chunk_to_exact_room():
    window, prompt, new = 4096, 1200, 1024
    plan = plan_chunk(
        window=window, requested=5000, prompt_tokens_without_chunk=prompt, max_new_tokens=new
    )
    assert plan.shrunk
    assert plan.chunk_tokens == window - fixed_cost(window) - prompt - new
    assert plan.chunk_tokens + prompt + new + fixed_cost(window) == window
    assert "5000" in plan.note() and str(plan.chunk_tokens) in plan.note()


def test_window_too_small_for_any_chunk_is_a_clear_error():
    with pytest.raises(BudgetError, match="window"):
        plan_chunk(
            window=2048, requested=5000, prompt_tokens_without_chunk=1000, max_new_tokens=1024
        )


def test_min_chunk_is_accepted_at_the_edge():
    window = 4096
    prompt = window - fixed_cost(window) - 1024 - MIN_CHUNK_TOKENS
    plan = plan_chunk(
        window=window, requested=5000, prompt_tokens_without_chunk=prompt, max_new_tokens=1024
    )
    assert plan.chunk_tokens == MIN_CHUNK_TOKENS


def test_final_call_must_fit():
    check_fits(window=8192, prompt_tokens=2000, max_new_tokens=1024, what="final answer")
    with pytest.raises(BudgetError, match="final answer"):
        check_fits(window=2048, prompt_tokens=1500, max_new_tokens=1024, what="final answer")
