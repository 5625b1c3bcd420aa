"""AdamW as a run uses it: the textbook restore example, decay scope, state by name, clipping."""

import math

import pytest
import torch
from safetensors.torch import load, save

from zrodlo.storage.refusal import Refusal
from zrodlo.training.optimizer import build_adamw, clip_gradients, set_learning_rate
from zrodlo.training.optimizer_settings import AdamWSettings, check_clip_norm
from zrodlo.training.optimizer_state import load_optimizer_state, optimizer_state_tensors

TEXTBOOK = AdamWSettings(beta1=0.9, beta2=0.99, epsilon=0.0, weight_decay=0.0)


def _scalar_step(theta: torch.nn.Parameter, optimizer: torch.optim.Optimizer, grad: float) -> None:
    theta.grad = torch.tensor(grad, dtype=torch.float64)
    optimizer.step()


def test_textbook_example_2_restored_moments_against_a_fresh_optimizer() -> None:
    theta = torch.nn.Parameter(torch.tensor(1.0, dtype=torch.float64))
    optimizer = build_adamw([("theta", theta)], TEXTBOOK, 0.1)
    _scalar_step(theta, optimizer, 1.0)
    assert theta.item() == pytest.approx(0.9, abs=1e-12)
    saved_theta = theta.detach().clone()
    saved = load(save(optimizer_state_tensors(optimizer, [("theta", theta)])))
    assert set(saved) == {"theta.exp_avg", "theta.exp_avg_sq", "theta.step"}

    restored = torch.nn.Parameter(saved_theta.clone())
    resumed = build_adamw([("theta", restored)], TEXTBOOK, 0.1)
    load_optimizer_state(resumed, [("theta", restored)], saved, 1)
    _scalar_step(restored, resumed, -1.0)
    assert restored.item() == pytest.approx(0.9 + 0.1 / 19, abs=1e-12)

    _scalar_step(theta, optimizer, -1.0)  # the uninterrupted run
    assert torch.equal(theta.detach(), restored.detach())

    weights_only = torch.nn.Parameter(saved_theta.clone())
    fresh = build_adamw([("theta", weights_only)], TEXTBOOK, 0.1)
    _scalar_step(weights_only, fresh, -1.0)
    assert weights_only.item() == pytest.approx(1.0, abs=1e-12)


def _small_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Embedding(7, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 7)
    )


def test_matrices_scope_leaves_biases_and_norm_scales_undecayed() -> None:
    model = _small_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    settings = AdamWSettings(0.9, 0.999, 1e-8, weight_decay=0.5, decay_scope="matrices")
    optimizer = build_adamw(model.named_parameters(), settings, 0.1)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    after = dict(model.named_parameters())
    for name in ("1.weight", "1.bias", "2.bias"):
        assert torch.equal(after[name].detach(), before[name]), name
    for name in ("0.weight", "2.weight"):
        torch.testing.assert_close(after[name].detach(), before[name] * (1 - 0.1 * 0.5))


def test_all_scope_decays_every_weight() -> None:
    model = _small_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    settings = AdamWSettings(0.9, 0.999, 1e-8, weight_decay=0.5, decay_scope="all")
    optimizer = build_adamw(model.named_parameters(), settings, 0.1)
    assert len(optimizer.param_groups) == 1
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), before[name] * 0.95)


def test_single_tensor_implementation_is_chosen() -> None:
    optimizer = build_adamw(_small_model().named_parameters(), TEXTBOOK, 0.1)
    for group in optimizer.param_groups:
        assert group["foreach"] is False and group["fused"] is False


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        generator = torch.Generator().manual_seed(step)
        tokens = torch.randint(0, 7, (3, 5), generator=generator)
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 7), tokens.roll(1).reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        set_learning_rate(optimizer, 0.01 * (step + 1), 0.01)
        optimizer.step()


