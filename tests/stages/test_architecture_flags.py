"""`zrodlo pipeline architecture`: params.yaml's init section as model init's decoder flags,
which the init stage passes on."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("init", "flags"),
    [
        ("preset: small", "--architecture gpt"),
        ("architecture: gpt\n  kv_heads: null\n  tie_embeddings: false", "--architecture gpt"),
        ("architecture: llama", "--architecture llama"),
        (
            "architecture: llama\n  kv_heads: 2\n  rope_theta: 500.0\n  tie_embeddings: true",
            "--architecture llama --kv-heads 2 --rope-theta 500.0 --tie-embeddings",
        ),
        # A zero is a value, passed on for model init to refuse: not a setting left out.
        ("architecture: llama\n  kv_heads: 0", "--architecture llama --kv-heads 0"),
        ("architecture: llama\n  rope_theta: 0", "--architecture llama --rope-theta 0"),
    ],
)
def test_the_init_section_gives_the_decoder_flags(tmp_path, run_zrodlo, init, flags):
    params = tmp_path / "params.yaml"
    params.write_text(f"init:\n  {init}\n")
    returncode, stdout, stderr = run_zrodlo(
        "pipeline", "architecture", "--params", params, cwd=tmp_path
    )
    assert (returncode, stdout, stderr) == (0, f"{flags}\n", "")


@pytest.mark.parametrize(
    ("init", "sentence"),
    [
        ("architecture: bert", "init.architecture is bert; it is gpt or llama"),
        ("kv_heads: 0", "init.kv_heads is for init.architecture llama; a gpt model has none"),
        (
            "architecture: gpt\n  tie_embeddings: true",
            "init.tie_embeddings is for init.architecture llama; a gpt model has none",
        ),
    ],
)
def test_a_setting_of_the_other_decoder_is_refused(tmp_path, assert_refused, init, sentence):
    params = tmp_path / "params.yaml"
    params.write_text(f"init:\n  {init}\n")
    assert_refused("pipeline", "architecture", "--params", params, sentence=sentence)
