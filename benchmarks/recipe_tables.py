"""The recipes' reports (benchmarks/recipes.py and recipes_large.py): the table
benchmarks/README.md shows for each, in the form benchmarks/table_form.py gives, and the command
that writes it."""

from __future__ import annotations

from table_form import QUOTIENT, Row, Table

PIPELINE = ("new recipe, SwiGLU", "the pipeline's recipe")  # recipes.py's name of it, in words
MUON_COST = (
    Row("Muon's update of the model's weights", "update_seconds/muon update/median_s", "s",
        "AdamW's", "update_seconds/adamw update/median_s", "muon_update_over_adamw_update",
        "AdamW's update time"),
    Row("The Newton-Schulz iterations' share of a Muon step", "newton_schulz_share_of_muon_step",
        "share"),
)  # fmt: skip


def recipes_row(budget: str, against: tuple[str, str] = ("adamw", "the AdamW recipe"),
                figure: str = "Best validation bits per byte") -> Row:  # fmt: skip
    """Each recipe's best validation bits per byte in `budget` (such as "2 minutes"), against the
    recipe `against` names (its key, its name in words); `figure` says what they are in words."""
    key, words = against
    return Row(
        f"{figure}, {budget}, {{*}} ({{steps}} steps of {{seconds_per_step:s}} "
        "at learning rate {best_learning_rate})", "best_bits_per_byte", "bits/byte",
        words, f"/budgets/{budget}/{key}/best_bits_per_byte", QUOTIENT, f"{words}'s bits",
        each=f"budgets/{budget}/*",
    )  # fmt: skip


def two_minutes(title: str, text: str, against: tuple[str, str] = PIPELINE) -> Table:
    """A two-minute recipes report: each recipe's best bits against `against`; Muon's update."""
    return Table("Model sizes and quality", title, f"As the recipes above, {text}",
                 (recipes_row("2 minutes", against), MUON_COST[0]))  # fmt: skip


def seeded(title: str, text: str, against: tuple[str, str] = PIPELINE) -> Table:
    """A two-minute recipes report run at several seeds: each recipe's mean bits at its best rate
    against `against`, and how far apart its seeds ended."""
    return Table("Model sizes and quality", title, f"As the recipes above, {text}", (
        recipes_row("2 minutes", against, "Mean validation bits per byte of the seeds"),
        Row("The most bits less the least among the seeds at that rate, {*}", "best_seed_spread",
            "bits/byte", each="budgets/2 minutes/*"),
        MUON_COST[0],
    ))  # fmt: skip


LARGE_COSTS = (
    Row("Muon's update of the model's weights", "update_seconds/muon update/median_s", "s",
        "AdamW's", "update_seconds/adamw update/median_s", QUOTIENT, "AdamW's update time"),
    Row("The Newton-Schulz iterations' share of a step of the pipeline's recipe",
        "newton_schulz_share_of_pipeline_step", "share"),
)  # fmt: skip


def larger_scale(title: str, rates: str, costs: bool = True) -> Table:
    """recipes_large.py's report: each recipe's best bits, the pipeline's steps to the AdamW
    recipe's final bits and, with `costs`, Muon's; `rates` says which rates each recipe ran at."""
    return Table("Model sizes and quality", title,
        "{corpus/documents} files of the Python standard library, a BPE of {vocab_size}, 6 layers "
        "of 256 at context 256, {minutes} minutes of each run: the AdamW recipe, nanochat's (its "
        f"rates scaled by width) and the pipeline's, {rates}.", (
        Row("Best validation bits per byte, {*} ({steps} steps of {seconds_per_step:s} at "
            "learning rate {best_learning_rate})", "best_bits_per_byte", "bits/byte",
            "the AdamW recipe", "/recipes/adamw/best_bits_per_byte", QUOTIENT,
            "the AdamW recipe's bits", each="recipes/*"),
        Row("Steps the pipeline's recipe takes to the AdamW recipe's final "
            "{pipeline_steps_to_adamw_final/adamw_bits_per_byte} bits per byte",
            "pipeline_steps_to_adamw_final/pipeline_steps", "number", "the AdamW recipe's steps",
            "pipeline_steps_to_adamw_final/adamw_steps",
            "pipeline_steps_to_adamw_final/share_of_adamw_steps", "the AdamW recipe's steps",
            null="not reached"),
        *(LARGE_COSTS if costs else ()),
    ))  # fmt: skip


