"""Every registered decoder family through the same matrix (at its defaults, and at the settings
that change what it computes), in this process with the library's own functions: a model
initialised, trained with dropout on, resumed from a checkpoint to the same bytes, exported to
transformers with the same logits, and imported back to the same weights and logits; and adapters
(LoRA) on every projection the family offers, trained over it, resumed to the same bytes, and
exported merged and as a PEFT adapter with the same logits. A new family's module, with its line
in the registry, is covered here as it is added.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from zrodlo import api
from zrodlo.model.adapter_spec import places
from zrodlo.model.decoder import build_model
from zrodlo.model.families import FAMILIES
from zrodlo.storage.refusal import Refusal
from zrodlo.training.checkpoint import read_model

transformers = pytest.importorskip("transformers")  # the hf extra, which the test extra includes

TEXTS = {
    f"doc-{i}": text
    for i, text in enumerate(
        [
            "the quick brown fox jumps over the lazy dog",
            "pack my box with five dozen liquor jugs",
            "how vexingly quick daft zebras jump",
            "sphinx of black quartz, judge my vow",
            "the five boxing wizards jump quickly",
        ]
    )
}
SHAPE = {"layers": 2, "heads": 4, "d_model": 16, "d_ff": 32, "positions": 16}
PLAN = {
    "context": 9, "batch_size": 4, "micro_batch_size": 2, "learning_rate": 0.01, "beta1": 0.9,
    "beta2": 0.99, "epsilon": 1e-8, "weight_decay": 0.1, "decay_scope": "matrices", "seed": 3,
    "precision": "f32", "shuffle": True, "warmup_steps": 1, "clip_norm": 1.0,
}  # fmt: skip
PROBE = torch.tensor([[0, 40, 41, 42, 77, 90, 12, 1], [0, 100, 120, 5, 6, 7, 8, 9]])  # (2, 8)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE of 300 tokens fitted on TEXTS, and TEXTS prepared with it."""
    root = tmp_path_factory.mktemp("families")
    lines = [json.dumps({"id": key, "text": text}) for key, text in TEXTS.items()]
    (root / "documents.jsonl").write_text("\n".join(lines) + "\n")
    api.fit_tokenizer(root / "documents.jsonl", root / "tokenizer", kind="bpe", vocab_size=300)
    api.prepare(root / "documents.jsonl", root / "tokenizer", root / "corpus")
    return root


# Every family at its defaults, and at the settings that change what it computes.
VARIANTS = {name: {"architecture": name} for name in FAMILIES} | {
    "gpt-tied": {"architecture": "gpt", "activation": "gelu_new", "tie_embeddings": True},
    "gpt-relu2": {"architecture": "gpt", "activation": "relu2"},
    "llama-scaled": {
        "architecture": "llama", "head_dim": 6, "norm_eps": 1e-6, "kv_heads": 2,
        "tie_embeddings": True, "rope_theta": 500000.0, "rope_scaling_factor": 8.0,
        "rope_low_frequency_factor": 1.0, "rope_high_frequency_factor": 4.0,
        "rope_original_positions": 8,
    },
    "qwen3-apart": {"architecture": "qwen3", "head_dim": 6, "kv_heads": 2, "tie_embeddings": True},
    # Today's recipe as far as transformers computes it: norms without a scale, zero projections.
    "qwen3-unscaled": {"architecture": "qwen3", "kv_heads": 2, "norm": "unscaled",
                       "projection_init": "zero", "head_std": 0.001},
    # Beyond it: every block reads x0 (nanochat's), which no transformers class computes.
    "llama-x0-mix": {"architecture": "llama", "kv_heads": 2, "x0_mix": 0.1},
    # nanochat's value embeddings, on the last layer and every 2nd before it.
    "llama-value-embeddings": {"architecture": "llama", "kv_heads": 2, "value_embeddings": 2},
    "smollm3-every-2nd": {"architecture": "smollm3", "no_rope_interval": 2, "kv_heads": 2},
    # A window shorter than the context, a global layer, a cap, an untied head, a scalar apart.
    "gemma3-windowed": {"architecture": "gemma3", "kv_heads": 2, "sliding_window": 3,
                        "global_every": 2, "logit_cap": 30.0, "tie_embeddings": False,
                        "query_scalar": 6},
}  # fmt: skip


# The variants no transformers class computes, and the sentence their export is refused with.
REFUSED_EXPORT = {
    "llama-x0-mix": "the model mixes the embeddings' output into every block's input (x0_mix), "
    "and LlamaForCausalLM does not; it cannot be exported",
    "llama-value-embeddings": "the model adds value embeddings to its attention's values "
    "(value_embeddings), and LlamaForCausalLM does not; it cannot be exported",
}


