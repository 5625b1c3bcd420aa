"""Muon in float32: the orthogonalisation, one update against its formula, logical matrices, the
momentum's warmup, its groups beside AdamW, and its state by name."""

import pytest
import torch
from safetensors.torch import load, save

from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import build_decoder
from zrodlo.model.weights import initial_weights
from zrodlo.training.muon import Muon, logical_rows, orthogonalized, shape_scale
from zrodlo.training.optimizer import build_optimizer, set_learning_rate, set_momentum
from zrodlo.training.optimizer_settings import AdamWSettings, MuonSettings
from zrodlo.training.optimizer_state import load_optimizer_state, optimizer_state_tensors

ADAMW = AdamWSettings(0.8, 0.95, 1e-10, weight_decay=0.1, decay_scope="matrices")
MUON = MuonSettings(0.95, 4, embedding_rate=0.3, head_rate=0.004, vector_rate=0.05)


def _matrix(rows: int, columns: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, columns, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape", [(8, 8), (6, 16), (16, 6)])
def test_orthogonalized_keeps_the_singular_vectors_and_brings_the_values_near_one(shape) -> None:
    update = _matrix(*shape)
    result = orthogonalized(update)
    assert result.dtype == torch.float32 and result.shape == update.shape
    u, _, vh = torch.linalg.svd(update.double(), full_matrices=False)
    values = torch.linalg.svdvals(result.double())
    # The quintic's fixed point band: every value from about 0.7 to 1.2, none left near 0.
    assert values.min() > 0.6 and values.max() < 1.25, values
    # The same directions: U^T result V is diagonal, up to the band's spread.
    rotated = u.mT @ result.double() @ vh.mT
    assert torch.allclose(rotated, torch.diag(torch.diagonal(rotated)), atol=0.02)


def test_orthogonalized_iterates_in_float32_as_float64_does_to_its_rounding() -> None:
    update = _matrix(12, 5)
    assert torch.allclose(
        orthogonalized(update).double(), orthogonalized(update.double()), atol=1e-5
    )


def test_one_update_is_the_formula() -> None:
    torch.manual_seed(1)
    weight = torch.nn.Parameter(_matrix(6, 4, seed=2))
    start, gradient = weight.detach().clone(), _matrix(6, 4, seed=3)
    muon = Muon([(weight, (6,))], learning_rate=0.02, momentum=0.9, weight_decay=0.5)
    weight.grad = gradient.clone()
    muon.step()
    # Update 0: the buffer is (1 - mu) G, the look-ahead (1 - mu) G + mu (1 - mu) G.
    look_ahead = (1 - 0.9) * gradient + 0.9 * ((1 - 0.9) * gradient)
    expected = start * (1 - 0.02 * 0.5) - 0.02 * shape_scale(6, 4) * orthogonalized(look_ahead)
    assert torch.allclose(weight.detach(), expected, atol=1e-7)
    assert shape_scale(6, 4) == 1.5**0.5 and shape_scale(4, 6) == 1.0


def test_a_fused_projection_moves_as_its_logical_matrices_would_alone() -> None:
    fused = torch.nn.Parameter(_matrix(10, 4, seed=4))
    parts = [torch.nn.Parameter(fused.detach()[a:b].clone()) for a, b in ((0, 6), (6, 8), (8, 10))]
    gradient = _matrix(10, 4, seed=5)
    together = Muon([(fused, (6, 2, 2))], 0.02, 0.95, 0.1)
    alone = Muon([(part, (part.shape[0],)) for part in parts], 0.02, 0.95, 0.1)
    for _ in range(3):
        fused.grad = gradient.clone()
        for part, (a, b) in zip(parts, ((0, 6), (6, 8), (8, 10)), strict=True):
            part.grad = gradient[a:b].clone()
        together.step()
        alone.step()
    assert torch.equal(fused.detach(), torch.cat([part.detach() for part in parts]))


def test_logical_rows_split_the_fused_projections() -> None:
    config = ModelConfig.of(
        vocab_size=16, layers=1, heads=4, d_model=32, d_ff=48, positions=8, dropout=0.0,
        architecture="llama", kv_heads=2,
    )  # fmt: skip
    assert logical_rows("blocks.0.attention.qkv.weight", 64, config) == (32, 16, 16)
    assert logical_rows("blocks.0.mlp.gate_up.weight", 96, config) == (48, 48)
    assert logical_rows("blocks.0.mlp.down.weight", 32, config) == (32,)


def test_the_momentum_warms_up_as_a_function_of_the_update_alone() -> None:
    assert [MUON.momentum_at(n) for n in (0, 2, 4, 9)] == [
        0.85,
        0.85 + (0.95 - 0.85) * 0.5,
        0.95,
        0.95,
    ]
    assert MuonSettings(0.9, 0, 1.0, 1.0, 1.0).momentum_at(0) == 0.9


def _network(seed: int) -> torch.nn.Module:
    config = _config()
    return build_decoder(config, initial_weights(config, seed)).train()


def _config() -> ModelConfig:
    return ModelConfig.of(
        vocab_size=11, layers=2, heads=2, d_model=8, d_ff=16, positions=8, dropout=0.0,
        architecture="llama", kv_heads=1,
    )  # fmt: skip


def _stepped(network, optimizer, updates: range) -> None:
    for n in updates:
        tokens = torch.arange(12).reshape(2, 6) % 11
        loss = network(tokens).logsumexp(-1).mean() + n * 0.0
        loss.backward()
        set_learning_rate(optimizer, 0.02 * (n + 1) / 4, 0.02)
        set_momentum(optimizer, MUON.momentum_at(n))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def _fresh(seed: int = 0):
    network = _network(seed)
    optimizer = build_optimizer(network.named_parameters(), network.config, ADAMW, 0.02, MUON)
    return network, optimizer


def test_each_group_runs_at_its_own_peak_scaled_by_the_schedule() -> None:
    network, optimizer = _fresh()
    set_learning_rate(optimizer, 0.01, 0.02)  # half way up
    rates = {id(p): g["lr"] for g in optimizer.param_groups for p in g["params"]}
    named = dict(network.named_parameters())
    assert rates[id(named["blocks.0.attention.qkv.weight"])] == 0.01
    assert rates[id(named["token_embedding.weight"])] == 0.15
    assert rates[id(named["lm_head.weight"])] == 0.002
    assert rates[id(named["final_norm.weight"])] == 0.025
    set_learning_rate(optimizer, 0.02, 0.02)
    assert {g["lr"] for g in optimizer.param_groups} == {0.02, 0.3, 0.004, 0.05}


def test_state_by_name_resumes_the_same_updates_to_the_bit() -> None:
    network, optimizer = _fresh()
    _stepped(network, optimizer, range(3))
    state = save(optimizer_state_tensors(optimizer, network.named_parameters()))
    assert "blocks.0.attention.qkv.weight.momentum" in load(state)
    assert "token_embedding.weight.exp_avg_sq" in load(state)
    assert "blocks.0.attention.qkv.weight.exp_avg" not in load(state)

    resumed, resumed_optimizer = _fresh(seed=9)
    resumed.load_state_dict(network.state_dict())
    load_optimizer_state(resumed_optimizer, dict(resumed.named_parameters()), load(state), 3)
    assert save(optimizer_state_tensors(resumed_optimizer, resumed.named_parameters())) == state
    _stepped(network, optimizer, range(3, 6))
    _stepped(resumed, resumed_optimizer, range(3, 6))
    for (name, a), b in zip(
        network.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda t: t.__setitem__("blocks.0.mlp.down.weight.exp_avg", torch.zeros(8, 16)),
            "blocks.0.mlp.down.weight.exp_avg is state the optimizer of blocks.0.mlp.down.weight "
            "does not keep",
        ),
        (
            lambda t: t["blocks.1.attention.out.weight.momentum"].fill_(float("nan")),
            "blocks.1.attention.out.weight.momentum holds a value that is not finite",
        ),
        (
            lambda t: t.pop("blocks.0.mlp.gate_up.weight.momentum"),
            "blocks.0.mlp.gate_up.weight.momentum is missing",
        ),
        (
            lambda t: t["blocks.0.attention.qkv.weight.step"].fill_(2.0),
            "blocks.0.attention.qkv.weight.step counts 2 updates, and the checkpoint records 3",
        ),
    ],
)
def test_forged_muon_state_is_named_and_nothing_changes(change, message) -> None:
    network, optimizer = _fresh()
    _stepped(network, optimizer, range(3))
    tensors = optimizer_state_tensors(optimizer, network.named_parameters())
    before = save(tensors)
    change(tensors)
    with pytest.raises(ValueError) as refused:
        load_optimizer_state(optimizer, dict(network.named_parameters()), tensors, 3)
    assert str(refused.value) == message
    assert save(optimizer_state_tensors(optimizer, network.named_parameters())) == before