# In the page's reading order, after the other reports' tables.
RECIPE_TABLES = {
    "recipes": Table("Model sizes and quality", "Recipes for the minutes spent",
        "The pipeline's tokens trained for equal time with the AdamW recipe (the default before "
        "today's: AdamW on every weight, cosine decay), nanoGPT's CPU recipe, nanochat's at this "
        "size, each change of today's recipe alone over the AdamW recipe and all of them at once "
        "(the pipeline's), each at the best of its rates; and what Muon's update costs.",
        (recipes_row("2 minutes"), *MUON_COST)),
    "recipes_4_minutes": Table("Model sizes and quality", "Recipes for four minutes",
        "As the recipes above, for four minutes: the AdamW recipe, nanoGPT's, nanochat's and the "
        "pipeline's.", (recipes_row("4 minutes"), MUON_COST[0])),
    "recipes_python": Table("Model sizes and quality", "Recipes for the minutes spent, a second text",
        "As the recipes above, on the Python language reference that pydoc keeps ({documents/name}"
        "), its tokenizer fitted as the pipeline's: the AdamW recipe, nanoGPT's, nanochat's and "
        "today's recipe.", (recipes_row("2 minutes"), MUON_COST[0])),
    "recipes_python_4_minutes": Table("Model sizes and quality",
        "Recipes for four minutes, a second text",
        "As the recipes of the second text, for four minutes: the AdamW recipe, nanoGPT's, "
        "nanochat's and the pipeline's.", (recipes_row("4 minutes"), MUON_COST[0])),
    "recipes_x0_mix": two_minutes("The x0 mix over the pipeline's recipe", "the pipeline's recipe "
        "alone and with nanochat's x0 mix (`--x0-mix 0.1`)."),
    "recipes_value_embeddings": two_minutes("Value embeddings over the pipeline's recipe", "the "
        "pipeline's recipe alone and with nanochat's value embeddings (`--value-embeddings 2`)."),
    "recipes_nanochat_whole": two_minutes("nanochat's recipe with its x0 mix and value embeddings",
        "nanochat's recipe alone and with its residual and x0 scalars and value embeddings "
        "(`--x0-mix 0.1 --value-embeddings 2`).", ("nanochat", "nanochat's recipe")),
    "recipes_head_to_head": two_minutes("Recipes head to head", "in one run: nanoGPT's, nanochat's "
        "alone and whole, and the pipeline's alone and with a key and value head for each query "
        "head and value embeddings.", ("nanochat, x0 mix, value embeddings", "nanochat's whole")),
    "recipes_python_head_to_head": two_minutes("The pipeline's recipe head to head, a second text",
        "on the second text: the pipeline's alone, with value embeddings, and with MHA too."),
    "recipes_seeds": seeded("Recipes head to head, three seeds", "each recipe at its best rate "
        "of the head to head, at three seeds (the weights drawn and the windows' order): nanoGPT's "
        "(and at twice its rate), nanochat's alone and whole, and the pipeline's alone and with "
        "value embeddings."),
    "recipes_python_seeds": seeded("The pipeline's recipe at three seeds, a second text", "on the "
        "second text at three seeds: the pipeline's recipe alone and with value embeddings."),
    "recipes_pipeline_seeds": seeded("Another shape for the pipeline's recipe, three seeds", "at "
        "three seeds, each recipe at its best rate: nanoGPT's, nanochat's, the pipeline's, and "
        "that with SwiGLU 344 wide and a key and value head for each query head."),
    "recipes_python_pipeline_seeds": seeded("Another shape for the pipeline's recipe, three seeds, "
        "a second text", "on the second text at three seeds: the pipeline's recipe, and that with "
        "SwiGLU 344 wide and a key and value head for each query head."),
    "recipes_large": larger_scale("Recipes at a larger scale", "each at the best of its rates"),
    # Its update timings were taken while other work shared the CPU: the 7 minutes' stand.
    "recipes_large_30": larger_scale("Recipes at a larger scale, 30 minutes",
                                     "each at the one rate that was best in 7 minutes", False),
}  # fmt: skip

