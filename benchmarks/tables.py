"""The table benchmarks/README.md shows for each report in reports/bench/, declared as data in
the form benchmarks/table_form.py gives (paths into the report, words with its figures)."""

from __future__ import annotations

from recipe_tables import RECIPE_TABLES
from table_form import MIB, QUOTIENT, Row, Table
from training_tables import TRAINING

LARGEST = " on {sizes/-1/text_megabytes} MB of text"
SMALLEST = "the same on {sizes/0/text_megabytes} MB"
GROWTH = "the smallest corpus's figure"
GROWN = "largest_over_smallest/"
FIRST = "the same after {configuration/steps_done/0} steps"
FLAT = "the time after {configuration/steps_done/0} steps"
CHAR = "/runs/char/"
BITS = "characters' bits per byte"
UNREACHED = "not reached in {/steps} steps"
# In the page's reading order, laid out by hand (a row to a few lines) to read as a list.
TABLES = {
    "prepare": Table("Data preparation", "Preparing a corpus",
        "`zrodlo corpus prepare` of a generated file of {input_bytes:bytes as MB} of documents, in "
        "a subprocess; with no other tool for this job, the input's size is the yardstick.", (
        Row("Characters prepared a second", "characters_per_second", "characters/s"),
        Row("Wall time of the whole command, {characters} characters", "seconds", "s"),
        Row("Peak resident memory", "peak_rss_bytes", "bytes as MiB", "the input file",
            "input_bytes", "peak_rss_over_input", "the input's size"),
    )),
    "corpus_open": Table("Data preparation", "Opening a corpus",
        "`Corpus.open` (every train, resume and evaluate runs it) on {tokens} tokens: the open "
        "alone, then the open and its verifying pass over tokens.bin against the sha256 of that "
        "file alone, the least that reading it costs.", (
        Row("Opening the corpus (checks its manifest and documents, maps tokens.bin)",
            "seconds/open/median_s", "s"),
        Row("Opening the corpus and the verifying pass over tokens.bin",
            "seconds/open_and_verifying_pass/median_s", "s", "sha256 of tokens.bin alone",
            "seconds/tokens_sha256/median_s", "pass_over_tokens_sha256/of_medians",
            "the hash's time"),
    )),
    "scale": Table("Data preparation", "Corpora of growing size",
        "The real commands, one after another, on generated corpora of {sizes/0/text_megabytes} "
        "and {sizes/-1/text_megabytes} MB of text: does memory or start-up grow with the corpus? "
        "Each row sets the largest corpus against the smallest; near 1, it does not grow.", (
        Row("Peak memory of `zrodlo corpus prepare`" + LARGEST, "sizes/-1/prepare/peak_rss_bytes",
            MIB, SMALLEST, "sizes/0/prepare/peak_rss_bytes", GROWN + "prepare_peak_rss", GROWTH),
        Row("Peak memory of `zrodlo model train`" + LARGEST, "sizes/-1/train/peak_rss_bytes",
            MIB, SMALLEST, "sizes/0/train/peak_rss_bytes", GROWN + "train_peak_rss", GROWTH),
        Row("Peak memory of `zrodlo checkpoint resume`" + LARGEST, "sizes/-1/resume/peak_rss_bytes",
            MIB, SMALLEST, "sizes/0/resume/peak_rss_bytes", GROWN + "resume_peak_rss", GROWTH),
        Row("Peak memory of `zrodlo model evaluate` (stopped after a while)" + LARGEST,
            "sizes/-1/evaluate/peak_rss_bytes", MIB, SMALLEST, "sizes/0/evaluate/peak_rss_bytes",
            GROWN + "evaluate_peak_rss", GROWTH),
        Row("Seconds from starting `zrodlo model train` to its first step" + LARGEST,
            "sizes/-1/train/seconds_to_first_step", "s", SMALLEST,
            "sizes/0/train/seconds_to_first_step", GROWN + "train_seconds_to_first_step", GROWTH),
        Row("Seconds from starting `zrodlo checkpoint resume` to its first step" + LARGEST,
            "sizes/-1/resume/seconds_to_first_step", "s", SMALLEST,
            "sizes/0/resume/seconds_to_first_step", GROWN + "resume_seconds_to_first_step", GROWTH),
    )),
    **TRAINING,
    "checkpoint_io": Table("Checkpoints and resume", "Checkpoint write and read against raw I/O",
        "A checkpoint written as a run writes it (synced, renamed) and read with the page cache "
        "emptied, against raw I/O of as many bytes, in turn. Zrodlo also hashes every byte "
        "(sha256), which only a second core can overlap with the I/O.", (
        Row("Checkpoint write, {*} model ({parameters} parameters, AdamW state, "
            "{bytes:bytes as MB})", "megabytes_per_second/zrodlo_write_checkpoint", "MB/s",
            "one write + fsync of as many bytes", "megabytes_per_second/raw_write_fsync",
            "share_of_raw/write/of_medians", "raw write speed", each="sizes/*"),
        Row("Checkpoint read from a cold page cache, {*} model",
            "megabytes_per_second/zrodlo_read_checkpoint_cold", "MB/s",
            "one cold read of as many bytes", "megabytes_per_second/raw_read_cold",
            "share_of_raw/read_cold/of_medians", "raw read speed", each="sizes/*"),
        Row("sha256 of the {*} model's bytes in halves on two threads",
            "megabytes_per_second/sha256_halves_on_two_threads", "MB/s", "one thread",
            "megabytes_per_second/sha256_alone", "cores_at_hand/of_medians",
            "one thread's speed (2 if a second core was free)", each="sizes/*"),
    )),
    "resume": Table("Checkpoints and resume", "Time to the first resumed step",
        "Seconds from starting `zrodlo checkpoint resume` to its first resumed step, after "
        "{configuration/steps_done} steps of a tiny model, into a new directory (the DVC resume "
        "stage) and into the run's own directory (a killed run continued).", (
        Row("Resume into a new directory after {configuration/steps_done/1} steps",
            "new_directory/1000/median_s", "s", FIRST, "new_directory/10/median_s",
            "ratio_to_first/new_directory/1000/of_medians", FLAT),
        Row("Resume into a new directory after {configuration/steps_done/2} steps",
            "new_directory/20000/median_s", "s", FIRST, "new_directory/10/median_s",
            "ratio_to_first/new_directory/20000/of_medians", FLAT),
        Row("Resume into the run's directory after {configuration/steps_done/1} steps",
            "run_directory/1000/median_s", "s", FIRST, "run_directory/10/median_s",
            "ratio_to_first/run_directory/1000/of_medians", FLAT),
        Row("Resume into the run's directory after {configuration/steps_done/2} steps",
            "run_directory/20000/median_s", "s", FIRST, "run_directory/10/median_s",
            "ratio_to_first/run_directory/20000/of_medians", FLAT),
        Row("A bare interpreter importing what the command imports: the floor under a resume",
            "import_floor/median_s", "s"),
        Row("The run records' bookkeeping in-process after {configuration/steps_done/2} steps "
            "({run_records_in_process/ledger_lines/20000} ledger lines)",
            "run_records_in_process/seconds/20000/median_s", "s", FIRST,
            "run_records_in_process/seconds/10/median_s", QUOTIENT, FLAT),
    )),
    "distributed": Table("Distributed training", "Data-parallel training",
        "Training on several processes started by torchrun over loopback (gloo), one thread a "
        "process, against one process; and Zrodlo's exact reduction (an ordered chain: the same "
        "sums at any number of processes) against the all_reduce torch's DDP makes.", (
        Row("Training on {variants/2 exact/processes} processes, {*} size",
            "variants/2 exact/tokens_per_second", "tokens/s", "one process",
            "variants/1 exact/tokens_per_second", "speedup_2_processes",
            "one process's throughput", each="results/*"),
        Row("Training on {variants/4 exact/processes} processes, {*} size",
            "variants/4 exact/tokens_per_second", "tokens/s", "one process",
            "variants/1 exact/tokens_per_second", "speedup_4_processes",
            "one process's throughput", each="results/*"),
        Row("Exact reduction on {variants/2 exact/processes} processes, {*} size",
            "variants/2 exact/tokens_per_second", "tokens/s", "all_reduce, as DDP reduces",
            "variants/2 all_reduce/tokens_per_second", "exact_over_all_reduce_2",
            "all_reduce's throughput", each="results/*"),
        Row("Exact reduction on {variants/4 exact/processes} processes, {*} size",
            "variants/4 exact/tokens_per_second", "tokens/s", "all_reduce, as DDP reduces",
            "variants/4 all_reduce/tokens_per_second", "exact_over_all_reduce_4",
            "all_reduce's throughput", each="results/*"),
        Row("Bytes a rank sends a step, exact reduction on {variants/2 exact/processes} "
            "processes, {*} size", "variants/2 exact/loopback_bytes_per_rank_step",
            "bytes as MB", "the gradient's size", "variants/2 exact/gradient_bytes",
            "variants/2 exact/sent_over_gradient", "the gradient's size (the rendezvous included)",
            each="results/*"),
    )),
    "evaluation": Table("Evaluation and sampling", "Held-out scores' share of a run",
        "A run of {steps} steps on the Python standard library's source, scored every {eval_every} "
        "steps on {eval_windows} windows drawn from the seed (the default) or on every window.", (
        Row("Seconds of held-out scoring on {eval_windows} windows", "runs/sampled/scoring_seconds",
            "s", "scoring every window", "runs/whole/scoring_seconds", QUOTIENT,
            "the time every window takes"),
        Row("Scoring's share of the run's wall time", "runs/sampled/scoring_share", "share",
            "scoring every window", "runs/whole/scoring_share"),
        Row("Wall time of the whole run", "runs/sampled/wall_seconds", "s",
            "scoring every window", "runs/whole/wall_seconds", QUOTIENT,
            "the run's time when every window is scored"),
    )),
    "sampling": Table("Evaluation and sampling", "Sampling with the key-value cache",
        "Greedy sampling of {tokens} tokens on {threads} threads by `zrodlo model sample`'s loop "
        "with its key-value cache against transformers' `generate` on the exported model, and "
        "against the same loop reading the whole window for every token. Fresh weights.", (
        Row("Sampling {/tokens} tokens, {*} ({parameters} parameters)", "zrodlo/median_s", "s",
            "transformers' generate", "transformers_generate/median_s",
            "zrodlo_over_transformers_speedup/of_medians", "generate's speed",
            each="architectures/*"),
        Row("Sampling {/tokens} tokens, {*}", "zrodlo/median_s", "s", "the loop without a cache",
            "window_by_window/median_s", "cache_speedup/of_medians",
            "the uncached loop's speed", each="architectures/*"),
        Row("Seconds the last 50 tokens take, {*}", ratio="last_50_over_first_50_ratio",
            gloss="the first 50's seconds (1 if every token is as fast)", each="architectures/*"),
    )),
    "bpe": Table("Tokenizers", "Byte-level BPE against the tokenizers library",
        "Zrodlo's byte-level BPE fitted, and {large_text_megabytes} MB of Python source prepared "
        "with it against the tokenizers library's batch encoding of the same text on the same "
        "threads (the library alone: nothing written or hashed).", (
        Row("Fitting a BPE of 1,024 tokens on the default pool (the torch docstrings)",
            "fit/default_pool_1024/wall_seconds", "s"),
        Row("Fitting a BPE of 4,096 tokens on the default pool",
            "fit/default_pool_4096/wall_seconds", "s"),
        Row("Fitting a BPE of 1,024 tokens on the {large_text_megabytes} MB of Python source",
            "fit/large_1024/wall_seconds", "s"),
        Row("Peak memory of the fit on the Python source", "fit/large_1024/peak_rss_mib", "MiB"),
        Row("Preparing {large_text_megabytes} MB of Python source with a BPE of 1,024 (median run)",
            "prepare/zrodlo_prepare/median_s", "s", "the library's encode_batch_fast",
            "prepare/library_encode_batch/median_s", "prepare/share_of_library/of_medians",
            "the library's speed"),
        Row("Peak memory preparing the Python source", "prepare/peak_rss_mib", "MiB"),
    )),
    "bpe_fit": Table("Tokenizers", "Fitting a BPE on hostile documents",
        "Each document split and fitted in a process of its own, against the trainer before it "
        "({/trainer_before}), which was stopped after {/timeout_seconds} s.", (
        Row("Fitting {what}", "after/seconds", "s", "the trainer before", "before/seconds",
            QUOTIENT, "its time", "cases/*"),
        Row("Peak memory fitting {what}", "after/peak_rss_mib", "MiB", "the trainer before",
            "before/peak_rss_mib", QUOTIENT, "its memory", "cases/*"),
    )),
    "tokenizers": Table("Tokenizers", "Characters against byte-level BPE",
        "The pipeline's model trained on the default data with characters and with BPEs, scored "
        "in bits per byte of the same text (lower is better), as in docs/tokenizers.md.", (
        Row("Validation bits per byte after {/steps} steps, BPE of {vocab_size}",
            "bits_per_byte_at_equal_steps", "bits/byte", "characters",
            CHAR + "bits_per_byte_at_equal_steps", QUOTIENT, BITS, "runs/*", ("char",)),
        Row("Validation bits per byte after the fastest run's {/equal_time_seconds} s of steps, "
            "BPE of {vocab_size}", "bits_per_byte_at_equal_time", "bits/byte", "characters",
            CHAR + "bits_per_byte_at_equal_time", QUOTIENT, BITS, "runs/*", ("char",)),
        Row("Text trained on a second, BPE of {vocab_size}", "bytes_per_second", "bytes/s",
            "characters", CHAR + "bytes_per_second", QUOTIENT, "characters' rate", "runs/*",
            ("char",)),
    )),
    "presets": Table("Model sizes and quality", "Model presets: cost of a step, time to a loss",
        "Each model preset trained for {steps} steps on the default data (characters): what a "
        "step costs, and the training seconds until validation loss reaches the bigram "
        "baseline's and lower. docs/models.md's table of sizes is written from it.", (
        Row("Validation loss after {/steps} steps, {*} preset ({parameters} parameters)",
            "validation_loss_at_end", "loss", "the character-bigram baseline", "bigram_loss",
            QUOTIENT, "the bigram's loss", each="presets/*"),
        Row("Seconds a training step takes, {*} preset", "seconds_per_step", "s", each="presets/*"),
        Row("Training seconds to the bigram baseline's validation loss, {*} preset",
            "training_seconds_to/bigram", "s", each="presets/*", null=UNREACHED),
        Row("Training seconds to a validation loss of {*2}, {*1} preset", "", "s",
            each="presets/*/training_seconds_to/*", leave_out=("bigram",), null=UNREACHED),
    )),
    "quality_for_time": Table("Model sizes and quality", "Quality for the minutes spent",
        "GPT-2's decoder and llama's on characters and on a BPE of {vocab_size}, trained for equal "
        "time at the best of the rates {learning_rates}, as in README.md's table and chart.", (
        Row("Best validation bits per byte, {*2}, {*1} ({steps} steps at learning rate "
            "{best_learning_rate})", "best_bits_per_byte", "bits/byte", each="budgets/*/*"),
    )),
    **RECIPE_TABLES,
}  # fmt: skip
