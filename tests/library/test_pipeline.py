"""The pipeline's params checked together: every train.steps the check accepts makes a pipeline
whose resume stage finds its checkpoint, every one it refuses would not, and each refusal names
the params; and each command's options as it takes them from its section."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from doc_experiments import params_with

from zrodlo.pipeline.check import check_params
from zrodlo.pipeline.schedule import schedule_steps
from zrodlo.pipeline.sections import command_options
from zrodlo.storage.refusal import Refusal

ROOT = Path(__file__).resolve().parents[2]


FROM_RULE = (
    "it is null, for a tokenizer fitted and weights drawn, or a transformers directory inside "
    "pretrained/, the folder the tokenizer and init stages depend on"
)

SOURCE_RULE = (
    "it is data/documents.jsonl, each id's pool drawn from a hash of the id, or a splits.json of "
    "your own"
)


def kept_checkpoints(steps: int, every: int, keep: int) -> list[int]:
    """What the train stage leaves, from seed 001's words: a checkpoint every `every` steps and at
    the last, the newest `keep` of them kept."""
    written = [step for step in range(1, steps + 1) if step % every == 0 or step == steps]
    return written[-keep:]


def test_the_committed_params_agree(tmp_path):
    rules = check_params(ROOT / "params.yaml", tmp_path / "rules.txt")
    assert (tmp_path / "rules.txt").read_text().splitlines()[1:] == list(rules)


@pytest.mark.parametrize("every", [2, 3])
@pytest.mark.parametrize("before_end", [1, 2, 4])
def test_steps_are_accepted_exactly_when_the_resume_checkpoint_is_kept(tmp_path, every, before_end):
    for steps in range(1, 30):
        params = params_with(
            tmp_path,
            train={"steps": steps, "checkpoint_every": every, "keep_checkpoints": 2,
                   "warmup": 0, "decay": 1},
            resume={"before_end": before_end},
        )  # fmt: skip
        expected = steps - before_end in kept_checkpoints(steps, every, 2)
        try:
            check_params(params)
            accepted = True
        except Refusal as refusal:
            accepted = False
            assert refusal.sentence.startswith(f"resume.before_end {before_end} "), refusal.sentence
        assert accepted == expected, (steps, every, before_end)


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        ({"train": {"learning_rate": -1.0}},
         "train.learning_rate is -1.0; it must be a positive finite number"),
        ({"train": {"context": 200}},
         "train.context 200 makes the model read 199 tokens, more than the init.positions 128 it "
         "has; raise init.positions or lower train.context"),
        ({"train": {"processes": 3}},
         "train.processes 3 does not divide the 4 micro-batches of a step (train.batch_size 32 "
         "in train.micro_batch_size 8); every process computes an equal share of each step"),
        ({"splits": {"validation": 0.95}},
         "splits.validation 0.95 and splits.test 0.1 leave no documents to train on; their sum "
         "must be below 1"),
        ({"train": {"steps": 45}, "resume": {"before_end": 100}},
         "resume.before_end 100 is not below train.steps 45; the resume stage continues a "
         "checkpoint before the last step"),
        ({"train": {"steps": 250, "checkpoint_every": 100}, "resume": {"before_end": 100}},
         "resume.before_end 100 has the resume stage continue step-150, and with train.steps 250, "
         "train.checkpoint_every 100 and train.keep_checkpoints 2 the train stage keeps step-200, "
         "step-250; set resume.before_end to 50"),
        ({"resume": {"check": "yes"}},
         "resume.check is yes; it is true (the resume stage continues a checkpoint and compares "
         "it with the run) or false (the stage checks nothing)"),
        ({"documents": {"sources": "texts"}},
         "documents.sources is no flag of zrodlo documents import; the section takes source, "
         "include, exclude, skip-empty, skip-undecodable, skip-invalid, id-column, text-column, "
         "cut-at, max-characters"),
        ({"documents": {"include": "*.py"}},
         "documents.include is '*.py'; it is a list of patterns"),
        ({"documents": {"source": ""}},
         "documents.source is not given; it is the folder, .txt, .jsonl, .parquet or .csv file "
         "the documents stage imports"),
        ({"documents": {"max-characters": "many"}},
         "documents.max-characters is 'many'; it is a whole number"),
        ({"train": {"warmup": 1.5}},
         "train.warmup is 1.5; it is a share of train.steps, a number from 0 to 1"),
        ({"train": {"decay": "half"}},
         "train.decay is half; it is a share of train.steps, a number from 0 to 1"),
        ({"init": {"preset": "huge"}},
         "init.preset huge is no preset; choose tiny, small or medium"),
        ({"init": {"layers": 4, "d_model": 130}},
         "init.heads 4 does not divide init.d_model 130; each head takes an equal share of the "
         "model width"),
        ({"train": {"warmup": 0.6, "decay": 0.5}},
         "train.warmup 0.6 and train.decay 0.5 add up to more than train.steps; the decay ends "
         "at the last step"),
        ({"splits": {"source": "mine.json"}},
         f"splits.source is 'mine.json', which is no file; {SOURCE_RULE}"),
        ({"splits": {"source": "."}}, f"splits.source is '.', which is no file; {SOURCE_RULE}"),
        ({"splits": {"source": None}}, f"splits.source is None; {SOURCE_RULE}"),
        ({"train": {"lora_alpha": 16}},
         "train.lora_alpha needs train.lora_rank, the rank of the adapters it describes"),
        ({"train": {"lora_rank": 8, "lora_base": "f16"}},
         "train.lora_base is 'f16'; it takes f32 or bf16"),
        ({"prepare": {"enable_thinking": "no"}},
         "prepare.enable_thinking is no; it is true or false (passed to a chat template as "
         "enable_thinking) or null (the template's own default)"),
        ({"train": {"lora_rank": 8, "lora_targets": "q,gate", "optimizer": "adamw",
                    "embedding_rate": None, "head_rate": None, "vector_rate": None},
          "init": {"architecture": "gpt"}},
         "train.lora_targets is q,gate; it names each of q, k, v, o, up, down once at most, one "
         "or more of them"),
        *(({"init": {"from": value}}, f"init.from is {value!r}; {FROM_RULE}")
          for value in ("/home/me/smollm", "smollm", "pretrained", "pretrained/../smollm",
                        "pretrained/it's", "", 3)),
    ],
)  # fmt: skip
def test_a_refusal_names_the_params(tmp_path, changes, sentence):
    with pytest.raises(Refusal) as refused:
        check_params(params_with(tmp_path, **changes), tmp_path / "rules.txt")
    assert refused.value.sentence == sentence
    assert not (tmp_path / "rules.txt").exists()


@pytest.mark.parametrize("steps", [1, 7, 200, 999, 1000, 12_345])
@pytest.mark.parametrize(("warmup", "decay"), [(0.1, 0.5), (0, 1), (0.05, 0.95), (0.3, 0)])
def test_the_schedule_follows_the_steps_and_its_decay_ends_at_the_last(steps, warmup, decay):
    """Shares of train.steps, rounded down to whole updates, the stable ones filling the rest: any
    train.steps keeps the schedule's shape, and the rate reaches its end at the last step."""
    flags = schedule_steps({"steps": steps, "warmup": warmup, "decay": decay})
    assert sum(flags.values()) == steps
    assert flags["warmup_steps"] == int(steps * warmup + 1e-9)
    assert flags["decay_steps"] == int(steps * decay + 1e-9)
    assert min(flags.values()) >= 0


