"""`longread train --config FILE`: every setting, its default and its help, in one place.

A config file is TOML (or YAML) with one table per section below; anything left out keeps its
default, an unknown key or a wrongly typed value is a one-line error. The resolved config (all
defaults filled in) is saved beside the checkpoints, and a resumed run must match it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..agents.memagent import MemAgentConfig
from ..agents.prompts import DEFAULT_PROMPT_SET
from ..errors import UsageError
from ..llm.base import TRAINING_SAMPLING

MEMORY_AGENTS = ("memagent", "memreread", "rememr1")  # the agents sft has oracle episodes of

# Who samples the rollouts (see engines.py); here so that checking a config needs no torch.
ENGINES = ("transformers", "llamacpp")
# The kinds of oracle conversation (train/oracle.py OracleTurn.kind) run.row_kinds may name.
ROW_KINDS = frozenset({"update", "final", "probe", "decide", "integrate"})


def option(default: Any, help: str) -> Any:
    """A config field with its default and the help ``--print-config`` shows."""
    return field(default=default, metadata={"help": help})


def helped(text: str) -> dict[str, str]:
    """The metadata of a field with a default factory (lists, tables)."""
    return {"help": text}


@dataclass
class ModelSection:
    path: str = option(
        "smollm2",
        "a transformers model folder, or 'smollm2' for the bundled SmolLM2-135M-Instruct "
        "(converted once from its GGUF into the cache)",
    )
    lora: bool = option(True, "train a LoRA adapter through peft; false = full fine-tuning")
    lora_rank: int = option(16, "LoRA rank r")
    lora_alpha: float = option(32.0, "LoRA alpha; the update is scaled by alpha / r")
    lora_dropout: float = option(0.0, "LoRA dropout (0 keeps training deterministic)")
    lora_targets: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        metadata=helped("modules that get a LoRA adapter"),
    )
    context_window: int = option(0, "tokens one call may use; 0 = the model's own")
    adapter: str = option(
        "", "start from this peft adapter folder (e.g. an sft run's adapter/); '' = a new LoRA"
    )


@dataclass
class AgentSection:
    name: str = option("memagent", "the agent rolled out: memagent, rememr1 or memreread")
    # The defaults are memagent's own, as ask, eval and serve use them (the papers' settings),
    # so that a model trained with the defaults is read the way it was trained.
    prompt_set: str = option(
        DEFAULT_PROMPT_SET, "bundled prompt set: 'paper' or 'notes' (ask's default: paper)"
    )
    chunk_tokens: int = option(
        MemAgentConfig.chunk_tokens, "largest chunk of the document per update call"
    )
    memory_tokens: int = option(
        MemAgentConfig.memory_tokens, "max new tokens of each memory update (the memory cap)"
    )
    final_tokens: int = option(MemAgentConfig.final_tokens, "max new tokens of the final answer")
    options: dict[str, Any] = field(
        default_factory=dict,
        metadata=helped("further options of the agent's config (e.g. max_rereads)"),
    )


@dataclass
class DataSection:
    train: list[str] = field(
        default_factory=list,
        metadata=helped("training data: files or folders that `eval run` reads"),
    )
    eval: list[str] = field(
        default_factory=list, metadata=helped("held-out data evaluated every run.eval_every steps")
    )
    eval_limit: int = option(0, "evaluate only the first N held-out samples; 0 = all")


@dataclass
class RolloutSection:
    questions: int = option(4, "questions (groups) per step")
    rollouts: int = option(4, "rollouts per question (n); advantages are relative within them")
    # The training preset: the full distribution at temperature 1.0 (no top-k, no min-p, no
    # penalties on either engine), the one the loss's logprobs describe.
    temperature: float = option(
        TRAINING_SAMPLING.temperature, "sampling temperature of rollouts (the papers use 1.0)"
    )
    top_p: float = option(TRAINING_SAMPLING.top_p, "nucleus sampling of rollouts")
    engine: str = option(
        "transformers",
        "transformers (the policy's own fp32 weights: exactly on-policy, slow) or llamacpp "
        "(the current LoRA exported to llama.cpp every step: ~5x faster sampling)",
    )
    base_gguf: str = option(
        "", "llamacpp engine: GGUF of the base weights ('' = the bundled SmolLM2 in F16)"
    )
    refill: int = option(
        0,
        "dynamic sampling (DAPO): up to this many more rounds per step, each rolling out new "
        "questions in place of the groups whose rollouts all scored the same (which teach "
        "nothing); 0 = drop them, as GRPO does",
    )


@dataclass
class RewardSection:
    reward: str = option(
        "strict",
        "strict (the eval judge), contained (MemReread's), or strict+recall (partial credit: "
        "plus recall_weight x word recall of the gold answer in the final memory), or "
        "module:function (your own: f(run, golds) -> float)",
    )
    recall_weight: float = option(0.5, "weight of the memory recall in strict+recall")
    estimator: str = option(
        "grpo", "grpo (MemAgent), rememr1 (alpha-mixed step rewards) or rea (MemReread)"
    )
    alpha: float = option(-1.0, "estimator mix weight; -1 = the paper's (rememr1 0.8, rea 0.05)")
    std_normalise: bool = option(False, "divide GRPO advantages by the group's std")
    keep_degenerate: bool = option(
        False, "keep groups whose rollouts all got the same reward (their advantage is 0)"
    )
    # GRU-Mem's exit-gate rewards (train/rewards.py exit_gate_reward); need the agent's
    # exit_gate option. 0 and 0: the papers' MemAgent reward, unchanged.
    early_exit_penalty: float = option(
        0.0, "exit gate: subtract this when a rollout stopped reading before the evidence"
    )
    skip_bonus: float = option(
        0.0, "exit gate: add this x the share of chunks not read when the answer is right"
    )
    unsupported_penalty: float = option(
        0.0,
        "subtract this x the share of updates whose notes hold a number neither the document, "
        "the question nor a gold answer states (a made-up answer; 0 = the papers' reward)",
    )
    credit_before_evidence: bool = option(
        True,
        "false: the updates before the first evidence sentence was shown get no advantage "
        "(what a rollout wrote at filler sections is neither paid nor blamed by the outcome; "
        "true = the papers' broadcast to every conversation)",
    )
    ungrounded_penalty: float = option(
        0.0,
        "with agent.options.grounded_notes: an update whose notes about the question the "
        "sections read do not hold (flagged notes_ungrounded, such as a value claimed before "
        "the needle) loses this much advantage against its group's updates at the same step "
        "that wrote none, centred as ReMemR1's step term (0 = the papers' outcome-only credit)",
    )


@dataclass
class OptimSection:
    lr: float = option(1e-4, "AdamW learning rate (papers: 1e-6 for full fine-tuning)")
    warmup_steps: int = option(0, "linear learning-rate warm-up steps")
    weight_decay: float = option(0.0, "AdamW weight decay")
    grad_clip: float = option(1.0, "clip the gradient norm to this; 0 = no clipping")
    micro_batch: int = option(
        4, "conversations per forward/backward (gradient accumulation; like lengths together)"
    )
    gradient_checkpointing: bool = option(
        False,
        "keep only each layer's input in the forward and recompute the rest in the backward: "
        "the same gradient for one more forward, and less memory (an alternative to a smaller "
        "micro_batch when a step runs out of memory; its saving on SmolLM2 is not measured)",
    )
    epochs: int = option(1, "optimizer passes over each step's rollouts (PPO epochs)")
    minibatches: int = option(
        2,
        "optimizer steps per pass, each on its share of the step's rows (interleaved): with "
        "2, the second step trains on rows sampled by the weights before the first, so the "
        "PPO ratio moves off 1 and clip_low/clip_high can act (with 1 and one epoch the ratio "
        "is exactly 1: the clip never acts); costs one no-grad forward of the later shares",
    )
    clip_low: float = option(0.2, "PPO ratio clip below 1")
    clip_high: float = option(0.2, "PPO ratio clip above 1 (0.28 = DAPO's clip-higher)")
    kl_coef: float = option(0.0, "k3 KL penalty to the reference policy (papers: 0.001)")
    old_logprobs: str = option(
        "auto",
        "auto (the first minibatch's rows: the update's own first forward, detached, which "
        "is what a separate pass would compute, one forward cheaper; the other rows: "
        "recompute), recompute (a no-grad forward of the trainer before the update) or "
        "sampler (the rollout backend's own, exact only when it ran the same fp32 weights)",
    )


@dataclass
class RunSection:
    objective: str = option(
        "grpo",
        "grpo (RL on the agent's own rollouts) or sft (supervised warm start on oracle "
        "memagent episodes: the evidence sentences copied into the notes, the gold answer boxed)",
    )
    steps: int = option(10, "training steps (each takes rollout.questions samples)")
    seed: int = option(0, "seed of data order, rollouts and initialisation")
    eval_every: int = option(
        0, "evaluate the held-out set every K steps (and at the end); 0 = never"
    )
    evidence_weight: float = option(
        1.0,
        "sft: weight of the tokens of the updates that take new evidence into the notes (the "
        "rare, hard rows: most updates only keep the notes as they are); 1 = a plain token mean",
    )
    noisy_notes: float = option(
        0.0,
        "sft: chance that an update after the first shows notes with a run of filler sentences "
        "from sections already read added, the ideal reply still the clean notes (teaches "
        "dropping copied filler; memagent, memreread's root pass and rememr1); 0 = the clean "
        "oracle episodes only",
    )
    false_claims: float = option(
        0.0,
        "sft: chance that an update after the first shows notes with a made-up answer added "
        "(the question's words with a wrong value), the ideal reply still the clean notes "
        "(teaches dropping answers the document has not given; with rememr1 also the "
        "question's frame with no value, the note warm start sft28q made up); 0 = never",
    )
    probe_noisy_yes: float = option(
        0.0,
        "sft with agent option exit_probe: chance that the probe that answers yes (the notes "
        "now hold every evidence sentence) is asked once more of those notes with filler "
        "sentences added, also answered yes; 0 = the yes probe on clean notes only (stage "
        "sft29q, whose probe then said no to needle notes with any filler)",
    )
    keep_share: float = option(
        1.0,
        "sft with agent option update_gate: chance that a section without evidence is taught "
        "<keep/> (the rest the papers' copy of the notes); 1 = every such section <keep/> "
        "(stage sft29g, which then lost the rows that carry notes and stopped carrying needles)",
    )
    keep_weight: float = option(
        1.0,
        "sft with agent option update_gate: loss weight of the rows whose reply is <keep/> "
        "(a few tokens each, so a token mean gives them little say against rows that write "
        "notes: stage sft29v taught <keep/> on 80% of the empty sections and never wrote it)",
    )
    first_hop: float = option(
        0.0,
        "sft with agent memreread (max_reread 2 or more): chance that a two-hop chain's "
        "episode shows its first decision root notes that missed the bridge (empty, or other "
        'sentences of the document) and asks the first hop ("Where did the olive satchel end '
        'up?"), then rereads for it and asks the code of the place found; 0 = the decision '
        "is shown the oracle's notes only",
    )
    decision_weight: float = option(
        1.0,
        "sft with agent memreread: weight of the decide rows (a sub-question or <stop/>, a "
        "few tokens each) in the loss; 1 = a plain token mean",
    )
    followup_weight: float = option(
        1.0,
        "sft with agent memreread: the decide rows that ask a sub-question after a round (the "
        "place's code, once the first hop found the place; a warm start repeated the "
        "history's question there, stop 63) weigh this times decision_weight; 1 = as the "
        "other decisions",
    )
    rememr1_thoughts: bool = option(
        True,
        "sft with agent rememr1: the oracle's replies open with a sentence of reasoning, as "
        "ReMemR1's prompt asks; false starts them at <update> (warm starts took the commoner "
        "reason for every section, stop 65, so the notes then decide)",
    )
    update_share: float = option(
        1.0,
        "sft: share of the updates that take in no evidence kept as training rows (drawn at "
        "random; evidence updates and final answers are always kept). Long documents then "
        "cost a few rows each while their late memory states (many sections read) are still "
        "shown: state-reset rows; 1 = every update",
    )
    keep_empty_updates: bool = option(
        False,
        "sft: with update_share < 1, keep every update shown empty notes (the first sections "
        "before any evidence), where a model learns not to make an answer up",
    )
    chunk_choices: list[int] = field(
        default_factory=list,
        metadata=helped(
            "sft: other chunk sizes (tokens) the oracle episodes are cut at, drawn per sample "
            "with agent.chunk_tokens, so that the adapter also reads larger sections (fewer "
            "calls; section-first's prefix cache saves more); [] = agent.chunk_tokens only"
        ),
    )
    row_kinds: list[str] = field(
        default_factory=list,
        metadata=helped(
            "sft: train only the oracle conversations of these kinds (update, final, probe; "
            'MemReread\'s decide and integrate), e.g. ["decide", "integrate"]: a few '
            "hundred tokens each, so a step can show many questions' decisions without their "
            "1,000-token updates; [] = every kind"
        ),
    )
    section_first_share: float = option(
        0.0,
        "sft: share of the oracle episodes written in the section-first order (the section "
        "before the problem and the memory, as --section-first reads), drawn per sample, so "
        "one adapter serves both orders; 0 = the agent's own order only",
    )
    keep_checkpoints: int = option(2, "checkpoints kept (the newest ones)")
    save_rollouts: bool = option(
        True,
        "grpo: keep every step's rollouts (each run's steps without token ids, its reward, "
        "its advantages, its group) in rollouts/step-NNNNNN.jsonl.gz, to read what a stage "
        "learnt on; a resume may change it",
    )
    threads: int = option(0, "torch CPU threads; 0 = torch's default")


@dataclass
class TrainConfig:
    """Every setting of a training run, grouped as in the config file."""

    model: ModelSection = field(default_factory=ModelSection)
    agent: AgentSection = field(default_factory=AgentSection)
    data: DataSection = field(default_factory=DataSection)
    rollout: RolloutSection = field(default_factory=RolloutSection)
    reward: RewardSection = field(default_factory=RewardSection)
    optim: OptimSection = field(default_factory=OptimSection)
    run: RunSection = field(default_factory=RunSection)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "config") -> TrainConfig:
        """Build from parsed TOML/YAML; unknown sections or keys and wrong types raise."""
        if not isinstance(raw, dict):
            raise UsageError(f"{where}: expected tables of settings at the top level")
        sections = {f.name: f for f in fields(cls)}
        unknown = sorted(set(raw) - set(sections))
        if unknown:
            raise UsageError(f"{where}: unknown section(s) {', '.join(unknown)}")
        built = {
            name: _section(f.default_factory, raw.get(name) or {}, f"{where} [{name}]")
            for name, f in sections.items()
        }
        config = cls(**built)
        config.check()
        return config

    def check(self) -> None:
        """Refuse settings that cannot work, before a model is loaded."""
        from .credit import ESTIMATORS, REWARDS

        if self.reward.reward not in REWARDS and ":" not in self.reward.reward:
            raise UsageError(
                f"reward.reward must be one of {', '.join(REWARDS)}, or module:function"
            )
        if self.reward.estimator not in ESTIMATORS:
            raise UsageError(f"reward.estimator must be one of {', '.join(ESTIMATORS)}")
        self._check_gate_rewards()
        self._check_agent()
        if self.optim.old_logprobs not in ("auto", "recompute", "sampler"):
            raise UsageError("optim.old_logprobs must be 'auto', 'recompute' or 'sampler'")
        if self.run.objective not in ("grpo", "sft"):
            raise UsageError("run.objective must be 'grpo' or 'sft'")
        if self.run.objective == "sft" and self.agent.name not in MEMORY_AGENTS:
            raise UsageError(
                "run.objective = 'sft' builds oracle episodes of a memory agent: agent.name "
                "memagent, memreread or rememr1"
            )
        if self.run.section_first_share > 0 and self.agent.name == "rememr1":
            raise UsageError("run.section_first_share: rememr1 has no section-first order")
        if self.model.adapter and not self.model.lora:
            raise UsageError("model.adapter continues a LoRA: set model.lora = true")
        if self.rollout.engine not in ENGINES:
            raise UsageError(f"rollout.engine must be one of {', '.join(ENGINES)}")
        if self.rollout.engine == "llamacpp" and self.optim.old_logprobs == "sampler":
            raise UsageError(
                "rollout.engine = 'llamacpp' samples with other weights (quantised, another "
                "kernel): set optim.old_logprobs = 'auto' or 'recompute'"
            )
        for name, value in (
            ("rollout.questions", self.rollout.questions),
            ("rollout.rollouts", self.rollout.rollouts),
            ("optim.micro_batch", self.optim.micro_batch),
            ("optim.epochs", self.optim.epochs),
            ("optim.minibatches", self.optim.minibatches),
            ("run.keep_checkpoints", self.run.keep_checkpoints),
        ):
            if value < 1:
                raise UsageError(f"{name} must be at least 1")
        if self.run.steps < 0:
            raise UsageError("run.steps must be 0 or more")
        unknown = set(self.run.row_kinds) - ROW_KINDS
        if unknown:
            raise UsageError(
                f"run.row_kinds: unknown kind {sorted(unknown)[0]!r}; "
                f"choose from {', '.join(sorted(ROW_KINDS))}"
            )
        if any(size < 1 for size in self.run.chunk_choices):
            raise UsageError("run.chunk_choices are chunk sizes in tokens: each at least 1")
        if self.rollout.refill < 0:
            raise UsageError("rollout.refill must be 0 or more")
        if self.rollout.refill and self.reward.keep_degenerate:
            raise UsageError(
                "rollout.refill replaces the groups that reward.keep_degenerate keeps: choose one"
            )
        for name, chance in (
            ("run.noisy_notes", self.run.noisy_notes),
            ("run.false_claims", self.run.false_claims),
            ("run.update_share", self.run.update_share),
            ("run.section_first_share", self.run.section_first_share),
            ("run.probe_noisy_yes", self.run.probe_noisy_yes),
            ("run.keep_share", self.run.keep_share),
            ("run.first_hop", self.run.first_hop),
        ):
            if not 0.0 <= chance <= 1.0:
                raise UsageError(f"{name} is a chance: between 0 and 1")
        if self.run.keep_share < 1 and not self.agent.options.get("update_gate"):
            raise UsageError(
                "run.keep_share shapes the update gate's replies: set "
                "agent.options = { update_gate = true }"
            )
        if self.run.keep_weight != 1 and not self.agent.options.get("update_gate"):
            raise UsageError(
                "run.keep_weight weighs the update gate's <keep/> rows: set "
                "agent.options = { update_gate = true }"
            )
        weights = (
            self.run.evidence_weight, self.run.decision_weight, self.run.followup_weight,
            self.run.keep_weight,
        )  # fmt: skip
        if min(weights) < 0:
            raise UsageError(
                "run.evidence_weight, run.decision_weight, run.followup_weight and "
                "run.keep_weight must be 0 or more"
            )
        if not self.run.rememr1_thoughts and self.agent.name != "rememr1":
            raise UsageError(
                'run.rememr1_thoughts = false shapes ReMemR1\'s replies: set agent.name = "rememr1"'
            )
        if not self.data.train:
            raise UsageError("data.train is empty: name the training data files or folders")

    def _check_gate_rewards(self) -> None:
        terms = (self.reward.early_exit_penalty, self.reward.skip_bonus)
        sizes = (*terms, self.reward.unsupported_penalty, self.reward.ungrounded_penalty)
        if min(sizes) < 0:
            raise UsageError(
                "reward.early_exit_penalty, skip_bonus, unsupported_penalty and "
                "ungrounded_penalty are sizes: 0 or more"
            )
        options = self.agent.options
        if self.reward.ungrounded_penalty > 0 and not options.get("grounded_notes"):
            raise UsageError(
                "reward.ungrounded_penalty reads the grounded-notes check: set "
                "agent.options = { grounded_notes = true }"
            )
        if max(terms) > 0 and not (options.get("exit_gate") or options.get("exit_probe")):
            raise UsageError(
                "reward.early_exit_penalty / skip_bonus reward the exit gate: set "
                "agent.options = { exit_gate = true } (or exit_probe = true)"
            )

    def _check_agent(self) -> None:
        """Refuse an unknown agent, and an estimator that cannot train the agent (before any
        rollout: ``rememr1`` would fail at MemReread's first decide call, ``rea`` would rank
        rollouts by rereads an agent never makes)."""
        from ..agents.registry import agent_spec
        from .credit import ESTIMATOR_AGENTS

        agent_spec(self.agent.name)
        estimator = self.reward.estimator
        agents = ESTIMATOR_AGENTS[estimator]
        never_rereads = self.agent.options.get("max_reread") == 0
        if self.run.objective == "grpo" and (
            (agents is not None and self.agent.name not in agents)
            or (estimator == "rea" and never_rereads)
        ):
            agent = self.agent.name + (" with max_reread = 0" if never_rereads else "")
            raise UsageError(
                f"reward.estimator {estimator} cannot train agent.name {agent}; pairs that "
                "work: grpo with any agent, rememr1 with memagent or rememr1, rea with "
                "memreread (max_reread >= 1)"
            )

    def warnings(self) -> list[str]:
        """Settings that run but do less than they say, one line each (``train`` prints
        them before the run)."""
        optim = self.optim
        if self.run.objective == "grpo" and optim.epochs * optim.minibatches == 1:
            return [
                "optim.epochs = 1 and optim.minibatches = 1: the PPO ratio is exactly 1 at "
                f"every token, so clip_low/clip_high ({optim.clip_low}/{optim.clip_high}) "
                "can never act; set optim.minibatches = 2 (the default) for a clip that can"
            ]
        return []


def _section(factory: Any, raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: expected a table of settings")
    defaults = factory()
    known = {f.name: f for f in fields(defaults)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise UsageError(f"{where}: unknown setting(s) {', '.join(unknown)}")
    for name, value in raw.items():
        items = int if str(known[name].type) == "list[int]" else str  # a list's item type
        setattr(defaults, name, _typed(getattr(defaults, name), value, f"{where} {name}", items))
    return defaults


def _typed(default: Any, value: Any, where: str, items: type = str) -> Any:
    """``value`` if it has the default's type (ints pass as floats; a string as a 1-list);
    a list's values must be ``items``."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, list):
        value = [value] if isinstance(value, str) and items is str else value
        ok = isinstance(value, list) and all(
            isinstance(v, items) and not isinstance(v, bool) for v in value
        )
    elif isinstance(default, dict):
        ok = isinstance(value, dict)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise UsageError(f"{where}: expected {type(default).__name__}, got {value!r}")
    return value