def test_state_round_trip_continues_training_bit_for_bit() -> None:
    settings = AdamWSettings(0.9, 0.95, 1e-8, weight_decay=0.1, decay_scope="matrices")
    model = _small_model()
    optimizer = build_adamw(model.named_parameters(), settings, 0.01)
    _train(model, optimizer, range(3))
    weights = save({n: p.detach().clone() for n, p in model.named_parameters()})
    state = save(optimizer_state_tensors(optimizer, model.named_parameters()))

    resumed = _small_model()
    with torch.no_grad():
        for name, tensor in load(weights).items():
            resumed.get_parameter(name).copy_(tensor)
    resumed_optimizer = build_adamw(resumed.named_parameters(), settings, 0.01)
    load_optimizer_state(resumed_optimizer, dict(resumed.named_parameters()), load(state), 3)
    assert save(optimizer_state_tensors(resumed_optimizer, resumed.named_parameters())) == state

    _train(model, optimizer, range(3, 6))
    _train(resumed, resumed_optimizer, range(3, 6))
    for (name, p), q in zip(model.named_parameters(), resumed.parameters(), strict=True):
        assert torch.equal(p, q), name
    assert save(optimizer_state_tensors(optimizer, model.named_parameters())) == save(
        optimizer_state_tensors(resumed_optimizer, resumed.named_parameters())
    )


def test_step_count_is_kept_as_torch_keeps_it() -> None:
    model = _small_model()
    optimizer = build_adamw(model.named_parameters(), TEXTBOOK, 0.01)
    _train(model, optimizer, range(2))
    tensors = optimizer_state_tensors(optimizer, model.named_parameters())
    step = tensors["2.weight.step"]
    assert step.shape == () and step.dtype == torch.float32 and step.item() == 2.0


def test_a_parameter_never_stepped_is_saved_as_zeros_and_restores_to_no_state() -> None:
    model = _small_model()
    optimizer = build_adamw(model.named_parameters(), TEXTBOOK, 0.01)
    tensors = optimizer_state_tensors(optimizer, model.named_parameters())
    assert tensors["0.weight.step"].item() == 0.0
    assert not tensors["0.weight.exp_avg"].any()
    load_optimizer_state(optimizer, model.named_parameters(), tensors, 0)
    assert len(optimizer.state) == 0


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.pop("2.bias.exp_avg"), "2.bias.exp_avg is missing"),
        (lambda t: t.pop("0.weight.step"), "0.weight.step is missing"),
        (lambda t: t.update({"2.bias.exp_avg": torch.zeros(8)}), "2.bias.exp_avg is"),
        (lambda t: t.update({"2.bias.exp_avg_sq": torch.zeros(7).double()}), "2.bias.exp_avg_sq"),
        (lambda t: t.update({"2.bias.step": torch.tensor([1.0])}), "2.bias.step"),
        (lambda t: t.update({"2.bias.step": torch.tensor(1.5)}), "2.bias.step"),
        (lambda t: t.update({"3.weight.exp_avg": torch.zeros(1)}), "3.weight.exp_avg names no"),
        (
            lambda t: t.update({"2.bias.step": torch.tensor(2.0)}),
            "2.bias.step counts 2 updates, and the checkpoint records 1",
        ),
    ],
)
def test_a_missing_or_misshaped_key_is_a_value_error(edit, message: str) -> None:
    model = _small_model()
    optimizer = build_adamw(model.named_parameters(), TEXTBOOK, 0.01)
    _train(model, optimizer, range(1))
    before = save(optimizer_state_tensors(optimizer, model.named_parameters()))
    tensors = load(before)
    edit(tensors)
    with pytest.raises(ValueError, match=message):
        load_optimizer_state(optimizer, model.named_parameters(), tensors, 1)
    # Nothing changed on refusal.
    assert save(optimizer_state_tensors(optimizer, model.named_parameters())) == before


