"""The Python API: the pipeline's commands as functions over paths, for notebooks and scripts.

Each does what its command does, with the same checks and the same refusals (raised as
`zrodlo.storage.refusal.Refusal`, whose `sentence` is what the command prints after `Error: `):

    from pathlib import Path
    from zrodlo.api import RunPlan, evaluate, export, prepare, resume, sample, train

    prepare(Path("pools/train.jsonl"), Path("tokenizer"), Path("corpus/train"))
    plan = RunPlan(steps=200, context=129, batch_size=32, learning_rate=2e-3, beta1=0.9,
                   beta2=0.99, epsilon=1e-8, weight_decay=0.1, decay_scope="matrices", seed=1,
                   precision="f32", shuffle=True, checkpoint_every=100)
    train(Path("model"), Path("corpus/train"), Path("my-run"), plan)
    resume(Path("my-run/step-100"), Path("corpus/train"), Path("resumed"), steps=200)
    evaluate(Path("my-run/step-200"), [Path("corpus/validation")])["corpora"]["validation"]
    sample(Path("my-run/step-200"), "The ", tokens=100, temperature=0.8, seed=1)
    export(Path("my-run/step-200"), Path("exported"))
"""

from zrodlo.data.preparation import prepare
from zrodlo.evaluation.evaluate import evaluate
from zrodlo.evaluation.export import export
from zrodlo.evaluation.sample import sample
from zrodlo.training.plan import RunPlan
from zrodlo.training.runs import Compute, resume, train

__all__ = ["Compute", "RunPlan", "evaluate", "export", "prepare", "resume", "sample", "train"]