def load_config(path: str | Path) -> TrainConfig:
    """Read a TOML (or .yaml/.yml) config file; relative data paths resolve against its folder."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read config {file}: {exc.strerror}") from None
    raw = _parse(text, file)
    config = TrainConfig.from_dict(raw, str(file))
    config.data.train = [_near(file, p) for p in config.data.train]
    config.data.eval = [_near(file, p) for p in config.data.eval]
    if config.rollout.base_gguf:
        config.rollout.base_gguf = _near(file, config.rollout.base_gguf)
    if config.model.path != "smollm2":
        config.model.path = _near(file, config.model.path)
    if config.model.adapter:
        config.model.adapter = _near(file, config.model.adapter)
    return config


def _parse(text: str, file: Path) -> Any:
    if file.suffix in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise UsageError(f"{file} is not valid YAML: {exc}") from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{file} is not valid TOML: {exc}") from None


def _near(file: Path, path: str) -> str:
    candidate = Path(path).expanduser()
    return str(candidate if candidate.is_absolute() else (file.parent / candidate).resolve())


def describe_defaults() -> str:
    """Every setting as a commented TOML file: its default and its help."""
    lines = ["# longread train --config FILE: every setting with its default."]
    for section in fields(TrainConfig):
        lines += ["", f"[{section.name}]"]
        defaults = section.default_factory()  # type: ignore[operator]
        for f in fields(defaults):
            default = getattr(defaults, f.name)
            lines.append(f"# {f.metadata['help']}")
            lines.append(f"{f.name} = {_toml_value(default)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return (
            "{}"
            if not value
            else "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
        )
    return json.dumps(value)
