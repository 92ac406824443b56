"""CausalAttention: the book's numbers, causality, the mask buffer, dropout and clear errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from llm_attention.causal import CausalAttention
from llm_attention.toy import toy_embeddings


def toy_batch() -> torch.Tensor:
    x = toy_embeddings()  # (6, 3)
    return torch.stack((x, x))  # (2, 6, 3)


def weights_seen_by_dropout(module: CausalAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the module and return the attention weights going into and coming out of its dropout."""
    seen = []
    handle = module.dropout.register_forward_hook(lambda _m, inputs, output: seen.append((inputs[0], output)))
    try:
        module(x)
    finally:
        handle.remove()
    (before, after), = seen
    return before.detach(), after.detach()


def test_book_numbers_seed_123():
    torch.manual_seed(123)
    ca = CausalAttention(3, 2, 6, 0.0)
    out = ca(toy_batch())
    assert out.shape == (2, 6, 2)
    assert out[0, 0].tolist() == pytest.approx([-0.4519, 0.2216], abs=1e-4)
    assert torch.equal(out[0], out[1])  # two copies of one sequence give two equal outputs


def test_projections_are_created_query_key_value_in_that_order():
    torch.manual_seed(123)
    ca = CausalAttention(3, 2, 6, 0.0)
    torch.manual_seed(123)
    reference = [nn.Linear(3, 2, bias=False) for _ in range(3)]
    for mine, theirs in zip((ca.W_query, ca.W_key, ca.W_value), reference):
        assert torch.equal(mine.weight, theirs.weight)


@pytest.mark.parametrize("seed, batch, tokens, d_in, d_out, bias", [(0, 1, 1, 3, 2, False), (1, 3, 7, 5, 4, True),
                                                                   (2, 2, 16, 8, 8, False)])
def test_equals_scaled_dot_product_attention(seed, batch, tokens, d_in, d_out, bias):
    torch.manual_seed(seed)
    ca = CausalAttention(d_in, d_out, context_length=16, dropout=0.0, qkv_bias=bias)
    x = torch.randn(batch, tokens, d_in)
    expected = F.scaled_dot_product_attention(ca.W_query(x), ca.W_key(x), ca.W_value(x), is_causal=True)
    assert torch.allclose(ca(x), expected, atol=1e-6)


def test_first_token_is_its_own_value_and_second_a_two_way_softmax_by_hand():
    torch.manual_seed(5)
    ca = CausalAttention(3, 2, 6, 0.0)
    x = toy_batch()
    out = ca(x)
    q, k, v = (layer(x)[0].tolist() for layer in (ca.W_query, ca.W_key, ca.W_value))
    assert out[0, 0].tolist() == pytest.approx(v[0], abs=1e-6)  # token 0 sees only itself
    s = [sum(a * b for a, b in zip(q[1], k[j])) / math.sqrt(2) for j in (0, 1)]
    w = [math.exp(s_j) / (math.exp(s[0]) + math.exp(s[1])) for s_j in s]
    by_hand = [w[0] * v[0][c] + w[1] * v[1][c] for c in range(2)]
    assert out[0, 1].tolist() == pytest.approx(by_hand, abs=1e-6)


def test_changing_a_later_token_changes_no_earlier_output():
    torch.manual_seed(0)
    ca = CausalAttention(4, 3, 10, 0.0)
    x = torch.randn(2, 8, 4)
    for t in range(8):
        changed = x.clone()
        changed[:, t] += torch.randn(2, 4)
        before, after = ca(x), ca(changed)
        assert torch.allclose(before[:, :t], after[:, :t], atol=1e-6), t
        assert not torch.allclose(before[:, t], after[:, t]), t


def test_weights_are_zero_above_the_diagonal_and_rows_sum_to_one():
    torch.manual_seed(1)
    ca = CausalAttention(3, 2, 6, 0.0)
    weights, _ = weights_seen_by_dropout(ca, toy_batch())
    assert weights.shape == (2, 6, 6)
    above = torch.ones(6, 6, dtype=torch.bool).triu(1)
    assert torch.all(weights[:, above] == 0)
    assert torch.all(weights[:, ~above] > 0)
    assert torch.allclose(weights.sum(dim=-1), torch.ones(2, 6))


def test_dropout_acts_only_in_training_and_scales_the_kept_weights():
    torch.manual_seed(2)
    ca = CausalAttention(3, 2, 6, 0.5)
    x = toy_batch()
    ca.train()
    weights, dropped = weights_seen_by_dropout(ca, x)
    kept = dropped != 0
    assert 0 < int(kept.sum()) < int((weights != 0).sum())  # some kept, some dropped
    assert torch.allclose(dropped[kept], weights[kept] / (1 - 0.5))
    ca.eval()
    weights, passed = weights_seen_by_dropout(ca, x)
    assert torch.equal(weights, passed)
    no_dropout = CausalAttention(3, 2, 6, 0.0)
    no_dropout.load_state_dict(ca.state_dict())
    assert torch.equal(ca(x), no_dropout(x))
    ca.train()
    torch.manual_seed(3)
    first = ca(x)
    torch.manual_seed(4)
    assert not torch.equal(first, ca(x))  # a fresh pattern per call