# The script that writes each report, with the flags it was run with.
RECIPE_SCRIPTS = {
    "recipes": "recipes.py --minutes 2",
    "recipes_4_minutes": "recipes.py --minutes 4 --report recipes_4_minutes --recipes adamw nanogpt "
    'nanochat "new recipe, SwiGLU"',
    "recipes_large": "recipes_large.py --minutes 7",
    "recipes_large_30": "recipes_large.py --minutes 30 --rates-from recipes_large --report "
    "recipes_large_30",
    "recipes_x0_mix": 'recipes.py --minutes 2 --report recipes_x0_mix --recipes "new recipe, SwiGLU" '
    '"new recipe, SwiGLU, x0 mix" --muon-rates 0.02 0.04',
    "recipes_value_embeddings": "recipes.py --minutes 2 --report recipes_value_embeddings --recipes "
    '"new recipe, SwiGLU" "new recipe, SwiGLU, value embeddings" --muon-rates 0.02 0.04',
    "recipes_nanochat_whole": "recipes.py --minutes 2 --report recipes_nanochat_whole --recipes "
    'nanochat "nanochat, x0 mix, value embeddings"',
    "recipes_head_to_head": "recipes.py --minutes 2 --report recipes_head_to_head --recipes nanogpt "
    'nanochat "nanochat, x0 mix, value embeddings" "new recipe, SwiGLU" '
    '"new recipe, SwiGLU, MHA, value embeddings" --nanochat-rates 0.01 0.02 0.04',
    "recipes_python_head_to_head": "recipes.py --minutes 2 --documents python-topics --report "
    'recipes_python_head_to_head --recipes "new recipe, SwiGLU" "new recipe, SwiGLU, value '
    'embeddings" "new recipe, SwiGLU, MHA, value embeddings" --muon-rates 0.02 0.04',
    "recipes_seeds": "recipes.py --minutes 2 --report recipes_seeds --recipes nanogpt nanochat "
    '"nanochat, x0 mix, value embeddings" "new recipe, SwiGLU" "new recipe, SwiGLU, value '
    'embeddings" --nanogpt-rates 0.002 0.004 --nanochat-rates 0.02 --muon-rates 0.02 --seeds 1 2 3',
    "recipes_python_seeds": "recipes.py --minutes 2 --documents python-topics --report "
    'recipes_python_seeds --recipes "new recipe, SwiGLU" "new recipe, SwiGLU, value embeddings" '
    "--muon-rates 0.02 --seeds 1 2 3",
    "recipes_pipeline_seeds": "recipes.py --minutes 2 --report recipes_pipeline_seeds --recipes "
    'nanogpt nanochat "new recipe, SwiGLU" "new recipe, SwiGLU 344, MHA" --nanogpt-rates 0.002 '
    "--nanochat-rates 0.02 --muon-rates 0.02 --seeds 1 2 3",
    "recipes_python_pipeline_seeds": "recipes.py --minutes 2 --documents python-topics --report "
    'recipes_python_pipeline_seeds --recipes "new recipe, SwiGLU" "new recipe, SwiGLU 344, MHA" '
    "--muon-rates 0.02 --seeds 1 2 3",
    "recipes_python": "recipes.py --minutes 2 --documents python-topics --report recipes_python "
    '--recipes adamw nanogpt nanochat "new recipe" "new recipe, SwiGLU"',
    "recipes_python_4_minutes": "recipes.py --minutes 4 --documents python-topics --report "
    'recipes_python_4_minutes --recipes adamw nanogpt nanochat "new recipe, SwiGLU"',
}