def test_clip_scales_down_and_reports_the_norm_before() -> None:
    a = torch.nn.Parameter(torch.zeros(2))
    b = torch.nn.Parameter(torch.zeros(1))
    unused = torch.nn.Parameter(torch.zeros(3))
    a.grad = torch.tensor([3.0, 0.0])
    b.grad = torch.tensor([4.0])
    assert clip_gradients([a, b, unused], 1.0) == pytest.approx(5.0)
    clipped = math.hypot(a.grad[0].item(), b.grad[0].item())
    assert clipped == pytest.approx(1.0, rel=1e-5) and clipped <= 1.0
    assert a.grad[0].item() / b.grad[0].item() == pytest.approx(0.75)


def test_clip_leaves_a_smaller_gradient_and_none_only_measures() -> None:
    a = torch.nn.Parameter(torch.zeros(2))
    a.grad = torch.tensor([3.0, 4.0])
    assert clip_gradients([a], 10.0) == pytest.approx(5.0)
    assert torch.equal(a.grad, torch.tensor([3.0, 4.0]))
    a.grad = torch.tensor([30.0, 40.0])
    assert clip_gradients([a], None) == pytest.approx(50.0)
    assert torch.equal(a.grad, torch.tensor([30.0, 40.0]))
    assert clip_gradients([torch.nn.Parameter(torch.zeros(1))], None) == 0.0


def test_set_learning_rate_sets_every_group() -> None:
    model = _small_model()
    settings = AdamWSettings(0.9, 0.999, 1e-8, weight_decay=0.1, decay_scope="matrices")
    optimizer = build_adamw(model.named_parameters(), settings, 0.01)
    assert len(optimizer.param_groups) == 2
    set_learning_rate(optimizer, 0.25, 0.1)
    assert [g["lr"] for g in optimizer.param_groups] == [0.25, 0.25]


SETTINGS_REFUSALS = [
    (dict(epsilon=0.0), "--epsilon is 0.0; it must be a positive finite number"),
    (dict(epsilon=float("nan")), "--epsilon is nan; it must be a positive finite number"),
    (dict(epsilon=float("inf")), "--epsilon is inf; it must be a positive finite number"),
    (dict(beta1=1.0), "--beta1 is 1.0; a moment decay lies above zero and below 1"),
    (dict(beta1=0.0), "--beta1 is 0.0; a moment decay lies above zero and below 1"),
    (dict(beta1=float("nan")), "--beta1 is nan; a moment decay lies above zero and below 1"),
    (dict(beta2=1.5), "--beta2 is 1.5; a moment decay lies above zero and below 1"),
    (dict(beta2=-0.9), "--beta2 is -0.9; a moment decay lies above zero and below 1"),
    (
        dict(weight_decay=-0.01),
        "--weight-decay is -0.01; it must be a finite number that is not negative",
    ),
    (
        dict(weight_decay=float("inf")),
        "--weight-decay is inf; it must be a finite number that is not negative",
    ),
    # Seed 001's order: epsilon before the betas, the betas before the weight decay.
    (dict(epsilon=-1.0, beta1=2.0), "--epsilon is -1.0; it must be a positive finite number"),
    (
        dict(beta2=2.0, weight_decay=-1.0),
        "--beta2 is 2.0; a moment decay lies above zero and below 1",
    ),
]


@pytest.mark.parametrize(("changes", "sentence"), SETTINGS_REFUSALS)
def test_each_settings_refusal(changes: dict, sentence: str) -> None:
    flags = dict(beta1=0.9, beta2=0.95, epsilon=1e-8, weight_decay=0.1) | changes
    with pytest.raises(Refusal) as caught:
        AdamWSettings(**flags).validate()
    assert caught.value.sentence == sentence


def test_valid_settings_pass() -> None:
    AdamWSettings(0.9, 0.95, 1e-8, 0.0, "matrices").validate()
    check_clip_norm(None)
    check_clip_norm(1.0)


@pytest.mark.parametrize(
    ("value", "shown"), [(0.0, "0.0"), (-1.0, "-1.0"), (float("nan"), "nan"), (float("inf"), "inf")]
)
def test_clip_norm_refusal(value: float, shown: str) -> None:
    with pytest.raises(Refusal) as caught:
        check_clip_norm(value)
    assert caught.value.sentence == f"--clip-norm is {shown}; it must be a positive finite number"
