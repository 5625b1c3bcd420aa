"""What every decoder architecture guarantees in its forward pass, held for GPT-2's and llama's
alike: float32 logits, causality, dropout masks from ChaCha20 at every site and only in training,
micro-batches that see the whole batch's masks and add up to its gradient, bf16 autocast with
float32 norms, and no read of torch's random state."""

from dataclasses import replace

import pytest
import torch

from zrodlo.model.attention import KVCache
from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import Decoder, build_decoder
from zrodlo.model.dropout import StepMasks
from zrodlo.model.weights import initial_weights

# llama here shares its one key and value head between both query heads (grouped-query attention).
LLAMA = {"architecture": "llama", "kv_heads": 1, "rope_theta": 500.0}


@pytest.fixture(params=["gpt", "llama"])
def arch(request) -> str:
    return request.param


def small(arch: str) -> ModelConfig:
    llama = LLAMA if arch == "llama" else {}
    return ModelConfig.of(
        vocab_size=16, positions=8, d_model=16, layers=2, heads=2, d_ff=32, dropout=0.0,
        attention_dropout=0.0, **llama,
    )  # fmt: skip


def dropping(arch: str) -> ModelConfig:
    return replace(small(arch), dropout=0.2, attention_dropout=0.3)


def model(config: ModelConfig, seed: int = 7, train: bool = True) -> Decoder:
    return build_decoder(config, initial_weights(config, seed)).train(train)


def tokens(batch: int, time: int, vocab: int = 16, offset: int = 0) -> torch.Tensor:
    # A fixed, varied pattern: no torch RNG in the tests either.
    index = torch.arange(batch * time).reshape(batch, time)
    return (index * 7 + offset + index // 3) % vocab


class AllKeep:
    """Step masks that keep every element, to compare the explicit attention with the fused one."""

    def keep(self, layer, site, shape, p, device):
        return torch.ones(shape, dtype=torch.bool, device=device)


@pytest.mark.parametrize("time", [1, 5, 8])
def test_forward_gives_float32_logits_for_every_position(time, arch):
    logits = model(dropping(arch))(tokens(3, time), StepMasks(1, 0))
    assert logits.shape == (3, time, 16)
    assert logits.dtype == torch.float32
    assert torch.isfinite(logits).all()


def test_forward_rejects_more_tokens_than_positions(arch):
    with pytest.raises(ValueError, match="9 tokens exceed the model's 8 positions"):
        model(small(arch))(tokens(1, 9))


@pytest.mark.parametrize("train", [False, True])
def test_a_later_token_never_changes_earlier_logits(train, arch):
    gpt = model(dropping(arch), train=train)
    masks = StepMasks(11, 3)
    before = gpt(tokens(2, 8), masks)
    for t in range(8):
        changed = tokens(2, 8)
        changed[:, t] = (changed[:, t] + 5) % 16
        after = gpt(changed, masks)
        assert torch.equal(after[:, :t], before[:, :t]), f"position {t} leaked backwards"
        assert not torch.allclose(after[:, t:], before[:, t:]), "the change had no effect at all"


def test_train_without_dropout_equals_eval(arch):
    gpt = model(small(arch))
    trained = gpt(tokens(4, 8), StepMasks(5, 9))
    assert torch.equal(trained, gpt.eval()(tokens(4, 8)))


def test_eval_ignores_masks_and_training_without_masks_drops_nothing(arch):
    gpt = model(dropping(arch), train=False)
    plain = gpt(tokens(4, 8))
    assert torch.equal(gpt(tokens(4, 8), StepMasks(5, 9)), plain)
    assert torch.equal(gpt.train()(tokens(4, 8)), plain)
    assert not torch.allclose(gpt(tokens(4, 8), StepMasks(5, 9)), plain), "dropout had no effect"


def test_masks_depend_on_seed_and_step(arch):
    gpt = model(dropping(arch))
    first = gpt(tokens(4, 8), StepMasks(5, 9))
    assert torch.equal(gpt(tokens(4, 8), StepMasks(5, 9)), first)
    assert not torch.equal(gpt(tokens(4, 8), StepMasks(5, 10)), first)
    assert not torch.equal(gpt(tokens(4, 8), StepMasks(6, 9)), first)


@pytest.mark.parametrize("site", ["embedding and residual", "attention probabilities"])
def test_each_dropout_rate_reaches_the_logits(site, arch):
    config = (
        replace(small(arch), dropout=0.2)
        if site.startswith("embedding")
        else replace(small(arch), attention_dropout=0.3)
    )
    gpt = model(config)
    assert not torch.allclose(gpt(tokens(4, 8), StepMasks(5, 9)), gpt(tokens(4, 8)))


def test_fused_attention_equals_the_explicit_path(arch):
    # A rate this small forces the explicit path, while 1/(1-p) rounds to 1 in float32, so with
    # masks that keep everything both paths compute the same function.
    fused = model(small(arch))
    explicit = build_decoder(
        replace(small(arch), attention_dropout=1e-9), initial_weights(small(arch), 7)
    ).train()
    expected = fused(tokens(4, 8))
    actual = explicit(tokens(4, 8), AllKeep())
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)


