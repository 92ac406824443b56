"""The window mask against a loop, and the rolling cache against a full cache."""

from __future__ import annotations

import pytest
import torch

from llm_attention.kv_cache import KVCache
from llm_attention.sliding_window import RollingKVCache, sliding_window_mask


@pytest.mark.parametrize("num_tokens, window", [(1, 1), (6, 1), (6, 3), (5, 9)])
def test_mask_against_a_loop(num_tokens, window):
    mask = sliding_window_mask(num_tokens, window)
    for q in range(num_tokens):
        for k in range(num_tokens):
            assert bool(mask[q, k]) == (not (0 <= q - k < window))
    assert (~mask).sum(dim=1).max() == min(window, num_tokens)


def test_window_as_long_as_the_text_is_plain_causal_attention():
    causal = torch.ones(7, 7, dtype=torch.bool).triu(1)
    assert torch.equal(sliding_window_mask(7, 7), causal)


def test_rolling_cache_keeps_the_last_window_and_its_memory_is_flat():
    torch.manual_seed(0)
    window = 4
    rolling = RollingKVCache(2, 3, 5, window)
    full = KVCache(2, 3, 5, context_length=20)
    sizes = []
    for n in (3, 1, 1, 6, 1, 1):
        k = torch.randn(2, 3, n, 5)
        held_k, held_v, padding = rolling.append(k, -k)
        all_k, _, _ = full.append(k, -k)
        # it returns what the new queries may need: the held window plus the new keys
        expected = all_k[:, :, -held_k.shape[2]:]
        assert torch.equal(held_k, expected) and torch.equal(held_v, -expected)
        assert held_k.shape[2] == min(full.length - n, window) + n
        assert torch.equal(rolling.keys[:, :, : rolling.held], all_k[:, :, -rolling.held:])
        assert rolling.length == full.length and rolling.held == min(full.length, window)
        sizes.append(rolling.nbytes)
    assert len(set(sizes)) == 1 and sizes[0] == 2 * 2 * 3 * window * 5 * 4


def test_rolling_cache_keeps_padding():
    rolling = RollingKVCache(2, 1, 2, 3)
    pad = torch.tensor([[False, False, True, True], [True, True, True, True]])
    _, _, padding = rolling.append(torch.zeros(2, 1, 4, 2), torch.zeros(2, 1, 4, 2), pad)
    assert torch.equal(padding, pad)
    _, _, padding = rolling.append(torch.zeros(2, 1, 1, 2), torch.zeros(2, 1, 1, 2))
    assert padding.tolist() == [[False, True, True, True], [True] * 4]
    rolling.reset()
    assert rolling.length == rolling.held == 0 and bool(rolling.key_padding.all())


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: sliding_window_mask(4, 0), ValueError, "window must be at least 1.*got 0"),
        (lambda: sliding_window_mask(4, 2.5), TypeError, "window must be an int >= 1 or None"),
        (lambda: RollingKVCache(1, 1, 2, None), ValueError, "window must be an int >= 1 for a rolling cache"),
        (lambda: RollingKVCache(1, 0, 2, 3), ValueError, "num_heads must be an int >= 1, got 0"),
        (lambda: RollingKVCache(1, 1, 2, 3).append(torch.zeros(1, 2, 1, 2), torch.zeros(1, 2, 1, 2)),
         ValueError, r"keys must have shape \(B, H_kv, T, d_h\) = \(1, 1, T, 2\)"),
        (lambda: RollingKVCache(1, 1, 2, 3).append(torch.zeros(1, 1, 1, 2, dtype=torch.float64),
                                                   torch.zeros(1, 1, 1, 2, dtype=torch.float64)),
         TypeError, "keys must be torch.float32 on cpu like the cache, got torch.float64"),
        (lambda: RollingKVCache(1, 1, 2, 3).append(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2),
                                                   torch.ones(1, 3, dtype=torch.bool)),
         ValueError, r"padding_mask must be a bool tensor of shape \(B, T\) = \(1, 2\)"),
    ],
)
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()
