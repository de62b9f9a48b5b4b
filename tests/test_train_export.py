"""A trained LoRA exported for llama.cpp (``train.export``), the SmolLM2 Hugging Face folder
(``train.smollm2``) and the ``--adapter`` flag of the embedded backend.

The unit tests read the written GGUF back with ``gguf.GGUFReader`` and check it against peft's
own tensors, with the llama q/k row order written out here independently. The model tests load
the adapter into llama.cpp beside the real SmolLM2 and check that it changes the logits the way
the peft model does (a llama-cpp-python release was reported to drop ``lora_path`` silently).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

from longread.cli import cli
from longread.errors import UsageError
from longread.eval.store import RunStore, run_config
from longread.llm.factory import BackendSettings, make_backend
from longread.llm.llamacpp import LlamaCppBackend
from longread.llm.trained_settings import TrainedSettings, read_trained_settings
from longread.train import export as export_module
from longread.train import smollm2
from longread.train.config import AgentSection
from longread.train.export import export_lora_gguf, save_peft_adapter, trained_settings

ALL_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
GGUF_NAMES = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
}
HEADS, KV_HEADS, HIDDEN, LAYERS = 4, 2, 64, 2


def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=HIDDEN,
        intermediate_size=96,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        vocab_size=128,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)


def tiny_peft(targets: list[str] = ALL_TARGETS, **lora: object):
    options = {"r": 4, "lora_alpha": 8, "init_lora_weights": False, **lora}
    return get_peft_model(tiny_llama(), LoraConfig(target_modules=targets, **options))


def read_adapter(path: Path) -> tuple[dict[str, object], dict[str, np.ndarray]]:
    reader = gguf.GGUFReader(path)
    fields = {
        name: field.contents() for name, field in reader.fields.items() if "." in name
    }  # general.*, adapter.* (the GGUF.* header fields have no dot-free names we need)
    tensors = {t.name: np.array(t.data) for t in reader.tensors}
    return fields, tensors


def rope_rows_for_llamacpp(rows: np.ndarray, n_head: int) -> np.ndarray:
    """Independent of ``export.llama_qk_permute``: within each head of ``d`` rows, Hugging Face
    pairs row ``i`` with row ``i + d/2`` for the rotation; llama.cpp pairs ``2i`` with
    ``2i + 1``. So output row ``2i`` is input row ``i`` and ``2i + 1`` is ``i + d/2``."""
    d = rows.shape[0] // n_head
    order = []
    for head in range(n_head):
        for i in range(d // 2):
            order += [head * d + i, head * d + d // 2 + i]
    return rows[order]


def peft_lora(model, block: int, target: str) -> tuple[np.ndarray, np.ndarray, float]:
    """A, B and scaling of one adapted projection, as peft holds them."""
    part = "self_attn" if target in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
    layer = getattr(getattr(model.base_model.model.model.layers[block], part), target)
    a = layer.lora_A["default"].weight.detach().numpy()
    b = layer.lora_B["default"].weight.detach().numpy()
    return a, b, float(layer.scaling["default"])


# -- the exported file ----------------------------------------------------------------------


def test_export_writes_llamacpp_names_shapes_metadata_and_permuted_qk(tmp_path):
    model = tiny_peft()
    path = export_lora_gguf(model, tmp_path / "adapter.gguf")
    assert path == tmp_path / "adapter.gguf"
    fields, tensors = read_adapter(path)
    assert fields["general.type"] == "adapter"
    assert fields["general.architecture"] == "llama"
    assert fields["adapter.type"] == "lora"
    assert fields["adapter.lora.alpha"] == 8.0
    expected = {
        f"blk.{block}.{GGUF_NAMES[target]}.weight.lora_{ab}"
        for block in range(LAYERS)
        for target in ALL_TARGETS
        for ab in "ab"
    }
    assert set(tensors) == expected  # no output (lm_head) and no token_embd tensors
    for block in range(LAYERS):
        for target in ALL_TARGETS:
            a, b, _ = peft_lora(model, block, target)
            name = f"blk.{block}.{GGUF_NAMES[target]}.weight"
            lora_a, lora_b = tensors[f"{name}.lora_a"], tensors[f"{name}.lora_b"]
            assert lora_a.dtype == lora_b.dtype == np.float32
            assert lora_a.shape == (4, a.shape[1])  # (rank, n_in)
            assert lora_b.shape == (b.shape[0], 4)  # (n_out, rank)
            np.testing.assert_array_equal(lora_a, a)
            heads = {"q_proj": HEADS, "k_proj": KV_HEADS}.get(target)
            want = b if heads is None else rope_rows_for_llamacpp(b, heads)
            np.testing.assert_array_equal(lora_b, want)
            if heads is not None:
                assert not np.array_equal(lora_b, b)  # the permutation did something


def test_the_settings_it_was_trained_with_are_written_beside_the_adapter(tmp_path):
    section = AgentSection(prompt_set="notes", chunk_tokens=700, memory_tokens=96, final_tokens=40)
    path = export_lora_gguf(
        tiny_peft(), tmp_path / "adapter.gguf", trained_with=trained_settings(section)
    )
    assert json.loads((tmp_path / "adapter.json").read_text()) == {
        "adapter": "adapter.gguf",
        "trained_with": {"agent": "memagent", "prompt_set": "notes", "chunk_tokens": 700,
                         "memory_tokens": 96, "final_tokens": 40},
    }  # fmt: skip
    assert read_trained_settings(path) == TrainedSettings("memagent", "notes", 700, 96, 40)
    export_lora_gguf(tiny_peft(), path)  # another adapter, its settings unknown
    assert not (tmp_path / "adapter.json").exists() and read_trained_settings(path) is None


def test_the_peft_adapter_of_the_bundled_model_names_no_machine_path(tmp_path):
    model = tiny_peft()
    cache = str(tmp_path / "cache" / "SmolLM2-135M-Instruct-hf")
    model.get_base_model().config._name_or_path = cache  # as loaded from the cache
    model.get_base_model().name_or_path = cache  # (transformers copies it at load: the card's tag)
    model.peft_config["default"].base_model_name_or_path = cache
    save_peft_adapter(model, tmp_path / "adapter", "smollm2")
    saved = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert saved["base_model_name_or_path"] == "smollm2"
    assert str(tmp_path) not in (tmp_path / "adapter" / "README.md").read_text()
    assert model.peft_config["default"].base_model_name_or_path == cache  # the model unchanged
    assert model.get_base_model().name_or_path == cache


def test_the_gguf_shape_is_llamacpps_element_order(tmp_path):
    # llama.cpp checks lora_a's ne = (n_in, rank) and lora_b's ne = (rank, n_out).
    path = export_lora_gguf(tiny_peft(["k_proj"]), tmp_path / "a.gguf")
    shapes = {t.name: [int(n) for n in t.shape] for t in gguf.GGUFReader(path).tensors}
    kv_rows = HIDDEN // HEADS * KV_HEADS
    assert shapes == {
        "blk.0.attn_k.weight.lora_a": [HIDDEN, 4],
        "blk.0.attn_k.weight.lora_b": [4, kv_rows],
        "blk.1.attn_k.weight.lora_a": [HIDDEN, 4],
        "blk.1.attn_k.weight.lora_b": [4, kv_rows],
    }


def test_a_subset_of_targets_exports_only_those(tmp_path):
    _, tensors = read_adapter(export_lora_gguf(tiny_peft(["q_proj", "down_proj"]), tmp_path / "a"))
    assert sorted(tensors) == [
        f"blk.{b}.{t}.weight.lora_{ab}"
        for b in range(LAYERS)
        for t in ("attn_q", "ffn_down")
        for ab in "ab"
    ]


@pytest.mark.parametrize(
    "lora",
    [
        {"rank_pattern": {"v_proj": 2}, "alpha_pattern": {"o_proj": 3}},
        {"use_rslora": True, "r": 8, "lora_alpha": 4},
    ],
    ids=["rank-and-alpha-patterns", "rslora"],
)
def test_llamacpps_alpha_over_rank_reproduces_every_modules_peft_update(tmp_path, lora):
    """llama.cpp adds (alpha / rank) * B A with one alpha per file; peft's per-module scaling
    (patterns, rsLoRA) must come out the same, so the difference is folded into B."""
    model = tiny_peft(**lora)
    fields, tensors = read_adapter(export_lora_gguf(model, tmp_path / "a.gguf"))
    alpha = fields["adapter.lora.alpha"]
    assert isinstance(alpha, float)
    for block in range(LAYERS):
        for target in ALL_TARGETS:
            a, b, scaling = peft_lora(model, block, target)
            name = f"blk.{block}.{GGUF_NAMES[target]}.weight"
            lora_a, lora_b = tensors[f"{name}.lora_a"], tensors[f"{name}.lora_b"]
            llamacpp_update = alpha / lora_a.shape[0] * (lora_b @ lora_a)
            peft_update = scaling * (b @ a)
            heads = {"q_proj": HEADS, "k_proj": KV_HEADS}.get(target)
            if heads is not None:
                peft_update = rope_rows_for_llamacpp(peft_update, heads)
            np.testing.assert_allclose(llamacpp_update, peft_update, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: tiny_peft(use_dora=True), "DoRA"),
        (lambda: tiny_peft(["q_proj", "lm_head"]), "lm_head"),
        (lambda: tiny_peft(["q_proj", "embed_tokens"]), "embed_tokens"),
        (lambda: tiny_peft(modules_to_save=["lm_head"]), "modules_to_save"),
        (lambda: tiny_peft(lora_bias=True), "LoRA biases"),
        (lambda: _merged(tiny_peft()), "merged"),
        (lambda: tiny_llama(), "peft model"),
    ],
    ids=["dora", "lm_head", "embeddings", "modules_to_save", "bias", "merged", "not-peft"],
)
def test_what_llamacpp_cannot_express_is_refused_and_nothing_written(tmp_path, make, message):
    with pytest.raises(UsageError, match=message):
        export_lora_gguf(make(), tmp_path / "a.gguf")
    assert list(tmp_path.iterdir()) == []


def _merged(model):
    model.merge_adapter()
    return model


def test_other_architectures_are_refused(tmp_path):
    with pytest.raises(UsageError, match="architecture 'qwen2'"):
        export_lora_gguf(tiny_peft(), tmp_path / "a.gguf", base_architecture="qwen2")


def test_a_failed_write_leaves_the_old_file_and_no_partial(tmp_path, monkeypatch):
    path = export_lora_gguf(tiny_peft(["q_proj"]), tmp_path / "a.gguf")
    before = path.read_bytes()

    def disk_full(self):
        raise OSError("No space left on device")

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", disk_full)
    with pytest.raises(OSError, match="No space"):
        export_lora_gguf(tiny_peft(["v_proj"]), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["a.gguf"]


def test_qk_permutation_refuses_rows_that_do_not_split_into_heads():
    with pytest.raises(ValueError, match="heads"):
        export_module.llama_qk_permute(np.zeros((10, 3)), 4)


# -- the SmolLM2 folder ----------------------------------------------------------------------


def test_the_hf_folder_is_converted_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LONGREAD_CACHE_DIR", str(tmp_path / "cache"))
    bundled = tmp_path / "SmolLM2.gguf"
    bundled.write_bytes(b"12345")
    monkeypatch.setattr(smollm2, "bundled_gguf", lambda: bundled)
    conversions = []

    def convert(source: Path, out: Path) -> None:
        conversions.append((source, out))
        out.mkdir()
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(smollm2, "_convert", convert)
    first = smollm2.smollm2_hf_folder()
    assert first == tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct-hf-5"
    assert smollm2.smollm2_hf_folder() == first
    assert len(conversions) == 1 and conversions[0][0] == bundled
    assert conversions[0][1] != first  # written elsewhere, then renamed
    assert sorted(p.name for p in first.parent.iterdir()) == [first.name]


def test_a_failed_conversion_leaves_no_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LONGREAD_CACHE_DIR", str(tmp_path / "cache"))
    bundled = tmp_path / "SmolLM2.gguf"
    bundled.write_bytes(b"12345")
    monkeypatch.setattr(smollm2, "bundled_gguf", lambda: bundled)

    def half_written(source: Path, out: Path) -> None:
        out.mkdir()
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(smollm2, "_convert", half_written)
    with pytest.raises(KeyboardInterrupt):
        smollm2.smollm2_hf_folder()
    assert list((tmp_path / "cache" / "models").iterdir()) == []


# -- the --adapter flag -----------------------------------------------------------------------


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LONGREAD_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def document(tmp_path: Path) -> Path:
    path = tmp_path / "doc.txt"
    path.write_text("The value is 7.")
    return path


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_ask_with_a_missing_adapter_exits_2_with_one_line(document, tmp_path, no_server):
    missing = tmp_path / "missing.gguf"
    result = invoke("ask", str(document), "-q", "q", "--adapter", str(missing))
    assert result.exit_code == 2
    assert result.stderr == f"longread: error: LoRA adapter {missing} does not exist\n"


def test_eval_run_with_a_missing_adapter_exits_2_before_making_the_folder(tmp_path, no_server):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "question": "q", "context": "c", "answers": ["x"]}))
    out = tmp_path / "run"
    result = invoke(
        "eval", "run", "--data", str(data), "--agent", "full", "--out", str(out),
        "--adapter", str(tmp_path / "missing.gguf"), "--no-progress",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "missing.gguf does not exist" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (out / "config.json").exists()


def test_adapter_with_a_server_is_refused(document, tmp_path, no_server):
    adapter = tmp_path / "a.gguf"
    adapter.write_bytes(b"x")
    url = "http://127.0.0.1:9/v1"
    result = invoke("ask", str(document), "-q", "q", "--base-url", url, "--adapter", str(adapter))
    assert result.exit_code == 2
    assert "--adapter applies a LoRA to the embedded model" in result.stderr


def test_adapter_scale_without_an_adapter_is_refused(document, no_server):
    result = invoke("ask", str(document), "-q", "q", "--base-model", "--adapter-scale", "0.5")
    assert result.exit_code == 2
    assert "--adapter-scale scales an --adapter" in result.stderr


def test_the_adapter_flag_reaches_llamacpp(document, tmp_path, no_server):
    """A model file llama.cpp cannot read fails the load, and the message names the adapter
    that was passed along with it (no real model needed)."""
    model, adapter = tmp_path / "model.gguf", tmp_path / "adapter.gguf"
    model.write_bytes(b"GGUF not really")
    adapter.write_bytes(b"GGUF not really")
    result = invoke(
        "ask", str(document), "-q", "q", "--gguf", str(model), "--adapter", str(adapter)
    )  # fmt: skip
    assert result.exit_code == 2
    assert f"with the adapter {adapter}" in result.stderr


def test_make_backend_passes_the_adapter_and_scale(tmp_path, no_server):
    model, adapter = tmp_path / "model.gguf", tmp_path / "adapter.gguf"
    model.write_bytes(b"GGUF not really")
    adapter.write_bytes(b"x")
    settings = BackendSettings(gguf=str(model), adapter=str(adapter), adapter_scale=0.5)
    backend = make_backend(settings)
    assert isinstance(backend, LlamaCppBackend)
    assert (backend.adapter_path, backend._adapter_scale) == (adapter, 0.5)


def write_run_config(run: Path, model: Path, adapter: Path | None, scale: float = 1.0) -> None:
    settings = BackendSettings(
        gguf=str(model), adapter=str(adapter) if adapter else None, adapter_scale=scale
    )
    with RunStore(run) as store:
        store.save_config(run_config("full", {}, settings, "d.jsonl"))


def test_eval_config_records_the_adapter_and_its_hash(tmp_path, no_server):
    model, adapter = tmp_path / "model.gguf", tmp_path / "adapter.gguf"
    model.write_bytes(b"GGUF not really")
    adapter.write_bytes(b"adapter one")
    write_run_config(tmp_path / "run", model, adapter, 0.5)
    backend = json.loads((tmp_path / "run" / "config.json").read_text())["backend"]
    assert backend["adapter"] == str(adapter.resolve())
    assert backend["adapter_sha256"] == "sha256:" + hashlib.sha256(b"adapter one").hexdigest()
    assert backend["adapter_scale"] == 0.5


def test_resume_with_the_same_adapter_elsewhere_is_accepted_and_another_refused(
    tmp_path, no_server
):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF not really")
    first, moved, other = (tmp_path / n for n in ("one.gguf", "moved.gguf", "two.gguf"))
    first.write_bytes(b"adapter one")
    moved.write_bytes(b"adapter one")
    other.write_bytes(b"adapter two")
    run = tmp_path / "run"
    write_run_config(run, model, first)
    write_run_config(run, model, moved)  # same content: resumes
    assert len(json.loads((run / "config.json").read_text())["resumed"]) == 1
    for adapter, scale, what in (
        (other, 1.0, "different LoRA adapter"),
        (None, 1.0, "different LoRA adapter"),
        (first, 0.5, "different adapter scale"),
    ):
        with pytest.raises(UsageError, match=what):
            write_run_config(run, model, adapter, scale)


def test_a_run_without_adapter_refuses_a_resume_with_one(tmp_path, no_server):
    model, adapter = tmp_path / "model.gguf", tmp_path / "adapter.gguf"
    model.write_bytes(b"GGUF not really")
    adapter.write_bytes(b"adapter one")
    write_run_config(tmp_path / "run", model, None)
    with pytest.raises(UsageError, match=r"saved none, now .*adapter\.gguf"):
        write_run_config(tmp_path / "run", model, adapter)


# -- the real model -------------------------------------------------------------------------

PROMPT = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
STEPS = 32  # greedy tokens compared


@pytest.fixture(scope="module")
def smollm2_lora(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, Path]]:
    """SmolLM2 from ``smollm2_hf_folder`` under a random LoRA on every projection (B non-zero,
    so the adapter moves the logits by up to ~20), and that adapter exported for llama.cpp."""
    from transformers import AutoModelForCausalLM

    from longread.train.smollm2 import smollm2_hf_folder

    base = AutoModelForCausalLM.from_pretrained(smollm2_hf_folder(), dtype=torch.float32)
    torch.manual_seed(0)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=ALL_TARGETS, init_lora_weights=False)
    model = get_peft_model(base, config).eval()
    path = export_lora_gguf(model, tmp_path_factory.mktemp("adapter") / "lora.gguf")
    yield model, path


def llama_logits(backend: LlamaCppBackend, prompt: list[int], continuation: list[int]):
    """llama.cpp's next-token logits after the prompt and after each continuation token but
    the last, one token at a time: without logits_all llama.cpp keeps only the last row."""
    import llama_cpp

    llama = backend.llama
    llama.reset()

    def last_row() -> np.ndarray:
        row = llama_cpp.llama_get_logits_ith(llama.ctx, -1)
        return np.ctypeslib.as_array(row, shape=(llama.n_vocab(),)).copy()

    llama.eval(prompt)
    rows = [last_row()]
    for token in continuation[:-1]:
        llama.eval([token])
        rows.append(last_row())
    return np.stack(rows)


def peft_greedy(model, prompt: list[int], steps: int) -> tuple[list[int], np.ndarray, np.ndarray]:
    """peft's greedy continuation with the adapter, and the next-token logits along it with
    and without the adapter."""
    continuation: list[int] = []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt]), use_cache=True)
        while True:
            continuation.append(int(out.logits[0, -1].argmax()))
            if len(continuation) == steps:
                break
            cache = out.past_key_values
            out = model(input_ids=torch.tensor([continuation[-1:]]), past_key_values=cache)
        ids = prompt + continuation
        rows = slice(len(prompt) - 1, len(ids) - 1)
        tensor = torch.tensor([ids])
        adapted = model(input_ids=tensor).logits[0, rows].numpy()
        with model.disable_adapter():
            base = model(input_ids=tensor).logits[0, rows].numpy()
    return continuation, adapted, base


def agreement(model, quant: str, adapter: Path) -> dict[str, float]:
    """llama.cpp (the ``quant`` base, with and without the adapter) against peft, along peft's
    greedy continuation of a chat prompt: how many greedy steps agree, the largest logit
    difference with the adapter, the correlation of the adapter's effect (adapter - base) on
    every logit, and how far the adapter moved llama.cpp's logits at all (largest change, and
    at how many steps llama.cpp's greedy choice with the adapter differs from the base's)."""
    settings = {"quant": quant, "n_ctx": 512, "n_threads": 2}
    with_adapter = LlamaCppBackend(adapter=adapter, **settings)
    plain = LlamaCppBackend(base_model=True, **settings)
    try:
        prompt = _chat_prompt_ids(with_adapter)
        continuation, peft_adapted, peft_base = peft_greedy(model, prompt, STEPS)
        adapted = llama_logits(with_adapter, prompt, continuation)
        base = llama_logits(plain, prompt, continuation)
    finally:
        for backend in (with_adapter, plain):
            asyncio.run(backend.aclose())
    greedy = adapted.argmax(axis=1)
    agree = 0
    while agree < STEPS and greedy[agree] == continuation[agree]:
        agree += 1
    delta_llama, delta_peft = (adapted - base).ravel(), (peft_adapted - peft_base).ravel()
    return {
        "greedy_steps_agreeing": agree,
        "max_logit_diff": float(np.abs(adapted - peft_adapted).max()),
        "base_max_logit_diff": float(np.abs(base - peft_base).max()),
        "delta_correlation": float(np.corrcoef(delta_llama, delta_peft)[0, 1]),
        "adapter_moved_llamacpp_by": float(np.abs(adapted - base).max()),
        "greedy_choices_the_adapter_changed": int((greedy != base.argmax(axis=1)).sum()),
    }


def _chat_prompt_ids(backend: LlamaCppBackend) -> list[int]:
    """The chat prompt as llama.cpp tokenises it; both models read these same ids."""
    from longread.llm.base import SamplingParams
    from longread.llm.llamacpp_chat import render_prompt

    return render_prompt(backend.llama, PROMPT, SamplingParams()).ids


@pytest.mark.model
def test_llamacpp_with_the_adapter_agrees_with_peft_on_an_f16_base(smollm2_lora):
    """On the F16 base (the GGUF's Q4_1 weights, which transformers dequantised, held almost
    exactly) llama.cpp + adapter follows peft's greedy path token for token."""
    model, adapter = smollm2_lora
    seen = agreement(model, "f16", adapter)
    assert seen["greedy_steps_agreeing"] == STEPS, seen
    assert seen["max_logit_diff"] < 0.5, seen
    assert seen["delta_correlation"] > 0.999, seen
    # The adapter really was applied: without it llama.cpp would pick other tokens.
    assert seen["adapter_moved_llamacpp_by"] > 5.0, seen
    assert seen["greedy_choices_the_adapter_changed"] >= STEPS // 4, seen


@pytest.mark.model
def test_the_adapter_works_on_the_default_q8_0_base(smollm2_lora):
    """``--adapter`` on the default base, the Q4_1 file requantised to q8_0: llama.cpp then
    also quantises activations, so logits drift from peft's by a few tenths to units, but the
    adapter's effect is the same one."""
    model, adapter = smollm2_lora
    seen = agreement(model, "q8_0", adapter)
    assert seen["delta_correlation"] > 0.98, seen
    assert seen["adapter_moved_llamacpp_by"] > 5.0, seen
    assert seen["greedy_choices_the_adapter_changed"] >= STEPS // 4, seen


@pytest.mark.model
def test_the_hf_folder_renders_a_chat_as_llamacpp_does():
    """The converted folder keeps the GGUF's chat template and vocabulary: the trainer's
    prompts are the very ids the embedded backend reads."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2.smollm2_hf_folder())
    ids = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_dict=False)
    backend = LlamaCppBackend(n_ctx=512, n_threads=2)
    try:
        assert list(ids) == _chat_prompt_ids(backend)
    finally:
        asyncio.run(backend.aclose())