def test_micro_batches_see_the_same_masks_as_the_whole_batch(arch):
    gpt = model(dropping(arch))
    masks = StepMasks(21, 4)
    whole = gpt(tokens(4, 8), masks)
    halves = torch.cat([gpt(tokens(4, 8)[:2], masks.rows(0)), gpt(tokens(4, 8)[2:], masks.rows(2))])
    torch.testing.assert_close(halves, whole, rtol=1e-6, atol=1e-6)
    quarters = torch.cat([gpt(tokens(4, 8)[i : i + 1], masks.rows(i)) for i in range(4)])
    torch.testing.assert_close(quarters, whole, rtol=1e-6, atol=1e-6)


def target_weighted_loss(gpt: Decoder, inputs, targets, masks, total_targets: int) -> torch.Tensor:
    logits = gpt(inputs, masks)
    nll = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), targets.flatten(), reduction="sum"
    )
    return nll / total_targets


def test_micro_batch_gradients_add_up_to_the_batch_gradient(arch):
    inputs = tokens(4, 8)
    targets = tokens(4, 8, offset=3)
    targets[1, 5:] = -100  # right padding: these positions score nothing
    targets[3, 2:] = -100
    total = int((targets != -100).sum())
    masks = StepMasks(2, 17)

    whole = model(dropping(arch))
    target_weighted_loss(whole, inputs, targets, masks, total).backward()

    split = model(dropping(arch))
    for first in (0, 2):
        rows = slice(first, first + 2)
        loss = target_weighted_loss(split, inputs[rows], targets[rows], masks.rows(first), total)
        loss.backward()

    for (name, a), (_, b) in zip(whole.named_parameters(), split.named_parameters(), strict=True):
        assert a.grad is not None and a.grad.abs().sum() > 0, name
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-7, msg=name)


def test_bf16_autocast_keeps_logits_and_norms_in_float32(arch):
    gpt = model(dropping(arch))
    expected = gpt(tokens(2, 8), AllKeep())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = gpt(tokens(2, 8), AllKeep())
        normed = gpt.final_norm(torch.ones(2, 16, dtype=torch.bfloat16))
        fused = gpt.eval()(tokens(2, 8))
    assert logits.dtype == torch.float32 and fused.dtype == torch.float32
    assert normed.dtype == torch.float32
    torch.testing.assert_close(logits, expected, rtol=0.1, atol=0.05)


def test_nothing_reads_torch_random_state(arch):
    state = torch.get_rng_state()
    gpt = model(dropping(arch))
    gpt(tokens(4, 8), StepMasks(1, 1)).sum().backward()
    assert torch.equal(torch.get_rng_state(), state)


def test_reading_one_token_at_a_time_through_a_cache_gives_the_whole_passs_logits(arch):
    decoder = model(small(arch), train=False)
    whole = decoder(tokens(2, 8))  # (2, 8, 16)
    cache = KVCache()
    parts = [decoder(tokens(2, 8)[:, :3], cache=cache)]  # the prompt, then a token at a time
    parts += [decoder(tokens(2, 8)[:, t : t + 1], cache=cache) for t in range(3, 8)]
    assert cache.length == 8
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="9 tokens exceed the model's 8 positions"):
        decoder(tokens(2, 1), cache=cache)
