"""Rotary embeddings: an independent pairwise rotation, distance-only scores, errors."""

from __future__ import annotations

import math

import pytest
import torch

from llm_attention.rope import RotaryEmbedding, apply_rope, rope_tables


def rotate_by_hand(x, positions, base=10000.0):
    """Each pair (i, i + d/2) turned by position * base**(-2i/d), in float64, by a loop."""
    out = x.clone().double()
    d = x.shape[-1]
    for t, m in enumerate(positions):
        for i in range(d // 2):
            angle = m * base ** (-2 * i / d)
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[..., t, i].double(), x[..., t, i + d // 2].double()
            out[..., t, i] = c * a - s * b
            out[..., t, i + d // 2] = s * a + c * b
    return out


@pytest.mark.parametrize("head_dim, start", [(2, 0), (8, 0), (8, 5), (16, 3)])
def test_matches_a_rotation_written_by_hand(head_dim, start):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, head_dim)
    rope = RotaryEmbedding(head_dim, context_length=16)
    expected = rotate_by_hand(x, range(start, start + 6))
    torch.testing.assert_close(rope(x, start).double(), expected, atol=1e-5, rtol=1e-5)


def test_rotation_keeps_lengths():
    x = torch.randn(1, 2, 10, 8)
    rotated = RotaryEmbedding(8, 10)(x)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))


@pytest.mark.parametrize("shift", [1, 7, 40])
def test_score_depends_only_on_distance(shift):
    torch.manual_seed(1)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)
    rope = RotaryEmbedding(16, 64)
    for m, n in [(3, 1), (5, 5), (9, 2)]:
        score = (rope(q, m) * rope(k, n)).sum()
        shifted = (rope(q, m + shift) * rope(k, n + shift)).sum()
        torch.testing.assert_close(score, shifted, atol=1e-5, rtol=1e-5)
    # ...and does depend on the distance
    assert not torch.allclose((rope(q, 3) * rope(k, 1)).sum(), (rope(q, 4) * rope(k, 1)).sum())


def test_tables_are_float32_and_periodic_in_the_first_pair():
    cos, sin = rope_tables(4, 8)
    assert cos.dtype == sin.dtype == torch.float32 and cos.shape == (8, 4)
    positions = torch.arange(8).float()
    torch.testing.assert_close(cos[:, 0], positions.cos())  # theta_0 = 1
    torch.testing.assert_close(sin[:, 2], positions.sin())  # the pair's second half


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: rope_tables(7, 8), ValueError, "head_dim must be even.*head_dim=7"),
        (lambda: rope_tables(8, 0), ValueError, "context_length must be a positive int, got 0"),
        (lambda: rope_tables(8.0, 4), TypeError, "head_dim must be a positive int"),
        (lambda: rope_tables(8, 4, base=1), ValueError, "base must be a number greater than 1"),
        (lambda: RotaryEmbedding(8, 4)(torch.zeros(1, 1, 3, 8), 2), ValueError,
         r"positions 2\.\.4 go beyond the context.*0\.\.3 \(context_length=4\)"),
        (lambda: RotaryEmbedding(8, 4)(torch.zeros(1, 1, 3, 6)), ValueError,
         "head width 6 but the tables were made for head_dim=8"),
        (lambda: RotaryEmbedding(8, 4)(torch.zeros(3, 8)), ValueError, r"shape \(B, H, T, d_h\)"),
        (lambda: RotaryEmbedding(8, 4)(torch.zeros(1, 1, 1, 8), -1), ValueError, "start must be an int >= 0"),
    ],
)
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()
