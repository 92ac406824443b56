"""Self-attention with trainable weights: SelfAttentionV1 (nn.Parameter) and SelfAttentionV2 (nn.Linear)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from llm_attention.self_attention import SelfAttentionV1, SelfAttentionV2
from llm_attention.toy import toy_embeddings


def attention_by_hand(x, w_query, w_key, w_value):
    """softmax(Q K^T / sqrt(d_k)) V with Python lists and loops; matrices are lists of rows (d_in, d_out)."""
    def project(row, matrix):
        return [sum(row[i] * matrix[i][o] for i in range(len(row))) for o in range(len(matrix[0]))]

    queries = [project(row, w_query) for row in x]
    keys = [project(row, w_key) for row in x]
    values = [project(row, w_value) for row in x]
    d_k = len(keys[0])
    out = []
    for q in queries:
        scores = [sum(a * b for a, b in zip(q, k)) / math.sqrt(d_k) for k in keys]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        weights = [e / sum(exps) for e in exps]
        out.append([sum(w * v[o] for w, v in zip(weights, values)) for o in range(len(values[0]))])
    return out


def v1_matrices(module):
    return [m.detach().tolist() for m in (module.W_query, module.W_key, module.W_value)]


def v2_matrices(module):
    return [layer.weight.detach().T.tolist() for layer in (module.W_query, module.W_key, module.W_value)]


# -- against hand calculations ---------------------------------------------------------------

@pytest.mark.parametrize("seed, d_in, d_out, tokens", [(123, 3, 2, 6), (0, 5, 4, 7), (7, 2, 3, 1)])
def test_v1_matches_a_hand_calculation(seed, d_in, d_out, tokens):
    torch.manual_seed(seed)
    module = SelfAttentionV1(d_in, d_out)
    x = torch.randn(tokens, d_in)
    expected = attention_by_hand(x.tolist(), *v1_matrices(module))
    assert torch.allclose(module(x), torch.tensor(expected), atol=1e-5)


@pytest.mark.parametrize("seed, d_in, d_out, tokens", [(789, 3, 2, 6), (1, 4, 4, 5), (2, 6, 1, 3)])
def test_v2_matches_a_hand_calculation(seed, d_in, d_out, tokens):
    torch.manual_seed(seed)
    module = SelfAttentionV2(d_in, d_out)
    x = torch.randn(tokens, d_in)
    expected = attention_by_hand(x.tolist(), *v2_matrices(module))
    assert torch.allclose(module(x), torch.tensor(expected), atol=1e-5)


def test_v2_with_bias_matches_scaled_dot_product_attention():
    torch.manual_seed(3)
    module = SelfAttentionV2(4, 6, qkv_bias=True)
    x = torch.randn(5, 4)
    with torch.no_grad():
        q = x @ module.W_query.weight.T + module.W_query.bias  # (5, 6)
        k = x @ module.W_key.weight.T + module.W_key.bias  # (5, 6)
        v = x @ module.W_value.weight.T + module.W_value.bias  # (5, 6)
        expected = F.scaled_dot_product_attention(q, k, v)  # divides by sqrt(6)
        assert torch.allclose(module(x), expected, atol=1e-6)


# -- the book's published numbers -------------------------------------------------------------

def test_book_numbers_v1_seed_123():
    torch.manual_seed(123)
    out = SelfAttentionV1(3, 2)(toy_embeddings())
    assert out.shape == (6, 2)
    assert torch.allclose(out[0], torch.tensor([0.2996, 0.8053]), atol=1e-4)
    assert torch.allclose(out[1], torch.tensor([0.3061, 0.8210]), atol=1e-4)


def test_book_numbers_v2_seed_789():
    torch.manual_seed(789)
    out = SelfAttentionV2(3, 2)(toy_embeddings())
    assert out.shape == (6, 2)
    assert torch.allclose(out[0], torch.tensor([-0.0739, 0.0713]), atol=1e-4)


def test_v1_draws_its_matrices_with_torch_rand_in_order():
    torch.manual_seed(123)
    expected = [torch.rand(3, 2) for _ in range(3)]
    torch.manual_seed(123)
    module = SelfAttentionV1(3, 2)
    for got, want in zip((module.W_query, module.W_key, module.W_value), expected):
        assert isinstance(got, torch.nn.Parameter)
        assert torch.equal(got.detach(), want)


def test_v2_creates_its_layers_in_order():
    torch.manual_seed(789)
    expected = [torch.nn.Linear(3, 2, bias=False).weight.detach() for _ in range(3)]
    torch.manual_seed(789)
    module = SelfAttentionV2(3, 2)
    for layer, want in zip((module.W_query, module.W_key, module.W_value), expected):
        assert isinstance(layer, torch.nn.Linear) and layer.bias is None
        assert layer.weight.shape == (2, 3)  # (d_out, d_in)
        assert torch.equal(layer.weight.detach(), want)


# -- properties ------------------------------------------------------------------------------

def test_v1_rows_of_weights_sum_to_one():
    # Constant values make each output the sum of its row of weights: the last input column is
    # all ones and only the last row of W_value is non-zero (ones).
    torch.manual_seed(0)
    module = SelfAttentionV1(4, 3)
    x = torch.cat((torch.randn(6, 3), torch.ones(6, 1)), dim=1)  # (6, 4)
    with torch.no_grad():
        module.W_value.zero_()
        module.W_value[-1] = 1.0
    assert torch.allclose(module(x), torch.ones(6, 3), atol=1e-6)


def test_v2_rows_of_weights_sum_to_one():
    torch.manual_seed(0)
    module = SelfAttentionV2(4, 3, qkv_bias=True)
    with torch.no_grad():
        module.W_value.weight.zero_()
        module.W_value.bias.fill_(1.0)  # every value vector is all ones
    assert torch.allclose(module(torch.randn(6, 4)), torch.ones(6, 3), atol=1e-6)


@pytest.mark.parametrize("make", [lambda: SelfAttentionV1(3, 2), lambda: SelfAttentionV2(3, 2, qkv_bias=True)])
def test_gradients_reach_every_parameter(make):
    torch.manual_seed(5)
    module = make()
    out = module(torch.randn(6, 3))
    (out * torch.randn_like(out)).sum().backward()
    names = [name for name, _ in module.named_parameters()]
    assert len(names) == (6 if isinstance(module, SelfAttentionV2) else 3)
    for name, parameter in module.named_parameters():
        assert parameter.grad is not None, name
        assert parameter.grad.abs().sum() > 0, name


def test_permuting_tokens_permutes_the_outputs():
    torch.manual_seed(9)
    module = SelfAttentionV2(3, 4)
    x = torch.randn(6, 3)
    order = torch.tensor([3, 0, 5, 1, 4, 2])
    assert torch.allclose(module(x[order]), module(x)[order], atol=1e-6)


def test_works_in_float64_after_double():
    torch.manual_seed(2)
    module = SelfAttentionV2(3, 2).double()
    out = module(toy_embeddings(torch.float64))
    assert out.dtype == torch.float64 and out.shape == (6, 2)


# -- Exercise 3.1: V2's weights carried into V1 -----------------------------------------------

@pytest.mark.parametrize("d_in, d_out, seed", [(3, 2, 789), (3, 3, 1), (5, 8, 4)])
def test_v1_equals_v2_after_the_weight_transfer(d_in, d_out, seed):
    torch.manual_seed(seed)
    v1, v2 = SelfAttentionV1(d_in, d_out), SelfAttentionV2(d_in, d_out)
    x = torch.randn(7, d_in)
    assert not torch.allclose(v1(x), v2(x))
    with torch.no_grad():
        v1.W_query.copy_(v2.W_query.weight.T)
        v1.W_key.copy_(v2.W_key.weight.T)
        v1.W_value.copy_(v2.W_value.weight.T)
    assert torch.allclose(v1(x), v2(x), atol=1e-6)


def test_square_transfer_without_transpose_is_wrong():
    torch.manual_seed(1)
    v1, v2 = SelfAttentionV1(3, 3), SelfAttentionV2(3, 3)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(v1, name).copy_(getattr(v2, name).weight)
    x = toy_embeddings()
    assert not torch.allclose(v1(x), v2(x))


# -- bad arguments and inputs -----------------------------------------------------------------

@pytest.mark.parametrize("cls", [SelfAttentionV1, SelfAttentionV2])
@pytest.mark.parametrize(
    "d_in, d_out, error, words",
    [
        (0, 2, ValueError, "d_in must be a positive int, got 0"),
        (-3, 2, ValueError, "d_in must be a positive int, got -3"),
        (3, 0, ValueError, "d_out must be a positive int, got 0"),
        (3.0, 2, TypeError, r"d_in must be a positive int, got 3\.0 \(float\)"),
        (3, "2", TypeError, r"d_out must be a positive int, got '2' \(str\)"),
        (True, 2, TypeError, r"d_in must be a positive int, got True \(bool\)"),
        (3, None, TypeError, r"d_out must be a positive int, got None"),
    ],
)
def test_bad_sizes_are_named(cls, d_in, d_out, error, words):
    with pytest.raises(error, match=words):
        cls(d_in, d_out)


@pytest.mark.parametrize("bias", [1, 0, "yes", None])
def test_qkv_bias_must_be_a_bool(bias):
    with pytest.raises(TypeError, match=r"qkv_bias must be a bool, got"):
        SelfAttentionV2(3, 2, qkv_bias=bias)


@pytest.mark.parametrize("cls", [SelfAttentionV1, SelfAttentionV2])
@pytest.mark.parametrize(
    "bad, error, words",
    [
        ([[0.1, 0.2, 0.3]], TypeError, r"x must be a torch\.Tensor of shape \(T, d_in=3\), got list"),
        (torch.ones(6, 3, dtype=torch.int64), TypeError, "floating-point numbers, got dtype torch.int64"),
        (torch.ones(2, 6, 3), ValueError, r"one sequence .* got a batch of shape \(2, 6, 3\)"),
        (torch.ones(3), ValueError, r"one sequence of shape \(T, d_in=3\), got shape \(3,\)"),
        (torch.ones(6, 4), ValueError, r"d_in=3 numbers per token, got shape \(6, 4\)"),
        (torch.ones(0, 3), ValueError, r"at least one token, got shape \(0, 3\)"),
        (torch.ones(6, 3, dtype=torch.float64), TypeError, "dtype of the weights, torch.float32, got torch.float64"),
    ],
)
def test_bad_inputs_are_named(cls, bad, error, words):
    module = cls(3, 2)
    with pytest.raises(error, match=words):
        module(bad)
