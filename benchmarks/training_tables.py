"""The tables of benchmarks/README.md's part on training, in the form benchmarks/table_form.py
gives; benchmarks/tables.py places them in the page."""

from __future__ import annotations

from table_form import MIB, QUOTIENT, Row, Table

# The fields rows of a training step against the plain PyTorch loop share.
AGAINST_PLAIN = {
    "zrodlo": "tokens_per_second/zrodlo", "unit": "tokens/s", "against": "plain PyTorch loop",
    "reference": "tokens_per_second/plain_pytorch", "gloss": "the plain loop's throughput",
    "ratio": "throughput_ratio_zrodlo_over_plain/of_medians",
}  # fmt: skip

# The rows of a model of a real size imported from transformers: the import's memory, then the
# fine-tuning step's throughput and memory against the plain loop on transformers' model.
IMPORTED = (
    Row("Peak memory of `zrodlo model import`, {model} ({parameters} parameters)",
        "import/peak_rss_bytes", MIB, "model.safetensors", "import/weights_bytes",
        "import/peak_over_weights", "the weights' bytes", each="models/*"),
    Row("Fine-tuning step, {model}", "tokens_per_second/zrodlo", "tokens/s",
        "plain loop on transformers' model", "tokens_per_second/plain_transformers",
        "throughput_ratio_zrodlo_over_plain/of_medians", "the plain loop's throughput",
        each="models/*"),
    Row("Peak memory fine-tuning, {model}", "training_peak_rss_bytes/zrodlo", MIB,
        "plain loop on transformers' model", "training_peak_rss_bytes/plain",
        "training_peak_ratio_zrodlo_over_plain", "the plain loop's memory", each="models/*"),
)  # fmt: skip

# The rows of LoRA against a full fine-tune and peft (benchmarks/lora.py).
LORA = (
    Row("Training step with adapters", "tokens_per_second/zrodlo_lora", "tokens/s",
        "peft on transformers' model", "tokens_per_second/peft_lora",
        "throughput_ratio_lora_over_peft/of_medians", "peft's throughput"),
    Row("Training step with adapters", "tokens_per_second/zrodlo_lora", "tokens/s",
        "every weight trained", "tokens_per_second/zrodlo_full",
        "throughput_ratio_lora_over_full/of_medians", "a full fine-tune's throughput"),
    Row("Peak memory training adapters", "peak_rss_bytes/zrodlo_lora", MIB,
        "every weight trained", "peak_rss_bytes/zrodlo_full", "peak_ratio_lora_over_full",
        "a full fine-tune's memory"),
    Row("Peak memory training adapters", "peak_rss_bytes/zrodlo_lora", MIB,
        "peft on transformers' model", "peak_rss_bytes/peft_lora",
        "peak_ratio_lora_over_peft", "peft's memory"),
)  # fmt: skip

CPU_BF16_TEXT = (
    "A training step (forward and backward) of the pipeline's model, {model/windows} windows of "
    "{model/context}, under autocast to bfloat16 against float32, and a matrix product of the "
    "feed-forward's width in each, in turn, on a processor whose torch kernels are "
    "{cpu_capability}. The ratios are of times: above 1 is slower."
)
CPU_BF16 = (
    Row("Training step in bfloat16", "seconds/bf16 step/median_s", "s", "float32",
        "seconds/f32 step/median_s", "step_ratio_bf16_over_f32/of_medians",
        "float32's step time"),
    Row("Matrix product in bfloat16, casts included", "seconds/bf16 matmul/median_s", "s",
        "float32", "seconds/f32 matmul/median_s", "matmul_ratio_bf16_over_f32/of_medians",
        "float32's time"),
)  # fmt: skip

