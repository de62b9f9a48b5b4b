"""Self-distilled update rows: an adapter's own replies as the targets of a later stage.

A stage that teaches one new reply moves the others too. Stage sft29x learnt the update
gate's ``<keep/>`` on needle documents, and its HotpotQA notes drifted from the shipped
adapter's: it kept other paragraphs, and HotpotQA 8K fell from 5/20 to 1/20. The oracle's
HotpotQA rows copy the supporting sentences, which is not what the shipped adapter writes,
so they pull the notes somewhere new. Self-distillation shows a later stage instead the replies
the earlier adapter wrote itself, in the memory states its own reading reached, so that on
those documents the stage has nothing new to learn.

A teacher's replies come from an ``eval run`` folder read in the papers' order without gates
(its traces hold every update's prompt and reply). ``distilled_record`` adds them to a sample
as ``meta["teacher_updates"]``: per update, the memory shown, the section and the reply.
The oracle (``oracle.py``) turns such a sample into update rows under the training agent's
own prompt (with its gate instructions), each with the teacher's reply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..agents.memagent import update_messages
from ..agents.prompts import Prompts, render
from ..data.records import Sample
from ..errors import UsageError

TEACHER_UPDATES = "teacher_updates"  # the sample meta key the oracle reads
_MEMORY, _SECTION = "\x00memory\x00", "\x00section\x00"  # never in a rendered prompt


def teacher_prompts(config: Mapping[str, Any]) -> Prompts:
    """The prompts of a teacher run (its ``config.json``), refusing a run whose update
    prompts are not the papers' plain ones: the section-first order, or a gate's sentence."""
    agent = config.get("agent_config", {})
    if config.get("agent") != "memagent":
        raise UsageError(f"a teacher run must be memagent's, not {config.get('agent')!r}")
    for option in ("section_first", "update_gate", "exit_gate"):
        if agent.get(option):
            raise UsageError(f"a teacher run must read without {option}: its prompts differ")
    return Prompts(agent.get("prompt_set", "paper"), agent.get("prompt_dir"))


def teacher_updates(trace: Mapping[str, Any], prompts: Prompts) -> list[dict[str, str]]:
    """The first-pass updates of one trace: ``{"memory", "section", "reply"}`` each, the
    memory and section read back from the recorded prompt (and checked by building it again).
    Rereads and probes are left out: a stage learns the update call from these."""
    question = trace["question"]
    updates = []
    for step in trace["steps"]:
        if step["kind"] != "update" or step.get("phase") or step.get("reply") is None:
            continue
        content = step["messages"][-1]["content"]
        memory, section = split_update_prompt(content, question, prompts)
        updates.append({"memory": memory, "section": section, "reply": step["reply"]})
    return updates


def split_update_prompt(content: str, question: str, prompts: Prompts) -> tuple[str, str]:
    """The memory and section an update prompt (the papers' layout) was built from."""
    marked = render("memagent_update", prompts, question=question, memory=_MEMORY, chunk=_SECTION)
    head, rest = marked.split(_MEMORY)
    middle, tail = rest.split(_SECTION)
    inner = content[len(head) : len(content) - len(tail)]
    memory, _, section = inner.partition(middle)
    rebuilt = update_messages(question, memory, section, prompts)
    if rebuilt[-1]["content"] != content:  # also a prompt of another layout or set
        raise UsageError(f"an update prompt of {question!r} is not the papers' update prompt")
    return memory, section


def distilled_record(sample: Sample, trace: Mapping[str, Any], prompts: Prompts) -> dict:
    """``sample`` as a data record with its teacher's updates in its meta."""
    if trace.get("sample_id") != sample.id:
        raise UsageError(f"trace of {trace.get('sample_id')!r} given for sample {sample.id!r}")
    record = sample.to_dict()
    record["meta"] = {**sample.meta, TEACHER_UPDATES: teacher_updates(trace, prompts)}
    return record


def teacher_of(sample: Sample) -> Sequence[Mapping[str, str]]:
    """A sample's teacher updates (none for a plain sample)."""
    return sample.meta.get(TEACHER_UPDATES) or ()