def test_mask_is_a_bool_buffer_true_above_the_diagonal_and_not_a_parameter():
    ca = CausalAttention(3, 2, 5, 0.0)
    expected = torch.tensor([[j > i for j in range(5)] for i in range(5)])
    assert ca.mask.dtype == torch.bool
    assert torch.equal(ca.mask, expected)
    assert "mask" in dict(ca.named_buffers())
    assert all(p.dtype != torch.bool for p in ca.parameters())
    assert sum(p.numel() for p in ca.parameters()) == 3 * 3 * 2


def test_mask_follows_to_dtype_it_stays_bool_while_the_weights_change():
    torch.manual_seed(6)
    ca = CausalAttention(3, 2, 6, 0.0)
    x = toy_batch()
    out32 = ca(x)
    ca = ca.to(torch.float64)
    assert ca.W_query.weight.dtype == torch.float64
    assert ca.mask.dtype == torch.bool  # .to(dtype) casts floating tensors only
    out64 = ca(x.double())
    assert out64.dtype == torch.float64
    assert torch.allclose(out64.float(), out32, atol=1e-6)


def test_mask_follows_to_device_meta():
    ca = CausalAttention(3, 2, 6, 0.0).to("meta")  # a device every machine has
    assert ca.mask.device.type == "meta" and ca.W_key.weight.device.type == "meta"
    assert ca(torch.empty(2, 6, 3, device="meta")).shape == (2, 6, 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_mask_follows_to_device_cuda():
    torch.manual_seed(7)
    ca = CausalAttention(3, 2, 6, 0.0)
    x = toy_batch()
    expected = ca(x)
    ca = ca.to("cuda")
    assert ca.mask.device.type == "cuda"
    assert torch.allclose(ca(x.cuda()).cpu(), expected, atol=1e-5)


def test_state_dict_round_trip_skips_the_mask_and_loads_across_context_lengths():
    torch.manual_seed(8)
    ca = CausalAttention(3, 2, 6, 0.0, qkv_bias=True)
    state = ca.state_dict()
    assert set(state) == {f"{n}.{p}" for n in ("W_query", "W_key", "W_value") for p in ("weight", "bias")}
    longer = CausalAttention(3, 2, 32, 0.0, qkv_bias=True)
    longer.load_state_dict(state)  # strict: every key matches
    x = toy_batch()
    assert torch.equal(longer(x), ca(x))


def test_shorter_sequences_use_the_top_left_of_the_mask():
    torch.manual_seed(9)
    ca = CausalAttention(3, 2, 6, 0.0)
    x = toy_batch()
    assert torch.allclose(ca(x[:, :4]), ca(x)[:, :4], atol=1e-6)


def test_longer_than_context_length_raises_value_error():
    ca = CausalAttention(3, 2, 4, 0.0)
    with pytest.raises(ValueError, match=r"6 tokens.*context_length=4"):
        ca(toy_batch())


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(d_in=0), ValueError, "d_in must be a positive int, got 0"),
        (dict(d_out=-2), ValueError, "d_out must be a positive int, got -2"),
        (dict(d_out=2.0), TypeError, "d_out must be a positive int"),
        (dict(context_length=True), TypeError, "context_length must be a positive int"),
        (dict(dropout=1.0), ValueError, r"dropout must be a float in \[0, 1\), got 1.0"),
        (dict(dropout=-0.1), ValueError, "dropout"),
        (dict(dropout="0.1"), TypeError, "dropout"),
        (dict(qkv_bias=1), TypeError, "qkv_bias must be True or False"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, words):
    args = dict(d_in=3, d_out=2, context_length=6, dropout=0.0) | kwargs
    with pytest.raises(error, match=words):
        CausalAttention(**args)


@pytest.mark.parametrize(
    "bad, error, words",
    [
        ([[[1.0, 2.0, 3.0]]], TypeError, "torch.Tensor"),
        (torch.ones(6, 3), ValueError, "add a batch dimension"),
        (torch.ones(2, 6, 4), ValueError, "d_in=3"),
        (torch.ones(2, 6, 3, dtype=torch.int64), TypeError, "floating"),
        (torch.ones(2, 0, 3), ValueError, "at least one token"),
        (torch.ones(2, 6, 3, dtype=torch.float64), TypeError, "module's dtype torch.float32"),
        (torch.ones(2, 6, 3, device="meta"), ValueError, "module's device cpu"),
    ],
)
def test_bad_inputs_are_named(bad, error, words):
    with pytest.raises(error, match=words):
        CausalAttention(3, 2, 6, 0.0)(bad)
