"""The window mask against a loop, and the rolling cache against a full cache."""

from __future__ import annotations

import re

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
        (lambda: RollingKVCache(1, 1, 2, None), TypeError, "window must be an int, got NoneType None"),
        (lambda: RollingKVCache(1, 0, 2, 3), ValueError, "num_heads must be at least 1, got 0"),
        (lambda: RollingKVCache(1, 1, 2, 3).append(torch.zeros(1, 2, 1, 2), torch.zeros(1, 2, 1, 2)),
         ValueError, r"keys must have shape \(B, H_kv, T, d_h\) = \(1, 1, T, 2\)"),
        (lambda: RollingKVCache(1, 1, 2, 3).append(torch.zeros(1, 1, 1, 2, dtype=torch.float64),
                                                   torch.zeros(1, 1, 1, 2, dtype=torch.float64)),
         TypeError, "keys must be torch.float32 on cpu like the cache, got torch.float64"),
        (lambda: RollingKVCache(1, 1, 2, 3).append(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 2, 2)),
         ValueError, r"keys and values must have the same shape, got \(1, 1, 1, 2\) and \(1, 1, 2, 2\)"),
        (lambda: RollingKVCache(1, 1, 2, 3).append(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2),
                                                   torch.ones(1, 2)),
         TypeError, r"padding_mask must be a bool torch.Tensor of shape \(B, T\) or None, got torch.float32"),
        (lambda: RollingKVCache(1, 1, 2, 3).append(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2),
                                                   torch.ones(1, 3, dtype=torch.bool)),
         ValueError, r"padding_mask must have shape \(B, T\) = \(1, 2\), got \(1, 3\)"),
    ],
)
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- the same mistakes, made to both caches, raise the same kind of error ----------------------

# Changes to KVCache(1, 1, 2, context_length=4) and RollingKVCache(1, 1, 2, window=4);
# "length" stands for context_length in the one, window in the other.
BAD_ARGUMENTS = [
    {"batch_size": 0}, {"num_heads": 2.0}, {"head_dim": True}, {"length": 0},
    {"length": 2.5}, {"length": None}, {"dtype": torch.int64}, {"dtype": "float32"},
]  # fmt: skip


@pytest.mark.parametrize("changes", BAD_ARGUMENTS, ids=repr)
def test_both_caches_refuse_the_same_arguments_alike(changes):
    arguments = {"batch_size": 1, "num_heads": 1, "head_dim": 2, "length": 4} | changes
    length = arguments.pop("length")
    with pytest.raises((TypeError, ValueError)) as full:
        KVCache(**arguments, context_length=length)
    with pytest.raises((TypeError, ValueError)) as rolling:
        RollingKVCache(**arguments, window=length)
    assert type(rolling.value) is type(full.value), (rolling.value, full.value)
    (name,) = ["window" if name == "length" else name for name in changes]
    assert str(rolling.value).startswith(f"{name} must "), rolling.value


def _z(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


# (keys, values, padding_mask) appended to caches of B=1, H_kv=1, d_h=2 holding one token
BAD_APPENDS = {
    "keys not a tensor": ("no", _z(1, 1, 1, 2), None),
    "values not a tensor": (_z(1, 1, 1, 2), [[0.0, 0.0]], None),
    "1 dimension": (_z(2), _z(2), None),
    "3 dimensions": (_z(1, 1, 2), _z(1, 1, 2), None),
    "5 dimensions": (_z(1, 1, 1, 2, 1), _z(1, 1, 1, 2, 1), None),
    "another batch size": (_z(2, 1, 1, 2), _z(2, 1, 1, 2), None),
    "other heads": (_z(1, 2, 1, 2), _z(1, 2, 1, 2), None),
    "other width": (_z(1, 1, 1, 3), _z(1, 1, 1, 3), None),
    "fewer keys than values": (_z(1, 1, 1, 2), _z(1, 1, 2, 2), None),
    "more keys than values": (_z(1, 1, 2, 2), _z(1, 1, 1, 2), None),
    "keys float64": (_z(1, 1, 1, 2, dtype=torch.float64), _z(1, 1, 1, 2), None),
    "values float64": (_z(1, 1, 1, 2), _z(1, 1, 1, 2, dtype=torch.float64), None),
    "padding float": (_z(1, 1, 1, 2), _z(1, 1, 1, 2), torch.ones(1, 1)),
    "padding a list": (_z(1, 1, 1, 2), _z(1, 1, 1, 2), [[True]]),
    "padding too long": (_z(1, 1, 1, 2), _z(1, 1, 1, 2), torch.ones(1, 2, dtype=torch.bool)),
    "padding 1-d": (_z(1, 1, 1, 2), _z(1, 1, 1, 2), torch.ones(1, dtype=torch.bool)),
}


@pytest.mark.parametrize("keys, values, padding_mask", BAD_APPENDS.values(), ids=BAD_APPENDS)
def test_both_caches_refuse_the_same_inputs_alike_and_unchanged(keys, values, padding_mask):
    full, rolling = KVCache(1, 1, 2, context_length=4), RollingKVCache(1, 1, 2, window=3)
    for cache in (full, rolling):
        cache.append(torch.ones(1, 1, 1, 2), torch.ones(1, 1, 1, 2))
    with pytest.raises((TypeError, ValueError)) as full_error:
        full.append(keys, values, padding_mask)
    with pytest.raises((TypeError, ValueError)) as rolling_error:
        rolling.append(keys, values, padding_mask)
    assert type(rolling_error.value) is type(full_error.value), (rolling_error.value, full_error.value)
    assert re.match(r"(keys|values|padding_mask) ", str(rolling_error.value)), rolling_error.value
    # refused before any tensor work: the one token held is all there is
    assert (rolling.length, rolling.held) == (1, 1)
    assert torch.equal(rolling.keys[:, :, :1], torch.ones(1, 1, 1, 2))
    assert torch.equal(rolling.values[:, :, :1], torch.ones(1, 1, 1, 2))


def test_the_rolling_cache_keeps_at_most_two_windows_of_storage():
    """After a long prompt the cache keeps its window in storage of its own (a view would
    keep the whole prompt's join alive); a decoding step keeps a view of its join of
    window + 1 rows."""
    window = 4
    rolling = RollingKVCache(1, 2, 8, window)
    rolling.append(torch.randn(1, 2, 1000, 8), torch.randn(1, 2, 1000, 8))
    stored = rolling.keys.untyped_storage().nbytes() + rolling.values.untyped_storage().nbytes()
    assert rolling.nbytes == 2 * 2 * window * 8 * 4 and stored == rolling.nbytes
    for _ in range(3):
        rolling.append(torch.randn(1, 2, 1, 8), torch.randn(1, 2, 1, 8))
        assert rolling.keys.untyped_storage().nbytes() <= 2 * rolling.keys.nbytes