def exported(run: Path, checkpoint: Path, output: Path, **flags: bool) -> bool:
    """Whether the export of `checkpoint` (of the variant `run` trained) was written; a variant
    in REFUSED_EXPORT is refused with its sentence, and nothing is written."""
    refusal = REFUSED_EXPORT.get(run.parent.name)
    if refusal is None:
        api.export(checkpoint, output, **flags)
        return True
    before = sorted(run.parent.iterdir())
    with pytest.raises(Refusal) as refused:
        api.export(checkpoint, output, **flags)
    assert str(refused.value) == refusal
    assert sorted(run.parent.iterdir()) == before
    return False


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def run(request, data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model of the variant, initialised with dropout on and trained 4 steps, a checkpoint at
    every second step."""
    root = tmp_path_factory.mktemp(request.param, numbered=False)
    model = root / "model"
    api.init(data / "tokenizer", model, seed=5, dropout=0.1, attention_dropout=0.1,
             **SHAPE | VARIANTS[request.param])  # fmt: skip
    api.train(model, data / "corpus", root / "run", steps=4, checkpoint_every=2, device="cpu",
              **PLAN)  # fmt: skip
    return root / "run"


def logits(checkpoint: Path) -> torch.Tensor:
    return build_model(read_model(checkpoint)).eval()(PROBE).detach()  # (2, 8, V)


def test_the_model_directory_states_its_family_and_settings(run):
    stated = json.loads((run / "step-4" / "config.json").read_text())
    variant = VARIANTS[run.parent.name]
    assert stated.get("architecture", "gpt") == variant["architecture"]
    assert {key: stated[key] for key in variant if key != "architecture"} == {
        key: value for key, value in variant.items() if key != "architecture"
    }


def test_a_resumed_run_writes_the_uninterrupted_runs_bytes(run, data):
    resumed = run.parent / "resumed"
    api.resume(run / "step-2", data / "corpus", resumed, steps=4, device="cpu")
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert (resumed / "step-4" / name).read_bytes() == (run / "step-4" / name).read_bytes()


def test_transformers_computes_the_exported_models_logits(run):
    if not exported(run, run / "step-4", run.parent / "exported"):
        return
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        run.parent / "exported", local_files_only=True
    )
    family = read_model(run / "step-4").config.family
    assert type(theirs).__name__ == family.transformers_class
    with torch.no_grad():
        computed = theirs.eval()(PROBE).logits
    torch.testing.assert_close(computed, logits(run / "step-4"), rtol=0, atol=1e-5)


def test_an_imported_export_holds_the_same_weights_and_logits(run):
    imported = run.parent / "imported"
    if not exported(run, run / "step-4", run.parent / "exported-again"):
        return
    api.import_model(run.parent / "exported-again", imported)
    ours, back = read_model(run / "step-4"), read_model(imported)
    assert back.config.architecture == ours.config.architecture
    # An unscaled model's norms come back as the unit scales its export wrote; nothing else is new.
    added = back.weights.keys() - ours.weights.keys()
    unscaled = getattr(ours.config.settings, "norm", None) == "unscaled"
    assert bool(added) == unscaled and ours.weights.keys() <= back.weights.keys()
    assert all(
        torch.equal(back.weights[name], torch.ones_like(back.weights[name])) for name in added
    )
    assert all(torch.equal(back.weights[name], ours.weights[name]) for name in ours.weights)
    assert torch.equal(logits(imported), logits(run / "step-4"))


@pytest.fixture(scope="module")
def adapters(run: Path, data: Path) -> Path:
    """Adapters of rank 2 on every projection the family offers, trained 4 steps over the run's
    last checkpoint, a checkpoint at every second step."""
    targets = ",".join(places(read_model(run / "step-4").config))
    output = run.parent / "adapters"
    api.train(run / "step-4", data / "corpus", output, steps=4, checkpoint_every=2, device="cpu",
              lora_rank=2, lora_alpha=4.0, lora_targets=targets, progress=api.quiet,
              **PLAN | {"learning_rate": 0.05})  # fmt: skip
    return output


def test_adapters_train_alone_and_resume_to_the_same_bytes(run, adapters, data):
    assert sorted(p.name for p in (adapters / "step-4").iterdir()) == [
        "adapters.safetensors", "config.json", "optimizer.safetensors", "tokenizer.json",
        "trainer.json",
    ]  # fmt: skip
    # The base's weights are the bytes its own run wrote, and the adapters name them by digest.
    written = json.loads((run / "step-4" / "trainer.json").read_text())["files"]
    weights = hashlib.sha256((run / "step-4" / "model.safetensors").read_bytes()).hexdigest()
    assert weights == written["model.safetensors"]
    record = json.loads((adapters / "step-4" / "trainer.json").read_text())
    assert record["base"] == {"path": "../run/step-4", "weights_sha256": weights}
    trained = read_model(adapters / "step-4")
    assert trained.adapters.base == run / "step-4"
    assert trained.adapters.spec.targets == tuple(places(trained.config))
    assert not torch.equal(logits(adapters / "step-4"), logits(run / "step-4"))
    resumed = run.parent / "adapters-resumed"
    api.resume(adapters / "step-2", data / "corpus", resumed, steps=4, device="cpu",
               progress=api.quiet)  # fmt: skip
    for name in ("adapters.safetensors", "optimizer.safetensors", "trainer.json"):
        assert (resumed / "step-4" / name).read_bytes() == (adapters / "step-4" / name).read_bytes()


def test_the_adapters_export_merged_and_for_peft_with_zrodlos_logits(run, adapters):
    peft = pytest.importorskip("peft")
    root = run.parent
    written = [
        exported(run, run / "step-4", root / "base-exported"),
        exported(run, adapters / "step-4", root / "adapter-exported", adapter=True),
        exported(run, adapters / "step-4", root / "merged-exported"),
    ]
    if not any(written):  # each refused with the base's sentence
        return
    ours = logits(adapters / "step-4")
    base = transformers.AutoModelForCausalLM.from_pretrained(root / "base-exported")
    tuned = peft.PeftModel.from_pretrained(base, root / "adapter-exported").eval()
    merged = transformers.AutoModelForCausalLM.from_pretrained(root / "merged-exported").eval()
    with torch.no_grad():
        torch.testing.assert_close(tuned(PROBE).logits, ours, rtol=0, atol=1e-5)
        torch.testing.assert_close(merged(PROBE).logits, ours, rtol=0, atol=1e-5)