TRAINING = {
    "train": Table("Training", "A training step against a plain PyTorch loop",
        "Zrodlo's `Trainer.step` (ChaCha20 windows and dropout masks, gradient norm, AdamW) and "
        "the `zrodlo model train` command against a plain PyTorch loop over the same model and "
        "weights, in turn; and the checkpoint written and read against raw I/O of as many bytes.", (
        Row("Training step in-process, {size} size (batch {batch_size}, context {context})",
            **AGAINST_PLAIN, each="in_process/*"),
        Row("Training step of the `zrodlo model train` command, {size} size", **AGAINST_PLAIN,
            each="command/*"),
        Row("Checkpoint write, medium model and AdamW state ({bytes:bytes as MB})",
            "megabytes_per_second/zrodlo_write_checkpoint", "MB/s",
            "one write + fsync of as many bytes", "megabytes_per_second/raw_write_fsync",
            "share_of_raw/write/of_medians", "raw write speed", each="checkpoint_io"),
        Row("Checkpoint read from a cold page cache, medium model",
            "megabytes_per_second/zrodlo_read_checkpoint_cold", "MB/s",
            "one cold read of as many bytes", "megabytes_per_second/raw_read_cold",
            "share_of_raw/read_cold/of_medians", "raw read speed", each="checkpoint_io"),
    )),
    "llama_step": Table("Training", "A llama training step against a plain PyTorch llama",
        "Zrodlo's Trainer on a llama (grouped-query attention) against a plain PyTorch loop over "
        "the same llama and initial weights (the same logits without dropout), in turn.", (
        Row("Training step, llama {size} size ({config/layers} layers, d_model {config/d_model})",
            **AGAINST_PLAIN, each="sizes/*"),
        Row("Largest logit difference from the plain llama without dropout, {size} size",
            "largest_logit_difference", each="sizes/*"),
    )),
    "hub_models": Table("Training", "Models of a real size, imported from transformers",
        "Random weights saved by transformers in a released model's shape, imported by `zrodlo "
        "model import`; then Zrodlo's Trainer fine-tuning the import against a plain loop on "
        "transformers' own model from the same directory (batch {/batch}, context {/context}, "
        "the dropout config.json states), a step of each in turn; peak memory in processes of "
        "their own.", IMPORTED),
    "recent_models": Table("Training", "The small models of 2025-26, imported from transformers",
        "As above, for Qwen3-0.6B's shape (QK-norm, heads of 128 apart from the width; its two "
        "sides timed in processes of their own, as both do not fit in memory at once) and "
        "Gemma-3-270m's (its 262,144-token embedding, (1 + w) norms around each branch, local "
        "layers within a window of 512; a step of each in turn).", (
        *IMPORTED,
        Row("Largest logit difference from transformers' own over {import/logit_positions} "
            "positions, {model}", "import/largest_logit_difference", each="models/*"),
    )),
    "lora": Table("Training", "Low-rank adapters (LoRA) on GPT-2 small's shape",
        "Zrodlo's Trainer training adapters of rank {/rank} on {/targets} of the imported "
        "124 M model, against the same Trainer fine-tuning every weight and against a plain loop "
        "on transformers' model with peft's LoRA of the same rank, targets and alpha (batch "
        "{/batch}, context {/context}), a step of each in turn; peak memory in processes of their "
        "own.", LORA),
    **{
        f"lora_{name}": Table("Training", f"Low-rank adapters (LoRA) on {shown}'s shape",
            f"As above, on {shown}'s shape ({{/parameters}} parameters).", LORA)
        for name, shown in (("qwen3_0.6b", "Qwen3-0.6B"), ("gemma3_270m", "Gemma-3-270m"))
    },
    "lora_bf16_base": Table("Training", "LoRA over a base held in bfloat16, Qwen3-1.7B's shape",
        "Zrodlo's Trainer training adapters of rank {/rank} on {/targets} of the imported "
        "{/parameters:number} parameters with the frozen base held in bfloat16 (`--lora-base "
        "bf16`, every product in float32), against the same adapters over the float32 base and "
        "against peft's LoRA on transformers' model loaded in bfloat16 (its products in "
        "bfloat16), a step of each in turn; peak memory in processes of their own, loading "
        "included.", (
        Row("Training step with adapters, base in bfloat16", "tokens_per_second/zrodlo_lora",
            "tokens/s", "peft, base in bfloat16", "tokens_per_second/peft_lora",
            "throughput_ratio_lora_over_peft/of_medians", "peft's throughput"),
        Row("Training step with adapters, base in bfloat16", "tokens_per_second/zrodlo_lora",
            "tokens/s", "the base in float32", "tokens_per_second/zrodlo_lora_f32_base",
            "throughput_ratio_lora_over_lora_f32_base/of_medians", "the float32 base's throughput"),
        Row("Peak memory training adapters, base in bfloat16", "peak_rss_bytes/zrodlo_lora", MIB,
            "the base in float32", "peak_rss_bytes/zrodlo_lora_f32_base",
            "peak_ratio_lora_over_lora_f32_base", "the float32 base's memory"),
        Row("Peak memory training adapters, base in bfloat16", "peak_rss_bytes/zrodlo_lora", MIB,
            "peft, base in bfloat16", "peak_rss_bytes/peft_lora", "peak_ratio_lora_over_peft",
            "peft's memory"),
    )),
    "cpu_bf16": Table("Training", "bfloat16 on the CPU", CPU_BF16_TEXT, CPU_BF16),
    "cpu_bf16_amx": Table("Training", "bfloat16 on a CPU with AMX", CPU_BF16_TEXT, CPU_BF16),
    "dropout": Table("Training", "Dropout masks",
        "A training step of Zrodlo's GPT with its ChaCha20 dropout masks against the same model "
        "with torch's dropout at the same sites, in turn; and a step's masks drawn alone against "
        "torch's Bernoulli masks of the same shapes. The ratios are of times: below 1 is faster.", (
        Row("Training step, {size} size, dropout {config/dropout}, attention: {attention}",
            "step/zrodlo_chacha20_masks/median_s", "s", "the same step with torch's dropout",
            "step/torch_dropout/median_s", "ratio_zrodlo_over_torch/of_medians",
            "torch's step time", each="results/*"),
        Row("Time dropout adds to a training step, {size} size, attention: {attention}",
            "dropout_cost_s/zrodlo", "s", "what torch's dropout adds", "dropout_cost_s/torch",
            QUOTIENT, "torch's cost", each="results/*"),
        Row("Drawing a step's {mask_elements_per_step} dropout-mask elements alone, {size} size, "
            "attention: {attention}", "mask_drawing_alone/zrodlo_chacha20/median_s", "s",
            "torch's Bernoulli masks", "mask_drawing_alone/torch_bernoulli/median_s",
            "mask_drawing_alone/ratio_zrodlo_over_torch/of_medians", "torch's time",
            each="results/*"),
    )),
    "mask_kernel_cpu": Table("Training", "Keep-masks drawn three ways",
        "The keep-masks of one training step drawn by the one compiled kernel CUDA runs, by torch "
        "integer ops one after another (the Metal path) and by OpenSSL's ChaCha20 (the CPU "
        "path), all on the {device} here, and checked equal. The ratios are of times.", (
        Row("{masks_per_step} keep-masks of a {*} step by the compiled kernel",
            "seconds/fused_kernel/median_s", "s", "torch integer ops one by one",
            "seconds/torch_op_by_op/median_s", "fused_over_op_by_op/of_medians",
            "the op-by-op time", each="sizes/*"),
        Row("{masks_per_step} keep-masks of a {*} step by the compiled kernel",
            "seconds/fused_kernel/median_s", "s", "OpenSSL's ChaCha20",
            "seconds/openssl_cpu/median_s", "fused_over_openssl/of_medians", "OpenSSL's time",
            "sizes/*"),
        Row("The kernel's first call, compile included, {*} size", "first_call_with_compile_s",
            "s", each="sizes/*"),
        Row("Every mask equal the three ways, {*} size", "all_equal", "yes/no", each="sizes/*"),
    )),
}  # fmt: skip
