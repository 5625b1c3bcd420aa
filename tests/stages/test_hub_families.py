"""The small open models people fine-tune, as transformers builds them from each family's real
configuration (shrunk to a few thousand weights, random): GPT-2 (its tanh GELU, its head tied),
Llama 3.2 (Llama 3's rotary scaling, a tied head, heads set apart from the width), SmolLM2 (a tied
llama), Qwen2.5 (biases on the queries, keys and values, RMSNorm epsilon 1e-6, an embedding
table longer than its tokenizer, which normalizes to NFC and names no BOS), Qwen3 (QK-norm, heads
wider than the width over the heads), SmolLM3 (every 4th layer without rotary positions), Gemma 3
(its (1 + w) norms around each branch, GeGLU, local layers within a window the texts pass, its
SentencePiece-style tokenizer) and TinyLlama (a llama with Llama 2's SentencePiece-style tokenizer). Each goes through the
real commands with every guarantee: imported with transformers' logits, evaluated to
transformers' loss, sampled to transformers' greedy text, and (a case of each family) fine-tuned
with dropout, resumed and run on two processes to the same bytes, and exported as the class it
came from, computing the fine-tuned model's logits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import HELD_OUT_DOCUMENTS, TRAINING_DOCUMENTS, zrodlo_succeeds
from library_tokenizers import gemma_file, gpt2_file, llama2_file, llama3_file, qwen2_file

from oracles import transformers_loss
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.model.decoder import build_decoder
from zrodlo.training.checkpoint import read_model

# In `make test`, not `make check`: transformers models, training runs and worker processes.
pytestmark = pytest.mark.slow

transformers = pytest.importorskip("transformers")

# attention_dropout on: fine-tuning draws dropout masks (GPT-2 drops at 0.1 by default).
SHAPE = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
         "attention_dropout": 0.1}  # fmt: skip
# Each family's configuration as its released models state it, at a tiny width.
CASES = {
    "gpt2": ("GPT2LMHeadModel", {"vocab_size": 360, "n_positions": 32, "n_embd": 32,
                                 "n_layer": 2, "n_head": 4}),
    "llama3.2": ("LlamaForCausalLM", {
        **SHAPE, "vocab_size": 360, "max_position_embeddings": 32, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8},
        "tie_word_embeddings": True}),
    "smollm2": ("LlamaForCausalLM", {
        **SHAPE, "vocab_size": 360, "max_position_embeddings": 32, "num_attention_heads": 4,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "rope_theta": 100000.0,
        "tie_word_embeddings": True}),
    "qwen2.5": ("Qwen2ForCausalLM", {
        **SHAPE, "vocab_size": 400, "max_position_embeddings": 32, "num_attention_heads": 4,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": 32768,
        "max_window_layers": 1}),
    # Heads set apart from the width as Qwen3-0.6B's (16 of 128 over 1,024), QK-norm, tied.
    "qwen3": ("Qwen3ForCausalLM", {
        **SHAPE, "vocab_size": 400, "max_position_embeddings": 32, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": None,
        "max_window_layers": 2, "attention_bias": False}),
    # Four layers, so that the last attends without rotary positions, as every 4th of SmolLM3-3B.
    "smollm3": ("SmolLM3ForCausalLM", {
        **SHAPE, "num_hidden_layers": 4, "vocab_size": 360, "max_position_embeddings": 32,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
        "rope_theta": 5000000.0, "no_rope_layers": [1, 1, 1, 0], "no_rope_layer_interval": 4,
        "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": None,
        "pad_token_id": None, "bos_token_id": None, "eos_token_id": None}),
    # Gemma-3-270m's layout: one key and value head, heads wider than the width over the heads,
    # every 3rd layer global (every 6th of 18 released), the others within a window shrunk from
    # 512 to 4 keys, which the texts and the greedy continuation pass; rotary bases by layer type.
    "gemma3": ("Gemma3ForCausalLM", {
        **SHAPE, "num_hidden_layers": 3, "vocab_size": 420, "max_position_embeddings": 32,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
        "query_pre_attn_scalar": 16, "rms_norm_eps": 1e-6, "sliding_window": 4,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": None,
        "attn_logit_softcapping": None, "use_bidirectional_attention": False,
        "tie_word_embeddings": True, "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1}),
    # TinyLlama-1.1B's layout (Llama 2's): an untied llama, with Llama 2's SentencePiece-style
    # tokenizer, which puts a mark before each text.
    "tinyllama": ("LlamaForCausalLM", {
        **SHAPE, "vocab_size": 420, "max_position_embeddings": 32, "num_attention_heads": 4,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}),
}  # fmt: skip
IDS = torch.tensor([[0, 5, 17, 80, 200, 33, 2, 9, 150, 64], [3, 3, 3, 100, 7, 250, 1, 0, 4, 5]])
FLAGS = {"--context": 9, "--checkpoint-every": 2, "--micro-batch-size": 2}
SAME = ("model.safetensors", "optimizer.safetensors", "config.json", "model.json")


def saved(directory: Path, case: str) -> Path:
    """The transformers model of `case`, random, saved with a tokenizer as a user's directory."""
    class_name, config = CASES[case]
    directory.mkdir()
    if case in ("qwen2.5", "qwen3"):  # NFC, Qwen2's split; no BOS, as tokenizer_config.json says
        qwen2_file(directory / "tokenizer.json")
        framing = {"bos_token": None, "eos_token": "<|endoftext|>"}
        (directory / "tokenizer_config.json").write_text(json.dumps(framing))
    else:
        tokenizers = {"gpt2": gpt2_file, "gemma3": gemma_file, "tinyllama": llama2_file}
        tokenizers.get(case, llama3_file)(directory / "tokenizer.json")
    model_class = getattr(transformers, class_name)
    torch.manual_seed(0)  # transformers' own initialisation: the fixture's weights only
    model_class(model_class.config_class(**config)).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory, write_documents) -> tuple[str, Path]:
    """A case's transformers directory, imported as `model`, with the documents prepared by the
    imported tokenizer as `corpus` and `held-out`."""
    root = tmp_path_factory.mktemp(request.param)
    source = saved(root / "source", request.param)
    zrodlo_succeeds("model", "import", "--from", source, "--output", "model", cwd=root)
    write_documents(root / "train.jsonl", {k: v * 3 for k, v in TRAINING_DOCUMENTS.items()})
    write_documents(root / "held-out.jsonl", HELD_OUT_DOCUMENTS)
    for documents, output in (("train.jsonl", "corpus"), ("held-out.jsonl", "held-out")):
        zrodlo_succeeds("corpus", "prepare", "--documents", documents, "--tokenizer", "model", "--output",
               output, cwd=root)  # fmt: skip
    return request.param, root


