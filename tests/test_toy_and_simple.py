"""The running example and the attention without trainable weights."""

from __future__ import annotations

import math

import pytest
import torch

from llm_attention.simple import attention_scores, attention_weights, simple_self_attention
from llm_attention.toy import TOKENS, toy_embeddings

ROWS = [
    [0.43, 0.15, 0.89],
    [0.55, 0.87, 0.66],
    [0.57, 0.85, 0.64],
    [0.22, 0.58, 0.33],
    [0.77, 0.25, 0.10],
    [0.05, 0.80, 0.55],
]


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def test_toy_embeddings_are_six_tokens_of_three_numbers():
    x = toy_embeddings()
    assert TOKENS == ("Your", "journey", "starts", "with", "one", "step")
    assert x.shape == (6, 3) and x.dtype == torch.float32
    assert torch.equal(x, torch.tensor(ROWS))


def test_toy_embeddings_are_a_fresh_copy():
    x = toy_embeddings()
    x.zero_()
    assert toy_embeddings().abs().sum() > 0


def test_toy_embeddings_rejects_integer_dtype():
    with pytest.raises(TypeError, match="dtype"):
        toy_embeddings(torch.int64)


def test_scores_match_a_hand_calculation():
    scores = attention_scores(toy_embeddings())
    for i in range(6):
        for j in range(6):
            assert scores[i, j].item() == pytest.approx(dot(ROWS[i], ROWS[j]), abs=1e-6)


def test_weights_are_a_softmax_by_hand_and_rows_sum_to_one():
    weights = attention_weights(toy_embeddings())
    row = [math.exp(dot(ROWS[1], r)) for r in ROWS]
    expected = [v / sum(row) for v in row]
    assert weights[1].tolist() == pytest.approx(expected, abs=1e-6)
    assert torch.allclose(weights.sum(dim=-1), torch.ones(6))


def test_context_vectors_are_weighted_sums():
    x = toy_embeddings()
    context = simple_self_attention(x)
    weights = attention_weights(x)
    by_hand = [sum(weights[1, j].item() * ROWS[j][k] for j in range(6)) for k in range(3)]
    assert context.shape == (6, 3)
    assert context[1].tolist() == pytest.approx(by_hand, abs=1e-6)


@pytest.mark.parametrize(
    "bad, error, words",
    [
        ([[1.0, 2.0]], TypeError, "torch.Tensor"),
        (torch.ones(2, 6, 3), ValueError, "one sequence"),
        (torch.ones(3), ValueError, "shape"),
        (torch.ones(6, 3, dtype=torch.int64), TypeError, "floating"),
        (torch.ones(0, 3), ValueError, "at least one token"),
    ],
)
def test_bad_inputs_are_named(bad, error, words):
    with pytest.raises(error, match=words):
        simple_self_attention(bad)


def test_book_numbers_for_journey():
    x = toy_embeddings()
    assert torch.allclose(attention_scores(x)[1], torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]), atol=1e-4)
    assert torch.allclose(simple_self_attention(x)[1], torch.tensor([0.4419, 0.6515, 0.5683]), atol=1e-4)


def test_matches_scaled_dot_product_attention_without_scaling():
    torch.manual_seed(0)
    x = torch.randn(7, 4)
    expected = torch.nn.functional.scaled_dot_product_attention(x, x, x, scale=1.0)
    assert torch.allclose(simple_self_attention(x), expected, atol=1e-6)


def test_permuting_tokens_permutes_the_outputs():
    x = toy_embeddings()
    order = torch.tensor([5, 2, 0, 4, 1, 3])
    assert torch.allclose(simple_self_attention(x[order]), simple_self_attention(x)[order], atol=1e-6)
    assert torch.allclose(attention_weights(x[order]), attention_weights(x)[order][:, order], atol=1e-6)


def test_large_inputs_give_finite_weights():
    weights = attention_weights(100 * toy_embeddings())  # scores far above exp's float32 range
    assert torch.isfinite(weights).all()
    assert torch.allclose(weights.sum(dim=-1), torch.ones(6))