def test_the_committed_schedule_follows_the_steps():
    """0.1 of warmup and 0.3 of decay: of 1,000 steps, 100, 600 and 300 updates; of today's 350,
    35, 210 and 105 (the decimal, not the float nearest it, is rounded)."""
    train = yaml.safe_load((ROOT / "params.yaml").read_text())["train"]
    assert train["steps"] == 350
    assert schedule_steps(train) == {"warmup_steps": 35, "stable_steps": 210, "decay_steps": 105}
    assert schedule_steps({**train, "steps": 1000}) == {
        "warmup_steps": 100, "stable_steps": 600, "decay_steps": 300,
    }  # fmt: skip
    assert schedule_steps({**train, "steps": 200}) == {
        "warmup_steps": 20, "stable_steps": 120, "decay_steps": 60,
    }  # fmt: skip


def test_without_the_resume_check_any_steps_are_accepted(tmp_path):
    """resume.check false: the resume stage continues nothing, so no checkpoint need be kept."""
    for steps in (45, 250, 1001):
        check_params(params_with(tmp_path, train={"steps": steps}, resume={"check": False}))


@pytest.mark.parametrize(
    ("section", "options"),
    [
        ({"kind": "char", "vocab_size": 1024}, {"kind": "char"}),
        ({"kind": "bpe", "vocab_size": 1024}, {"kind": "bpe", "vocab_size": 1024}),
    ],
)
def test_the_tokenizer_section_gives_tokenizer_fit_the_kinds_own_keys(section, options):
    """vocab_size is read only for a BPE, so that -S tokenizer.kind=char alone switches kinds."""
    assert command_options({"tokenizer": section}, "tokenizer fit") == options


