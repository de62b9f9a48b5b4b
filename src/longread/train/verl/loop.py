"""A verl agent loop that runs a longread agent on verl's rollout servers (verl 0.9.1,
``verl/experimental/agent_loop/agent_loop.py``).

verl builds one loop per rollout (``hydra.utils.instantiate`` of the agent loop config, or the
``register``-ed name) and awaits ``run`` with the sampling parameters and the dataset row. The
loop runs the agent through :class:`ServerBackend`, whose calls are verl's token-in/token-out
``server_manager.generate``; every call is a step record with the prompt ids sent and the ids
and logprobs sampled. ``run`` returns one ``AgentLoopOutput`` per conversation (verl 0.9's
multi-output agent loops), the outcome reward on the last; verl gives the others the same
reward and, in its advantage step, one shared advantage (or longread's, see ``plugin``).

Agent loop config file (``actor_rollout_ref.rollout.agent.agent_loop_config_path``)::

    - name: longread_agent
      _target_: longread.train.verl.loop.LongreadAgentLoop
      agent: memagent            # any longread agent with memory: memagent, rememr1, memreread
      agent_options: {chunk_tokens: 5000, memory_tokens: 1024}
      reward: strict             # strict (the eval judge), contained (MemReread's) or
                                 # strict+recall (plus recall_weight x the gold's recall in
                                 # the final memory): train/credit.py's reward_function
      recall_weight: 0.5
      early_exit_penalty: 0.0    # the exit gate's terms (agent_options exit_gate: true), as
      skip_bonus: 0.0            # the CPU trainer's reward section: credit.exit_gate_term
      unsupported_penalty: 0.0   # minus this x the share of updates with made-up numbers
      step_rewards: none         # the step term the advantage mixes in, one per conversation:
                                 # rememr1 (ReMemR1's r_t, for longread_rememr1) or rea
                                 # (MemReread's format term, for longread_rea)
      trace_dir: null            # a folder to save every run's trace in

The sampler is verl's: its temperature, top-p and top-k apply to every call (the agent's own
sampling options are overridden with them), and each call's token cap is the agent's. A call
whose prompt exceeds ``rollout.prompt_length`` or whose cap exceeds ``rollout.response_length``
fails the rollout with a BudgetError rather than be truncated (verl would cut the prompt).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...agents.registry import agent_spec, make_agent, make_config
from ...data.evidence import evidence_sentences
from ...data.records import Sample
from ...errors import BackendError, BudgetError, UsageError
from ...llm.base import Completion, Message, SamplingParams
from ...text.chunking import Chunk, chunk_text
from ...text.tokenizer import Tokenizer
from ...trace import Run
from ..credit import REWARDS, exit_gate_term, reward_function, step_terms, unsupported_term
from ..rewards import outcome_reward, reread_count, steps_before_evidence
from . import verl_missing
from .rows import LOOP_NAME, PAYLOAD_KEY, ConversationOutput, conversation_outputs, sample_from_row

try:
    from omegaconf import DictConfig, OmegaConf
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
        register,
    )
except ImportError as error:
    raise verl_missing(error) from None

STEP_REWARDS = ("none", "rememr1", "rea")


class TransformersTokenizer:
    """longread's ``Tokenizer`` protocol over the policy's Hugging Face tokenizer, so chunks
    and budgets are counted in the tokens the policy reads."""

    exact = True

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self.name = f"hf:{getattr(tokenizer, 'name_or_path', '') or 'policy'}"

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def count(self, text: str) -> int:
        return len(self.encode(text))


class ServerBackend:
    """An ``LLMBackend`` over verl's rollout servers for one rollout.

    ``build_prompt`` turns messages into prompt ids (verl's Continuous Token builder, so
    prompts are rendered as verl renders them); ``sampling_params`` are verl's for this
    rollout. All calls share ``request_id``, so verl's client keeps them on one server
    (sticky sessions: the prompts share a prefix). The window is prompt + response length.
    """

    name = "verl"

    def __init__(
        self,
        server_manager: Any,
        build_prompt: Callable[[list[dict[str, Any]]], list[int]],
        tokenizer: Any,
        sampling_params: Mapping[str, Any],
        *,
        prompt_length: int,
        response_length: int,
        model: str = "",
    ) -> None:
        self.server_manager = server_manager
        self._build_prompt = build_prompt
        self._tokenizer = tokenizer
        self.sampling_params = dict(sampling_params)
        self.prompt_length = prompt_length
        self.response_length = response_length
        self.model = model
        self.request_id = uuid.uuid4().hex
        self.global_steps: list[int] = []  # the weight versions that sampled this rollout

    @property
    def context_window(self) -> int:
        return self.prompt_length + self.response_length

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        """Render, check the lengths, generate, decode. Raises BudgetError when the call
        cannot fit verl's prompt or response length, BackendError when the server aborted."""
        if params.max_tokens > self.response_length:
            raise BudgetError(
                f"a call asks for up to {params.max_tokens} new tokens but "
                f"rollout.response_length is {self.response_length}: raise it or lower the "
                "agent's memory/answer token caps"
            )
        prompt_ids = await asyncio.to_thread(self._build_prompt, [dict(m) for m in messages])
        if len(prompt_ids) > self.prompt_length:
            raise BudgetError(
                f"a prompt of {len(prompt_ids)} tokens exceeds rollout.prompt_length "
                f"({self.prompt_length}): raise it, lower the agent's chunk_tokens, or give the "
                "agent's token caps the value of rollout.response_length (the chunk plan "
                "assumes prompt + cap <= prompt_length + response_length)"
            )
        sampling = {**self.sampling_params, "max_tokens": params.max_tokens}
        if params.stop:
            sampling["stop"] = list(params.stop)
        start = time.perf_counter()
        output = await self.server_manager.generate(
            request_id=self.request_id, prompt_ids=prompt_ids, sampling_params=sampling
        )
        seconds = time.perf_counter() - start
        if output.stop_reason in ("aborted", "abort"):
            raise BackendError("verl's rollout server aborted the request")
        self._note_steps(output.extra_fields or {})
        token_ids = list(output.token_ids)
        return Completion(
            text=self._tokenizer.decode(token_ids, skip_special_tokens=True),
            finish_reason="length" if len(token_ids) >= params.max_tokens else "stop",
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(token_ids),
            seconds=seconds,
            token_ids=token_ids,
            logprobs=list(output.log_probs) if output.log_probs else None,
            prompt_ids=list(prompt_ids),
            model=self.model,
        )

    async def aclose(self) -> None:
        """Nothing to release: the servers are verl's."""

    def step_range(self) -> dict[str, int]:
        """``min_global_steps`` and ``max_global_steps`` over this rollout's calls, which verl
        v1 reads to drop rollouts sampled by too many weight versions; empty if unknown."""
        steps = self.global_steps
        return {"min_global_steps": min(steps), "max_global_steps": max(steps)} if steps else {}

    def _note_steps(self, extra: Mapping[str, Any]) -> None:
        for key in ("min_global_steps", "max_global_steps", "global_steps"):
            if extra.get(key) is not None:
                self.global_steps.append(int(extra[key]))