def transformers_model(directory: Path):
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, local_files_only=True)
    return model.eval()


def zrodlo_logits(model: Path) -> torch.Tensor:
    loaded = read_model(model)
    with torch.no_grad():
        return build_decoder(loaded.config, loaded.weights).eval()(IDS)  # (2, 10, vocab)


def test_an_import_computes_transformers_logits(case):
    _, root = case
    with torch.no_grad():
        expected = transformers_model(root / "source")(IDS).logits  # (2, 10, vocab)
    torch.testing.assert_close(zrodlo_logits(root / "model"), expected, rtol=0, atol=1e-5)


def test_an_import_is_evaluated_to_transformers_loss(case):
    _, root = case
    zrodlo_succeeds("model", "evaluate", "--model", "model", "--corpus", "held-out", "--context", 9,
           "--output", "scores.json", cwd=root)  # fmt: skip
    scores = json.loads((root / "scores.json").read_text())
    loss = transformers_loss(transformers_model(root / "source"), root / "held-out", 9)
    assert scores["corpora"]["held-out"]["loss"] == pytest.approx(loss, abs=1e-5)


def test_greedy_sampling_is_transformers_greedy_generation(case):
    _, root = case
    tokenizer = load_tokenizer(root / "model")
    prompt = "the "
    text = zrodlo_succeeds("model", "sample", "--model", "model", "--prompt", prompt, "--tokens", 12,
                  "--temperature", 0, "--seed", 1, cwd=root)  # fmt: skip
    ids = torch.tensor([[tokenizer.bos, *tokenizer.encode(prompt).tolist()]])
    # Every position attended: where BOS is EOS, which pads, transformers would mask it out.
    generated = transformers_model(root / "source").generate(
        ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False,
        eos_token_id=None, pad_token_id=tokenizer.eos,
    )  # fmt: skip
    assert text.rstrip("\n") == tokenizer.decode(generated[0, 1:].tolist())


# One case a family: SmolLM2 computes as Llama 3.2 does, less its rotary scaling.
@pytest.mark.parametrize(
    "case",
    ["gpt2", "llama3.2", "qwen2.5", "qwen3", "smollm3", "gemma3", "tinyllama"],
    indirect=True,
)
def test_a_fine_tune_resumes_and_shares_its_bytes_and_exports_as_its_family(
    case, train_args, resume_args
):
    """Fine-tuned 4 steps with dropout, checkpoints at 2 and 4: resumed from 2, and run on two
    processes, to the same bytes; exported as the class it was imported from."""
    name, root = case
    runs = {}
    for run, extra in (("run", ()), ("shared", ("--processes", 2))):
        args = train_args(root / "model", root / "corpus", root / run, 4, FLAGS)
        zrodlo_succeeds(*args, *extra, cwd=root)
        runs[run] = root / run
    zrodlo_succeeds(
        *resume_args(root / "run" / "step-2", root / "corpus", root / "resumed", 4), cwd=root
    )
    runs["resumed"] = root / "resumed"
    for other in ("shared", "resumed"):
        for file in SAME:
            assert (runs[other] / "step-4" / file).read_bytes() == (
                runs["run"] / "step-4" / file
            ).read_bytes(), (other, file)
    zrodlo_succeeds(
        "model", "export", "--model", root / "run" / "step-4", "--output", "exported", cwd=root
    )
    exported = transformers_model(root / "exported")
    assert type(exported).__name__ == CASES[name][0]
    with torch.no_grad():
        expected = exported(IDS).logits  # (2, 10, vocab)
    torch.testing.assert_close(zrodlo_logits(root / "run" / "step-4"), expected, rtol=0, atol=1e-5)
    # Its tokenizer, as transformers loads the export, encodes and decodes as Zrodlo's.
    theirs = transformers.AutoTokenizer.from_pretrained(root / "exported", local_files_only=True)
    ours = load_tokenizer(root / "model")
    text = "  the answer, 東京 🙂\n\tx"
    assert theirs.encode(text, add_special_tokens=False) == ours.encode(text).tolist()
    assert theirs.decode(ours.encode(text).tolist()) == text