def test_the_init_section_gives_model_init_the_familys_own_keys(tmp_path):
    """init.kv_heads is read for llama and qwen2 only, so that -S init.architecture=gpt alone
    switches families (README's experiment): the check holds and model init is not given it."""
    init = yaml.safe_load((ROOT / "params.yaml").read_text())["init"]
    assert init["kv_heads"] is not None  # the committed params name llama's key and value heads
    gpt = command_options({"init": {**init, "architecture": "gpt"}}, "model init")
    assert "kv_heads" not in gpt and gpt["architecture"] == "gpt"
    assert command_options({"init": init}, "model init")["kv_heads"] == init["kv_heads"]
    check_params(params_with(tmp_path, init={"architecture": "gpt"}), tmp_path / "rules.txt")


def test_the_train_section_gives_the_schedule_in_whole_updates_and_leaves_nulls_out():
    train = yaml.safe_load((ROOT / "params.yaml").read_text())["train"]
    options = command_options({"train": {**train, "clip_norm": None}}, "model train")
    assert (options["warmup_steps"], options["stable_steps"], options["decay_steps"]) == (
        35,
        210,
        105,
    )
    assert "warmup" not in options and "clip_norm" not in options


def test_a_key_of_either_spelling_is_an_option_and_another_is_refused():
    params = {"documents": {"skip-empty": True, "id_column": "name"}}
    accepted = {"skip_empty", "id_column", "source"}
    options = command_options(params, "documents import", accepted)
    assert options == {"skip_empty": True, "id_column": "name"}
    with pytest.raises(Refusal) as refused:
        command_options({"documents": {"skip-emtpy": True}}, "documents import", accepted)
    assert refused.value.sentence == (
        "documents.skip-emtpy is no flag of zrodlo documents import; its section takes the flags "
        "zrodlo documents import --help lists, with - or _ between words"
    )


def test_the_resume_and_evaluate_stages_take_the_train_stages_values():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    resumed = command_options(params, "checkpoint resume")
    assert resumed["steps"] == params["train"]["steps"] and resumed["device"] == "cpu"
    scored = command_options(params, "model evaluate")
    assert scored == {
        "sample_windows": params["evaluate"]["train_windows"],
        "context": params["train"]["context"], "device": params["train"]["device"],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("section", "sentence"),
    [
        ({"kind": "word"}, "tokenizer.kind is word; it is char or bpe"),
        ({"kind": "bpe", "vocab_size": 100},
         "tokenizer.vocab_size is 100; a byte-level BPE holds the 256 bytes and BOS and EOS, so it "
         "is 258 or more, and at most 1,048,576"),
        ({"kind": "bpe", "vocab_size": None},
         "tokenizer.kind bpe needs tokenizer.vocab_size, the tokens its vocabulary holds (258 or "
         "more)"),
    ],
)  # fmt: skip
def test_the_check_refuses_a_tokenizer_section_naming_the_params(tmp_path, section, sentence):
    with pytest.raises(Refusal) as refused:
        check_params(params_with(tmp_path, tokenizer=section))
    assert refused.value.sentence == sentence


def test_a_model_to_start_from_leaves_the_tokenizer_and_init_keys_unread(tmp_path):
    """With init.from the tokenizer and the model are the directory's: the kind, the vocabulary
    size, the shape and the positions those keys would give are not checked, and model init,
    which the init stage then does not run, is given no `from`."""
    params = params_with(
        tmp_path,
        init={"from": "pretrained/smollm", "preset": "huge", "positions": 8},
        tokenizer={"kind": "word"},
    )
    check_params(params)
    init = yaml.safe_load(params.read_text())["init"]
    assert "from" not in command_options({"init": init}, "model init")


def test_your_own_pools_leave_the_shares_unread(tmp_path):
    """splits.source names a splits.json of the user's: the pools are theirs, and shares that
    would leave nothing to train on are not refused, being unread."""
    (tmp_path / "mine.json").write_text('{"train": ["a"], "validation": ["b"]}')
    params = params_with(tmp_path, splits={"source": "mine.json", "validation": 0.95})
    check_params(params, tmp_path / "rules.txt")
    assert command_options(yaml.safe_load(params.read_text()), "documents assign") == {
        "source": "mine.json", "validation": 0.95, "test": 0.1,
    }  # fmt: skip