class SharedChunks:
    """Each question's document cut once per process: verl runs a question's n rollouts
    together in one worker (``_run_prompt``), and every rollout cuts it the same way. Keyed by
    verl's per-sample uid and the chunk size; the oldest entries go past ``capacity``."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._tasks: OrderedDict[tuple[str, int], asyncio.Task[list[Chunk]]] = OrderedDict()

    async def get(self, key: str, text: str, tokenizer: Tokenizer, size: int) -> list[Chunk]:
        task = self._tasks.get((key, size))
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            task = asyncio.ensure_future(asyncio.to_thread(chunk_text, text, tokenizer, size))
            self._tasks[(key, size)] = task
            while len(self._tasks) > self.capacity:
                self._tasks.popitem(last=False)
        return await task


_CHUNKS = SharedChunks()


@register(LOOP_NAME)
class LongreadAgentLoop(AgentLoopBase):
    """verl's agent loop for longread's memory agents: options as in the module docstring;
    the other keyword arguments are verl's (``AgentLoopBase``)."""

    def __init__(
        self,
        *args: Any,
        agent: str = "memagent",
        agent_options: Mapping[str, Any] | None = None,
        reward: str = "strict",
        step_rewards: str = "none",
        trace_dir: str | None = None,
        recall_weight: float = 0.5,
        early_exit_penalty: float = 0.0,
        skip_bonus: float = 0.0,
        unsupported_penalty: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        agent_spec(agent)  # an unknown agent is a UsageError now, not in the first rollout
        if reward not in REWARDS:
            raise UsageError(f"reward must be one of {', '.join(REWARDS)}, not {reward!r}")
        if step_rewards not in STEP_REWARDS:
            raise UsageError(f"step_rewards must be one of {', '.join(STEP_REWARDS)}")
        self.agent_name = agent
        self.agent_options = _plain(agent_options)
        gated = self.agent_options.get("exit_gate") or self.agent_options.get("exit_probe")
        if (early_exit_penalty or skip_bonus) and not gated:
            raise UsageError(
                "early_exit_penalty / skip_bonus need agent_options exit_gate: true (or exit_probe)"
            )
        self.reward = reward
        self.recall_weight = float(recall_weight)
        self.gate_weights = (float(early_exit_penalty), float(skip_bonus))
        self.unsupported_penalty = float(unsupported_penalty)
        self.step_rewards = step_rewards
        self.trace_dir = Path(trace_dir) if trace_dir else None

    # verl 0.9.1 annotates run() as returning one output; its v1 worker takes a list
    # (agent_loop_tq.py), which is what multi-conversation rollouts need.
    async def run(  # type: ignore[override, unused-ignore]
        self, sampling_params: dict[str, Any], **kwargs: Any
    ) -> list[AgentLoopOutput]:
        """Run the agent on the row's question and document; one output per conversation."""
        sample = sample_from_row(kwargs)
        backend = ServerBackend(
            self.server_manager,
            self.continuous_token_builder.build_initial_tokens,
            self.tokenizer,
            sampling_params,
            prompt_length=self.rollout_config.prompt_length,
            response_length=self.rollout_config.response_length,
            model=str(OmegaConf.select(self.config, "actor_rollout_ref.model.path") or ""),
        )
        options = {**self.agent_options, "temperature": sampling_params.get("temperature")}
        options["top_p"] = sampling_params.get("top_p")
        tokenizer = TransformersTokenizer(self.tokenizer)
        agent = make_agent(
            self.agent_name,
            backend,
            tokenizer,
            make_config(self.agent_name, **options),
            record_tokens=True,
        )
        document: str | list[Chunk] = sample.context
        if kwargs.get("uid") is not None:  # verl's id of the sample, shared by its rollouts
            size = agent.plan(sample.question).chunk_tokens
            document = await _CHUNKS.get(str(kwargs["uid"]), sample.context, tokenizer, size)
        run = await agent.run(sample.question, document, sample_id=sample.id or None)
        self._save(run, kwargs)
        outputs = self._outputs(run, sample)
        return [self._verl_output(o, backend) for o in outputs]

    def _outputs(self, run: Run, sample: Sample) -> list[ConversationOutput]:
        """The run's conversations, scored by the reward the CPU trainer's credit step gives."""
        golds, kind = sample.answers, str(sample.meta["kind"])
        outcome = reward_function(self.reward, kind, self.recall_weight)(run, golds)
        if any(self.gate_weights):
            correct = outcome_reward(run, golds, kind=kind)
            outcome += exit_gate_term(run, evidence_sentences(sample), correct, *self.gate_weights)
        if self.unsupported_penalty:  # a copy of the whole document, only when it is used
            document = f"{sample.context}\n{sample.question}"
            outcome -= unsupported_term(run, document, golds, self.unsupported_penalty)
        # The same per-conversation term the CPU trainer's credit step computes.
        steps = None if self.step_rewards == "none" else step_terms(run, golds, self.step_rewards)
        before = steps_before_evidence(run, evidence_sentences(sample))
        return conversation_outputs(
            run, outcome, step_rewards=steps, rereads=reread_count(run), before_evidence=before
        )

    def _verl_output(self, output: ConversationOutput, backend: ServerBackend) -> AgentLoopOutput:
        extra: dict[str, Any] = {PAYLOAD_KEY: output.payload, **backend.step_range()}
        scored: dict[str, Any] = {}
        if output.reward_score is not None:  # the final: verl copies both to the others
            scored["reward_score"] = output.reward_score
            extra["reward_extra_info"] = {
                "acc": output.reward_score,
                "conversations": output.payload["step"] + 1,
                "rereads": output.payload["rereads"],
            }
        return AgentLoopOutput(
            prompt_ids=output.prompt_ids,
            response_ids=output.response_ids,
            response_mask=output.response_mask,
            response_logprobs=output.response_logprobs,
            num_turns=2,  # one user message, one reply
            metrics=AgentLoopMetrics(generate_sequences=output.seconds),
            extra_fields=extra,
            **scored,
        )

    def _save(self, run: Run, fields: Mapping[str, Any]) -> None:
        if self.trace_dir is not None:
            name = f"{fields.get('uid', run.run_id)}_{fields.get('session_id', 0)}.json"
            run.save(self.trace_dir / name)


def _plain(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Agent options as a plain dict (hydra hands nested config as a DictConfig)."""
    if isinstance(options, DictConfig):
        container = OmegaConf.to_container(options, resolve=True)
        return {str(k): v for k, v in container.items()} if isinstance(container, dict) else {}
    return dict(options or {})
