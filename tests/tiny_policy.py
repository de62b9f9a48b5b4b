"""A tiny randomly initialised Llama chat model, built in the test run (no download).

A byte-level BPE tokenizer trained on the bundled prompt files (so prompts stay short), a chat
template in SmolLM2's ChatML style, and a 2-layer Llama with tied embeddings: small enough for a
GRPO step in seconds, the same architecture and code path as SmolLM2.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _corpus() -> list[str]:
    prompts = files("longread") / "agents" / "prompts"
    # In name order: a folder's listing order differs between file systems, and BPE merges
    # with it, so an unsorted corpus builds another tokenizer on another machine.
    folders = sorted((d for d in prompts.iterdir() if d.is_dir()), key=lambda d: d.name)
    texts = [f.read_text() for d in folders for f in sorted(d.iterdir(), key=lambda f: f.name)]
    return [*texts, "The special magic number is 4817. Paris Lyon Turin filler text."] * 3


def build_tiny_policy_folder(folder: Path, *, seed: int = 0, window: int = 4096) -> Path:
    """Write a tiny chat model (weights, config, tokenizer) to ``folder`` and return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(_corpus(), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=window,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def reply_length(run, golds) -> float:  # type: ignore[no-untyped-def]
    """A reward a random model earns unevenly (the length of its final reply, in hundreds of
    characters), so its GRPO groups have non-zero advantages. Named in configs as
    ``tests.tiny_policy:reply_length``."""
    return len(run.final_reply or "") / 100


def two_chunk_samples(count: int) -> list[dict[str, object]]:
    """A synthetic needle task: each document is 430 tiny-model tokens, two chunks of 250."""
    rows = []
    for i in range(count):
        context = (
            "Filler sentence about mountains and rivers. " * 12
            + f"The special magic number is {4810 + i}. "
            + "More filler about the sea. " * 12
        )
        rows.append(
            {
                "id": f"q{i}",
                "question": "What is the special magic number?",
                "context": context,
                "answers": [str(4810 + i)],
            }
        )
    return rows


def flat_for_the_first_question(run, golds) -> float:  # type: ignore[no-untyped-def]
    """``reply_length``, except that every rollout of the question about 4810 scores 1: its
    group is degenerate (all rewards equal) and teaches nothing. Named in configs as
    ``tests.tiny_policy:flat_for_the_first_question``."""
    return 1.0 if "4810" in golds else reply_length(run, golds)
