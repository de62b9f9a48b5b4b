"""The verl adapter (longread.train.verl), on CPU.

The first part needs no verl: conversation outputs from step records, dataset rows, and the
session advantages against hand-computed tables (ALGORITHMS.md sections 2, 3 and 7).

The second part imports verl 0.9.1 as ``make install-verl`` installs it (no GPU dependencies)
and runs longread's code inside verl's own: the agent loop built by hydra from
examples/verl/agent_loop.yaml as verl's worker builds it (on a scripted rollout server), its
outputs through verl's ``AgentLoopOutput``, the advantages through verl's
``compute_advantage_for_multi_trajectories`` and the v1 trainer's ``_compute_advantage`` (on an
in-memory TransferQueue), and the example configs through verl's config composition and
checks. Those tests fail, never skip, when verl is missing.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from longread.agents.memagent import MemAgent
from longread.data.records import Sample
from longread.errors import UsageError
from longread.text.chunking import Chunk
from longread.trace import Run
from longread.train.verl import (
    PAYLOAD_KEY,
    SessionRow,
    conversation_outputs,
    dataset_row,
    parse_row_key,
    row_advantages,
    sample_from_row,
    session_rows,
)

from .scripted import ScriptedBackend, WordTokenizer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "verl"


def chunks(*texts: str) -> list[Chunk]:
    tok = WordTokenizer()
    return [Chunk(i, t, tok.count(t)) for i, t in enumerate(texts)]


async def memagent_run(final: str = "\\boxed{7}", record_tokens: bool = True) -> Run:
    backend = ScriptedBackend(["first memory", "second memory", final], with_tokens=True)
    agent = MemAgent(backend, WordTokenizer(), record_tokens=record_tokens)
    return await agent.run("What is it?", chunks("one", "two"), sample_id="q1")


def approx(values: list[float], tol: float = 1e-9) -> Any:
    return pytest.approx(values, abs=tol)


# --- engine-neutral: outputs and dataset rows -----------------------------------------------


async def test_one_output_per_conversation_with_the_sampled_ids_and_the_reward_on_the_last():
    run = await memagent_run()
    outputs = conversation_outputs(run, 1.0, step_rewards=[1.0, 0.5, 1.0], rereads=0)
    tok = WordTokenizer()
    assert len(outputs) == 3
    for output, step in zip(outputs, run.steps, strict=True):
        assert step.tokens is not None
        assert output.prompt_ids == step.tokens.prompt_ids
        assert output.response_ids == step.tokens.completion_ids
        assert output.response_mask == [1] * len(step.tokens.completion_ids)
        assert output.response_logprobs == step.tokens.logprobs
    assert outputs[0].response_ids == tok.encode("first memory")
    assert [o.reward_score for o in outputs] == [None, None, 1.0]
    assert [o.payload["step"] for o in outputs] == [0, 1, 2]
    assert [o.payload["kind"] for o in outputs] == ["update", "update", "final"]
    assert [o.payload["step_reward"] for o in outputs] == [1.0, 0.5, 1.0]
    assert {o.payload["run_id"] for o in outputs} == {run.run_id}


async def test_outputs_refuse_runs_without_tokens_and_mismatched_step_rewards():
    with pytest.raises(ValueError, match="record_tokens=True"):
        conversation_outputs(await memagent_run(record_tokens=False), 0.0)
    with pytest.raises(ValueError, match="2 step rewards for a run of 3 steps"):
        conversation_outputs(await memagent_run(), 0.0, step_rewards=[1.0, 1.0])


def test_a_dataset_row_carries_the_document_in_extra_info_and_reads_back():
    sample = Sample("s1", "Who?", "A long document.", ["Ann", "Anne"], {"kind": "qa"})
    row = dataset_row(sample, 3)
    assert row["prompt"] == [{"role": "user", "content": "Who?"}]
    assert "agent_name" not in row  # the run's default agent loop decides
    assert row["extra_info"]["index"] == 3
    assert dataset_row(sample, 3, agent_loop="longread_rememr1")["agent_name"] == "longread_rememr1"
    # verl hands the loop the row's fields (plus uid, session_id, raw_prompt...).
    back = sample_from_row({**row, "uid": "u", "raw_prompt": row["prompt"]})
    assert (back.id, back.question, back.context, back.answers, back.meta["kind"]) == (
        "s1", "Who?", "A long document.", ["Ann", "Anne"], "qa",
    )  # fmt: skip


def test_a_row_without_a_document_is_a_usage_error_that_names_it():
    with pytest.raises(UsageError, match=r"extra_info\.context"):
        sample_from_row({"extra_info": {"answers": ["x"], "sample_id": "s9"}})


# --- engine-neutral: session advantages -----------------------------------------------------


def test_row_keys_split_like_verls():
    assert parse_row_key("q_1_abc_3_12") == ("q_1_abc", "3", 12)
    for bad in ("nokey", "a_b", "a_b_c"):
        with pytest.raises(ValueError, match="is not"):
            parse_row_key(bad)


def test_session_rows_read_the_loops_payload_and_the_padding_flags():
    extra = [{PAYLOAD_KEY: {"step_reward": 0.5, "rereads": 2}}, None]
    rows = session_rows(["u_0_0", "pad9_0_0"], extra, [False, True])
    assert rows == [
        SessionRow("u", "0", 0, step_reward=0.5, rereads=2),
        SessionRow("pad9", "0", 0, padding=True),
    ]


def grpo_batch() -> tuple[list[SessionRow], list[float]]:
    """Question q: rollout 0 (3 conversations, right), rollout 1 (2, wrong); question p: one
    rollout; one padding row; rows shuffled as a balanced batch would be."""
    rows = [
        SessionRow("q", "1", 1), SessionRow("q", "0", 0), SessionRow("p", "0", 0),
        SessionRow("q", "0", 2), SessionRow("pad", "0", 0, padding=True),
        SessionRow("q", "1", 0), SessionRow("q", "0", 1),
    ]  # fmt: skip
    outcomes = [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0]  # verl copies the final's reward to all
    return rows, outcomes


def test_grpo_gives_each_conversation_its_rollouts_outcome_advantage():
    rows, outcomes = grpo_batch()
    # q: mean 0.5, so +0.5 / -0.5; p alone: 0 (its reward is its mean); padding: 0.
    assert row_advantages(rows, outcomes, "grpo") == approx([-0.5, 0.5, 0, 0.5, 0, -0.5, 0.5])
    # std normalised: std (n-1) of (1, 0) is sqrt(0.5); 0.5 / sqrt(0.5) = sqrt(0.5).
    s = math.sqrt(0.5) / (1 + 1e-6 / math.sqrt(0.5))
    normalised = row_advantages(rows, outcomes, "grpo", std_normalise=True)
    assert normalised == pytest.approx([-s, s, 0, s, 0, -s, s], abs=1e-6)


def rememr1_rows() -> tuple[list[SessionRow], list[float]]:
    r = [1.0, 0.5, 1.0, 0.0, 1.5]  # rollout a: r_0..r_2; rollout b: r_0, r_1
    rows = [
        SessionRow("q", "a", 0, r[0]), SessionRow("q", "a", 1, r[1]),
        SessionRow("q", "a", 2, r[2]), SessionRow("q", "b", 0, r[3]),
        SessionRow("q", "b", 1, r[4]),
    ]  # fmt: skip
    return rows, [1.0, 1.0, 1.0, 0.0, 0.0]


def test_rememr1_mixes_outcome_and_step_terms_by_step_index():
    rows, outcomes = rememr1_rows()
    # Outcome term: R = (1, 0), mean 0.5: +0.5 / -0.5. Step means: t0 (1+0)/2 = 0.5,
    # t1 (0.5+1.5)/2 = 1.0, t2 only a: 1.0. Step terms a: (0.5, -0.5, 0), b: (-0.5, 0.5).
    # A = 0.8 * outcome + 0.2 * step: a = (0.5, 0.3, 0.4), b = (-0.5, -0.3).
    assert row_advantages(rows, outcomes, "rememr1") == approx([0.5, 0.3, 0.4, -0.5, -0.3])
    # alpha = 1: the outcome term alone, broadcast (= GRPO without std).
    assert row_advantages(rows, outcomes, "rememr1", alpha=1.0) == row_advantages(
        rows, outcomes, "grpo"
    )


def rea_rows(rewards: list[float], rereads: list[int]) -> tuple[list[SessionRow], list[float]]:
    """Each rollout i has two conversations; its final carries its reread count."""
    rows, outcomes = [], []
    for i, (reward, k) in enumerate(zip(rewards, rereads, strict=True)):
        rows += [SessionRow("q", str(i), 0, 0.0, k), SessionRow("q", str(i), 1, 1.0, k)]
        outcomes += [reward, reward]
    return rows, outcomes


@pytest.mark.parametrize(
    ("rewards", "rereads", "expected"),
    [
        # mixed: right ones share softmax(-k) = (1, e^-1) / (1 + e^-1); wrong ones minus
        # softmax(-k) over (2, 0) = -(e^-2, 1) / (e^-2 + 1).
        ([1, 1, 0, 0], [0, 1, 2, 0], [0.7310586, 0.2689414, -0.1192029, -0.8807971]),
        ([1, 1], [0, 2], [1.0, -1.0]),  # all right: z-score of -k = (0, -2)
        ([0, 0], [0, 2], [-1.0, 1.0]),  # all wrong: z-score of +k
        ([0.5, 0.95], [1, 1], [-1.0, 1.0]),  # theta 0.9: 0.5 is wrong, 0.95 right
    ],
)
def test_rea_matches_the_four_cases_of_algorithms_md(rewards, rereads, expected):
    rows, outcomes = rea_rows(rewards, rereads)
    values = row_advantages(rows, outcomes, "rea", alpha=0.0)  # pure ReA
    assert values == pytest.approx([v for v in expected for _ in (0, 1)], abs=1e-6)


def test_rea_is_mixed_with_the_step_term_at_the_papers_alpha():
    rows, outcomes = rea_rows([1, 0], [0, 0])  # mixed: ReA (1, -1); steps r = (0, 1) each
    # step terms are centred per step index: all 0 here, so A = 0.95 * ReA (alpha 0.05).
    assert row_advantages(rows, outcomes, "rea") == approx([0.95, 0.95, -0.95, -0.95])
    # rollout 1's second call broke its format: r = (0, 0), so step 1 centres to (0.5, -0.5)
    rows[3] = SessionRow("q", "1", 1, 0.0, 0)
    assert row_advantages(rows, outcomes, "rea") == approx(
        [0.95, 0.95 + 0.05 * 0.5, -0.95, -0.95 - 0.05 * 0.5]
    )


def test_session_advantages_refuse_what_they_cannot_compute():
    with pytest.raises(ValueError, match=r"expected 0\.\.1"):
        row_advantages([SessionRow("q", "0", 0), SessionRow("q", "0", 2)], [0.0, 0.0], "grpo")
    with pytest.raises(ValueError, match="step_rewards: rememr1"):
        row_advantages([SessionRow("q", "0", 0)], [1.0], "rememr1")
    with pytest.raises(ValueError, match="step_rewards: rea"):
        row_advantages([SessionRow("q", "0", 0, rereads=0)], [1.0], "rea")
    with pytest.raises(ValueError, match="reread count"):
        row_advantages([SessionRow("q", "0", 0, step_reward=1.0)], [1.0], "rea")
    with pytest.raises(ValueError, match="unknown method"):
        row_advantages([], [], "gae")


def test_the_verl_modules_say_how_to_install_verl_when_it_is_missing(monkeypatch):
    # As if verl were not installed, whether or not it is (and was imported already).
    adapters = ("longread.train.verl.loop", "longread.train.verl.plugin")
    for name in list(sys.modules):
        if name.startswith("verl.") or name in adapters:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "verl", None)  # `import verl...` now fails
    for name in adapters:
        with pytest.raises(UsageError, match="make install-verl"):
            importlib.import_module(name)


# --- with verl 0.9.1 ------------------------------------------------------------------------


def verl_modules() -> tuple[Any, Any]:
    """The adapter's verl modules; a failure (not a skip) when verl cannot be imported."""
    try:
        from longread.train.verl import loop, plugin
    except UsageError as error:
        pytest.fail(f"{error} (these tests need verl; CI installs it with make install-verl)")
    return loop, plugin


CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def hf_tokenizer() -> Any:
    """A tiny byte-level BPE chat tokenizer, trained here on the prompt files (no download)."""
    from importlib.resources import files

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    prompts = files("longread") / "agents" / "prompts" / "paper"
    corpus = [f.read_text() for f in prompts.iterdir()] + ["\\boxed{4817} magic number"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe.train_from_iterator(
        corpus * 3,
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


class ScriptedServers:
    """verl's server manager as a loop sees it (``LLMServerClient.generate``): prompt ids in,
    the scripted reply's ids (end-of-turn included) and made-up logprobs out."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.calls: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict,
                       **kwargs: Any) -> Any:  # fmt: skip
        from verl.workers.rollout.replica import TokenOutput

        reply = self.reply(prompt_ids)
        ids = self.tokenizer.encode(reply, add_special_tokens=False)
        ids.append(self.tokenizer.eos_token_id)
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids),
                           "sampling_params": dict(sampling_params), "ids": ids})  # fmt: skip
        steps = {"global_steps": 7, "min_global_steps": 7, "max_global_steps": 7}
        return TokenOutput(
            token_ids=ids,
            log_probs=[-0.01 * (i + 1) for i in range(len(ids))],
            stop_reason="completed",
            extra_fields=steps,
        )

    def reply(self, prompt_ids: list[int]) -> str:
        return self.replies[len(self.calls)]


class RoutedServers(ScriptedServers):
    """Replies by the kind of call, read off the decoded prompt (MemReread's calls depend on
    its decisions): decide calls pop ``decisions``, integrate calls and updates answer fixed
    text, every other call (sub-answers and the final answer) ``answer``."""

    def __init__(self, tokenizer: Any, decisions: list[str], answer: str) -> None:
        super().__init__(tokenizer, [])
        self.decisions, self.answer = list(decisions), answer

    def reply(self, prompt_ids: list[int]) -> str:
        prompt = self.tokenizer.decode(prompt_ids)
        if "Decide whether the memory is enough" in prompt:
            return self.decisions.pop(0)
        if "You are improving your memory" in prompt:
            return "The number is 4817. <confirmed>4817</confirmed>"
        if "Section:" in prompt:
            return "The number is 4817."
        return self.answer


def build_loop(
    tokenizer: Any,
    servers: ScriptedServers,
    *,
    name: str = "longread_memagent",
    prompt_length: int = 2048,
    response_length: int = 64,
    **options: Any,
) -> Any:
    """The loop as verl's AgentLoopWorker builds it: hydra.utils.instantiate of the example
    agent loop config entry, with small token caps for the tiny tokenizer."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    entries = {entry.name: entry for entry in OmegaConf.load(EXAMPLES / "agent_loop.yaml")}
    caps = {"chunk_tokens": 200, "memory_tokens": 48, "final_tokens": 48}
    entry = OmegaConf.merge(entries[name], {"agent_options": caps}, options)
    config = OmegaConf.create({
        "actor_rollout_ref": {
            "rollout": {"prompt_length": prompt_length, "response_length": response_length},
            "model": {"path": "tiny-test-model"},
        },
        "data": {},
    })  # fmt: skip
    return instantiate(
        config=entry,
        trainer_config=DictConfigWrap(config=config),
        server_manager=servers,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


NEEDLE = "Filler about rivers. " * 30 + "The special magic number is 4817. " + "Sea. " * 30


def needle_row(sample_id: str = "s1") -> dict[str, Any]:
    row = dataset_row(Sample(sample_id, "What is the magic number?", NEEDLE, ["4817"]), 0)
    return {**row, "raw_prompt": row["prompt"], "uid": f"uid-{sample_id}", "session_id": 0}


SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0,
            "logprobs": True}  # fmt: skip


async def run_loop(tokenizer: Any, final: str, **options: Any) -> tuple[list[Any], Any]:
    """One MemAgent rollout of the needle row: every update answers a memory holding the
    needle, the final call ``final``."""
    loop_module, _ = verl_modules()
    from longread.text.chunking import chunk_text

    n_chunks = len(chunk_text(NEEDLE, loop_module.TransformersTokenizer(tokenizer), 200))
    servers = ScriptedServers(tokenizer, ["The number is 4817."] * n_chunks + [final])
    loop = build_loop(tokenizer, servers, **options)
    return await loop.run(dict(SAMPLING), **needle_row()), servers


async def test_the_agent_loop_returns_verls_outputs_built_from_the_step_records(
    hf_tokenizer, tmp_path
):
    outputs, servers = await run_loop(hf_tokenizer, "It is \\boxed{4817}.", trace_dir=str(tmp_path))
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

    assert len(outputs) == len(servers.calls) >= 3  # one per conversation: updates + final
    for output, call in zip(outputs, servers.calls, strict=True):
        assert isinstance(output, AgentLoopOutput)
        assert output.prompt_ids == call["prompt_ids"]  # what the server was sent
        assert output.response_ids == call["ids"]  # what it sampled, end-of-turn included
        assert output.response_mask == [1] * len(call["ids"])
        assert output.response_logprobs == pytest.approx(
            [-0.01 * (i + 1) for i in range(len(call["ids"]))]
        )
        assert output.extra_fields["min_global_steps"] == 7
    # The saved trace's steps hold the same ids; the prompt ids are the chat template's
    # rendering of the step's messages (verl's Continuous Token builder).
    run = Run.load(tmp_path / "uid-s1_0.json")
    for output, step in zip(outputs, run.steps, strict=True):
        assert step.tokens is not None
        assert (step.tokens.prompt_ids, step.tokens.completion_ids) == (
            output.prompt_ids, output.response_ids,
        )  # fmt: skip
        text = hf_tokenizer.apply_chat_template(
            step.messages, tokenize=False, add_generation_prompt=True
        )
        assert output.prompt_ids == hf_tokenizer.encode(text, add_special_tokens=False)
    assert run.answer == "4817"
    # verl's sampling parameters, each call capped at the agent's own token cap.
    assert servers.calls[0]["sampling_params"] == {**SAMPLING, "max_tokens": 48}
    assert len({c["request_id"] for c in servers.calls}) == 1  # sticky: one server per rollout
    # The reward (the strict judge) on the final only; verl copies it to the others.
    assert [o.reward_score for o in outputs[:-1]] == [None] * (len(outputs) - 1)
    assert outputs[-1].reward_score == 1.0
    assert outputs[-1].extra_fields["reward_extra_info"]["acc"] == 1.0
    assert [o.extra_fields[PAYLOAD_KEY]["step"] for o in outputs] == list(range(len(outputs)))
    fields = outputs[-1].as_dict()  # what verl's worker stores for the row
    assert fields["rm_scores"].tolist() == [0.0] * (len(call["ids"]) - 1) + [1.0]
    assert fields["rollout_log_probs"].shape == fields["responses"].shape


async def test_the_loop_records_rememr1_step_rewards_and_scores_a_wrong_answer_zero(
    hf_tokenizer,
):
    outputs, _ = await run_loop(hf_tokenizer, "\\boxed{1234}", step_rewards="rememr1")
    assert outputs[-1].reward_score == 0.0
    rewards = [o.extra_fields[PAYLOAD_KEY]["step_reward"] for o in outputs]
    # First update: format 1 + the memory now holds the gold word (recall 0 -> 1); later
    # updates gain nothing; the final has a non-empty box: format 1.
    assert rewards == [2.0] + [1.0] * (len(outputs) - 1)


async def test_the_loop_scores_with_the_cpu_trainers_reward_options(hf_tokenizer):
    """strict+recall as the CPU trainer's credit step gives it: a wrong answer whose final
    memory holds the gold earns recall_weight x 1."""
    outputs, _ = await run_loop(
        hf_tokenizer, "\\boxed{1234}", reward="strict+recall", recall_weight=0.25
    )
    assert outputs[-1].reward_score == 0.25
    # Notes that state only the document's number: the made-up-number term takes nothing.
    outputs, _ = await run_loop(hf_tokenizer, "\\boxed{4817}", unsupported_penalty=1.0)
    assert outputs[-1].reward_score == 1.0
    verl_modules()
    from hydra.errors import InstantiationException

    with pytest.raises(InstantiationException, match="exit_gate: true"):
        build_loop(hf_tokenizer, ScriptedServers(hf_tokenizer, []), skip_bonus=0.5)
    gated = build_loop(
        hf_tokenizer, ScriptedServers(hf_tokenizer, []), name="longread_memagent_gated"
    )  # the example's gated entry: the gate rewards on, as the CPU trainer's reward section
    assert gated.gate_weights == (1.0, 0.5) and gated.agent_options["exit_gate"] is True


async def test_the_rollouts_of_one_sample_cut_its_document_once(hf_tokenizer, monkeypatch):
    loop_module, _ = verl_modules()
    from longread.text.chunking import chunk_text

    calls = []

    def counting_chunk_text(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[2])
        return chunk_text(*args, **kwargs)

    monkeypatch.setattr(loop_module, "chunk_text", counting_chunk_text)
    row = {**needle_row("shared"), "uid": "uid-shared-doc"}
    replies = ["The number is 4817."] * 8 + ["\\boxed{4817}"]
    loops = [build_loop(hf_tokenizer, ScriptedServers(hf_tokenizer, replies)) for _ in range(3)]
    results = await asyncio.gather(*(lp.run(dict(SAMPLING), **row) for lp in loops))
    assert calls == [200]  # one cut, at the planned chunk size, for the three rollouts
    assert len({tuple(len(o.prompt_ids) for o in r) for r in results}) == 1


async def test_a_call_that_does_not_fit_verls_lengths_fails_the_rollout(hf_tokenizer):
    from longread.errors import BudgetError

    verl_modules()
    servers = ScriptedServers(hf_tokenizer, [])
    loop = build_loop(hf_tokenizer, servers, response_length=32)  # caps are 48
    with pytest.raises(BudgetError, match=r"rollout\.response_length is 32"):
        await loop.run(dict(SAMPLING), **needle_row())
    assert servers.calls == []


def test_the_loop_refuses_an_unknown_agent_or_reward(hf_tokenizer):
    verl_modules()
    from hydra.errors import InstantiationException  # hydra wraps the loop's UsageError

    with pytest.raises(InstantiationException, match="unknown agent 'nope'"):
        build_loop(hf_tokenizer, ScriptedServers(hf_tokenizer, []), agent="nope")
    with pytest.raises(InstantiationException, match="reward must be one of"):
        build_loop(hf_tokenizer, ScriptedServers(hf_tokenizer, []), reward="lenient")


# What verl's v1 worker does with a rollout's outputs (agent_loop_tq.py): copy the final's
# reward to the others, turn each into fields (as_dict), key them {uid}_{session}_{index}.
def worker_fields(uid: str, session: int, outputs: list[Any]) -> dict[str, dict[str, Any]]:
    final = outputs[-1]
    for output in outputs[:-1]:
        output.reward_score = final.reward_score
    stored = {}
    for i, output in enumerate(outputs):
        fields = output.as_dict()
        fields["uid"] = uid
        stored[f"{uid}_{session}_{i}"] = fields
    return stored


async def rollout_store(hf_tokenizer: Any) -> dict[str, dict[str, Any]]:
    """Question q: two rollouts (right, wrong); question p: one rollout (right)."""
    store: dict[str, dict[str, Any]] = {}
    for uid, session, final in [("q", 0, "\\boxed{4817}"), ("q", 1, "\\boxed{1}"),
                                ("p", 0, "\\boxed{4817}")]:  # fmt: skip
        outputs, _ = await run_loop(hf_tokenizer, final, step_rewards="rememr1")
        store.update(worker_fields(uid, session, outputs))
    return store


def data_proto(store: dict[str, dict[str, Any]], keys: list[str]) -> Any:
    """The batch verl's advantage step sees: padded rewards and masks, uids."""
    import numpy as np
    from tensordict import TensorDict
    from torch.nn.utils.rnn import pad_sequence
    from verl.protocol import DataProto

    rows = [store[k] for k in keys]
    batch = TensorDict(
        {
            "token_level_rewards": pad_sequence([r["rm_scores"] for r in rows], batch_first=True),
            "response_mask": pad_sequence([r["response_mask"] for r in rows], batch_first=True),
        },
        batch_size=len(rows),
    )
    return DataProto(batch=batch, non_tensor_batch={"uid": np.array([r["uid"] for r in rows])})


def first_token(advantages: Any) -> list[float]:
    return [float(a) for a in advantages[:, 0]]


async def test_longread_grpo_equals_verls_multi_trajectory_grpo(hf_tokenizer):
    verl_modules()
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    store = await rollout_store(hf_tokenizer)
    keys = sorted(store, reverse=True)  # any order
    rows = session_rows(keys, [store[k]["extra_fields"] for k in keys])
    outcomes = [float(store[k]["rm_scores"].sum()) for k in keys]
    ours = row_advantages(rows, outcomes, "grpo")
    theirs = compute_advantage_for_multi_trajectories(
        data_proto(store, keys), batch_keys=keys, adv_estimator="grpo",
        norm_adv_by_std_in_grpo=False,
    )  # fmt: skip
    # verl gives a lone rollout its whole reward (mean 0, std 1); longread gives it 0.
    lone = [k.startswith("p_") for k in keys]
    verl_values = first_token(theirs.batch["advantages"])
    assert [v for v, alone in zip(verl_values, lone, strict=True) if not alone] == approx(
        [v for v, alone in zip(ours, lone, strict=True) if not alone], tol=1e-6
    )
    assert {v for v, alone in zip(ours, lone, strict=True) if alone} == {0.0}
    assert sorted({round(v, 9) for v in ours}) == [-0.5, 0.0, 0.5]


async def test_longread_rememr1_runs_inside_verls_advantage_step(hf_tokenizer):
    _, plugin = verl_modules()
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    store = await rollout_store(hf_tokenizer)
    keys = sorted(store)
    rows = session_rows(keys, [store[k]["extra_fields"] for k in keys])
    data = data_proto(store, keys)
    with plugin.batch_rows(rows):
        result = compute_advantage_for_multi_trajectories(
            data, batch_keys=keys, adv_estimator="longread_rememr1", config={}
        )
    outcomes = [float(store[k]["rm_scores"].sum()) for k in keys]
    expected = row_advantages(rows, outcomes, "rememr1")
    advantages = result.batch["advantages"]
    assert first_token(advantages) == approx(expected, tol=1e-6)  # float32
    # Every response token of a row carries its advantage; padding positions 0.
    mask = data.batch["response_mask"]
    assert (advantages == advantages[:, :1] * mask).all()
    # By hand, question q: R = (1, 0) -> outcome terms +/-0.5; the rollouts' step rewards are
    # equal step by step (2, 1, ..., 1), so the step terms are 0: A = 0.8 * 0.5 = +/-0.4.
    q_values = {round(v, 9) for v, k in zip(expected, keys, strict=True) if k.startswith("q_")}
    assert q_values == {0.4, -0.4}


def test_longread_estimators_refuse_to_run_without_a_longread_trainer():
    _, plugin = verl_modules()
    import torch

    with pytest.raises(UsageError, match="longread_sync"):
        plugin.rememr1_estimator(torch.zeros(1, 2), torch.ones(1, 2), index=["q"])


class MemoryTransferQueue:
    """TransferQueue's kv_batch_get / kv_batch_put over a dict, returning what the real one
    returns: verl's own list_of_dict_to_tensordict of the stored fields."""

    def __init__(self, store: dict[str, dict[str, Any]]) -> None:
        self.store = store

    def kv_batch_get(self, keys: list[str], partition_id: str, select_fields: list[str]) -> Any:
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        rows = [{f: self.store[k][f] for f in select_fields if f in self.store[k]} for k in keys]
        return list_of_dict_to_tensordict(rows)

    def kv_batch_put(self, keys: list[str], partition_id: str, fields: Any, **kwargs: Any) -> Any:
        names = list(fields.keys())  # iterating a TensorDict walks its rows, not its keys
        for i, key in enumerate(keys):
            for name in names:
                self.store[key][name] = fields[name][i]
        return kwargs.get("batch")


async def test_the_longread_trainer_computes_rememr1_in_verls_v1_advantage_step(
    hf_tokenizer, monkeypatch
):
    verl_modules()
    import transfer_queue
    from omegaconf import OmegaConf
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1 import PPOTrainerSync, get_trainer_cls

    store = await rollout_store(hf_tokenizer)
    queue = MemoryTransferQueue(store)
    monkeypatch.setattr(transfer_queue, "kv_batch_get", queue.kv_batch_get)
    monkeypatch.setattr(transfer_queue, "kv_batch_put", queue.kv_batch_put)
    cls = get_trainer_cls("longread_sync")
    assert issubclass(cls, PPOTrainerSync)
    trainer = cls.__new__(cls)  # the advantage step only needs the config
    trainer.trainer_mode = "longread_sync"  # what verl's __init__ stores
    assert trainer.trainer_mode == "sync"  # ... and what its code then compares with
    trainer.config = OmegaConf.create({
        "algorithm": {"adv_estimator": "longread_rememr1", "use_kl_in_reward": False,
                      "gamma": 1.0, "lam": 1.0, "norm_adv_by_std_in_grpo": False,
                      "rollout_correction": None, "longread": {"alpha": 0.8}},
        "actor_rollout_ref": {"rollout": {"n": 2}},
    })  # fmt: skip
    keys = sorted(store)
    batch = KVBatchMeta(partition_id="train", keys=keys, tags=[{} for _ in keys])
    trainer._compute_advantage(batch, metrics={})
    rows = session_rows(keys, [store[k]["extra_fields"] for k in keys])
    expected = row_advantages(rows, [float(store[k]["rm_scores"].sum()) for k in keys], "rememr1")
    stored = [store[k]["advantages"] for k in keys]
    assert [float(a[0]) for a in stored] == approx(expected, tol=1e-6)
    assert all(len(a) == len(store[k]["response_mask"]) for a, k in zip(stored, keys, strict=True))


# --- one credit function on both engines (issue 25, item 3) --------------------------------

SUB = "<subquestion>Which number is special?</subquestion>"
# Four memagent rollouts of one question, per call: right; wrong; right after a first update
# that missed the needle; the needle kept but the answer unboxed (final format 0).
MEMAGENT_SCRIPTS = [
    (["The number is 4817."], "\\boxed{4817}"),
    (["Nothing useful yet."], "\\boxed{1}"),
    (["Nothing useful yet.", "The number is 4817."], "\\boxed{4817}"),
    (["The number is 4817."], "It is 4817."),
]
# Four MemReread rollouts: decisions and the answer every answering call gives. Right with
# 0 and 1 rereads; wrong with 2; wrong after a malformed decision (a format error).
MEMREREAD_SCRIPTS = [
    (["<stop/>"], "\\boxed{4817}"),
    ([SUB, "<stop/>"], "\\boxed{4817}"),
    ([SUB, "<subquestion>Is it odd?</subquestion>"], "\\boxed{1}"),
    (["no idea"], "\\boxed{1}"),
]


# Four MemAgent rollouts read with grounded notes: a value claimed at the filler section (cut
# from the memory: the notes are about the question, and no section holds "11"), or none;
# then the needle copied (right) or the claim kept (wrong).
CLAIM_SCRIPTS = [
    (["The magic number is 11.", "The number is 4817."], "\\boxed{4817}"),
    (["Nothing useful yet.", "The number is 4817."], "\\boxed{4817}"),
    (["The magic number is 11."], "\\boxed{11}"),
    (["Nothing useful yet."], "\\boxed{1}"),
]


def scripted_servers(
    tokenizer: Any, agent: str, index: int, n_chunks: int, scripts: list | None = None
) -> ScriptedServers:
    if agent == "memreread":
        decisions, answer = MEMREREAD_SCRIPTS[index]
        return RoutedServers(tokenizer, decisions, answer)
    updates, final = (scripts or MEMAGENT_SCRIPTS)[index]
    replies = [updates[min(i, len(updates) - 1)] for i in range(n_chunks)]
    return ScriptedServers(tokenizer, [*replies, final])


async def verl_group(
    tokenizer: Any,
    estimator: str,
    trace_dir: Path,
    scripts: list | None = None,
    options: dict[str, Any] | None = None,
) -> tuple[dict[str, dict[str, Any]], list[Run]]:
    """One question's four rollouts through the agent loop (as verl's worker stores them)
    and the runs the loop traced; ``scripts`` and agent ``options`` replace the defaults."""
    loop_module, _ = verl_modules()
    from longread.text.chunking import chunk_text

    agent = "memreread" if estimator == "rea" else "memagent"
    n_chunks = len(chunk_text(NEEDLE, loop_module.TransformersTokenizer(tokenizer), 200))
    store: dict[str, dict[str, Any]] = {}
    runs = []
    caps = {"decide_tokens": 48} if agent == "memreread" else {}  # the yaml's 256 > 64
    caps |= options or {}
    for session in range(4):
        loop = build_loop(
            tokenizer, scripted_servers(tokenizer, agent, session, n_chunks, scripts),
            name=f"longread_{agent}", trace_dir=str(trace_dir),
            step_rewards="none" if estimator == "grpo" else estimator, agent_options=caps,
        )  # fmt: skip
        outputs = await loop.run(dict(SAMPLING), **{**needle_row(), "session_id": session})
        store.update(worker_fields("q", session, outputs))
        runs.append(Run.load(trace_dir / f"uid-s1_{session}.json"))
    return store, runs


def verl_advantages(
    store: dict[str, dict[str, Any]], estimator: str, monkeypatch, longread: dict | None = None
) -> list[float]:
    """verl's v1 advantage step through the longread trainer: the paper's settings, or those
    of ``algorithm.longread``."""
    import transfer_queue
    from omegaconf import OmegaConf
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1 import get_trainer_cls

    queue = MemoryTransferQueue(store)
    monkeypatch.setattr(transfer_queue, "kv_batch_get", queue.kv_batch_get)
    monkeypatch.setattr(transfer_queue, "kv_batch_put", queue.kv_batch_put)
    cls = get_trainer_cls("longread_sync")
    trainer = cls.__new__(cls)  # the advantage step only needs the config
    trainer.config = OmegaConf.create({
        "algorithm": {"adv_estimator": f"longread_{estimator}", "use_kl_in_reward": False,
                      "gamma": 1.0, "lam": 1.0, "norm_adv_by_std_in_grpo": False,
                      "rollout_correction": None, "longread": longread or {}},
        "actor_rollout_ref": {"rollout": {"n": 4}},
    })  # fmt: skip
    keys = sorted(store, key=lambda k: (int(k.split("_")[1]), int(k.split("_")[2])))
    trainer._compute_advantage(KVBatchMeta(partition_id="train", keys=keys,
                                           tags=[{} for _ in keys]), metrics={})  # fmt: skip
    return [float(store[k]["advantages"][0]) for k in keys]


@pytest.mark.parametrize("estimator", ["grpo", "rememr1", "rea"])
async def test_the_cpu_trainer_and_verl_give_one_group_the_same_advantages(
    hf_tokenizer, tmp_path, monkeypatch, estimator
):
    from longread.train.config import TrainConfig
    from longread.train.rollouts import credit_of

    store, runs = await verl_group(hf_tokenizer, estimator, tmp_path)
    ours = verl_advantages(store, estimator, monkeypatch)
    agent = "memreread" if estimator == "rea" else "memagent"
    reward = "contained" if agent == "memreread" else "strict"  # the loop configs' rewards
    config = TrainConfig.from_dict({
        "data": {"train": ["unused.jsonl"]}, "agent": {"name": agent},
        "reward": {"estimator": estimator, "reward": reward},
    })  # fmt: skip
    sample = sample_from_row(needle_row())
    credit = credit_of(config, sample, runs)  # the CPU trainer's credit step
    cpu = [a for rollout in credit.advantages for a in rollout]
    assert ours == approx(cpu, tol=1e-6)  # verl computes in float32
    # The group tells the estimators apart: rewards, step terms and rereads all differ.
    assert credit.rewards == (
        [1.0, 1.0, 0.0, 0.0] if agent == "memreread" else [1.0, 0.0, 1.0, 0.0]
    )
    assert len({round(a, 6) for a in cpu}) >= 2
    if estimator != "grpo":
        assert len({round(a, 6) for a in cpu}) > 2  # a step term (or ReA) moved some apart
    if estimator == "rea":
        assert [len([s for s in r.steps if s.kind == "integrate"]) for r in runs] == [0, 1, 2, 0]


async def test_the_per_turn_options_give_the_same_advantages_on_verl_and_the_cpu_trainer(
    hf_tokenizer, tmp_path, monkeypatch
):
    """No credit before the evidence and the ungrounded penalty, read with grounded notes:
    the loop records, per conversation, whether it came before the needle and whether its
    claim was cut, and verl's advantage step applies both as the CPU trainer does."""
    from longread.train.config import TrainConfig
    from longread.train.rollouts import credit_of

    grounded = {"grounded_notes": True}
    store, runs = await verl_group(hf_tokenizer, "grpo", tmp_path, CLAIM_SCRIPTS, grounded)
    options = {"credit_before_evidence": False, "ungrounded_penalty": 0.5}
    ours = verl_advantages(store, "grpo", monkeypatch, longread=options)
    config = TrainConfig.from_dict({
        "data": {"train": ["unused.jsonl"]}, "agent": {"options": grounded},
        "reward": {"estimator": "grpo", "reward": "strict", **options},
    })  # fmt: skip
    credit = credit_of(config, sample_from_row(needle_row()), runs)
    assert ours == approx([a for rollout in credit.advantages for a in rollout], tol=1e-6)
    # Four sections, the needle in the third: two filler turns, where only the claims' term
    # acts, whatever the outcome (rewards 1, 1, 0, 0: +-0.5 from the needle on). A note about
    # the number at a filler section is cut, even the right value ahead of the needle
    # (rollout 1's second turn). Turn 0: 2 of 4 claim, -0.5 x (1 - 0.5) against +0.5 x 0.5.
    # Turn 1: 3 of 4, -0.125 against +0.375. Turn 2 (the needle): rollout 2 still claims 11.
    assert [len(run.steps) for run in runs] == [5, 5, 5, 5]
    assert credit.rewards == [1.0, 1.0, 0.0, 0.0]
    assert credit.advantages == [  # binary fractions: exact
        [-0.25, -0.125, 0.625, 0.625, 0.5],
        [0.25, -0.125, 0.625, 0.625, 0.5],
        [-0.25, -0.125, -0.875, -0.875, -0.5],
        [0.25, 0.375, -0.375, -0.375, -0.5],
    ]


@pytest.mark.parametrize("name", ["memagent", "rememr1", "memreread"])
def test_the_example_configs_compose_with_verls_and_pass_its_checks(name):
    verl_modules()
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    with initialize_config_dir(config_dir=str(EXAMPLES), version_base=None):
        config = compose(config_name=name, overrides=["data.train_files=train.parquet"])
    validate_config(
        config=config,
        use_reference_policy=need_reference_policy(config),
        use_critic=need_critic(config),
    )
    rollout = config.actor_rollout_ref.rollout
    assert rollout.max_model_len == rollout.prompt_length + rollout.response_length
    assert config.actor_rollout_ref.model.path == "Qwen/Qwen2.5-7B-Instruct"
    env = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.VERL_USE_EXTERNAL_MODULES == "longread.train.verl.plugin"
    from omegaconf import OmegaConf

    loops = {e.name: e for e in OmegaConf.load(EXAMPLES / "agent_loop.yaml")}
    options = loops[rollout.agent.default_agent_loop].agent_options
    caps = [v for k, v in options.items() if k.endswith("_tokens") and k != "chunk_tokens"]
    assert max(caps) <= rollout.response_length  # else every rollout fails its budget check
    if name != "memagent":
        assert config.trainer.v1.trainer_mode == "longread_sync"
        assert config.algorithm.adv_estimator.startswith("longread_")


def test_verl_imports_the_plugin_in_a_fresh_process_from_the_environment():
    verl_modules()
    code = (
        "import verl\n"
        "from verl.trainer.ppo.v1 import get_trainer_cls\n"
        "from verl.trainer.ppo.core_algos import get_adv_estimator_fn\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry\n"
        "print(get_trainer_cls('longread_sync').__name__, "
        "get_adv_estimator_fn('longread_rea').__name__, "
        "'longread_agent' in _agent_loop_registry)\n"
    )
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "longread.train.verl.plugin"}
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-3:] == ["LongreadTrainerSync", "rea_estimator", "True"]


def test_make_dataset_writes_rows_that_verls_dataset_reads_back(tmp_path, monkeypatch):
    verl_modules()
    import runpy

    import datasets
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from longread.data.loaders import save_samples

    samples = [
        Sample("a1", "What is the number?", "Filler. It is 4817.", ["4817"], {"kind": "qa"}),
        Sample("a2", "Who wrote it?", "It was written by Ann.", ["Ann", "Anne"], {"kind": "qa"}),
    ]
    save_samples(samples, tmp_path / "samples.jsonl")
    out = tmp_path / "train.parquet"
    argv = ["make_dataset.py", str(tmp_path / "samples.jsonl"), str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(EXAMPLES / "make_dataset.py"), run_name="__main__")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf"))
    config = OmegaConf.create(
        {"cache_dir": str(tmp_path / "verl"), "filter_overlong_prompts": False}
    )
    dataset = RLHFDataset(str(out), tokenizer=None, config=config)
    rows = [dataset[i] for i in range(len(dataset))]
    assert [row["raw_prompt"] for row in rows] == [[{"role": "user", "content": s.question}]
                                                    for s in samples]  # fmt: skip
    assert [sample_from_row(row) for row in rows] == samples
