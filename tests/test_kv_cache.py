"""The KV cache stores what it is given, in order, and refuses what would not fit."""

from __future__ import annotations

import pytest
import torch

from llm_attention.chunked import ChunkedKVCache
from llm_attention.kv_cache import KVCache, kv_cache_bytes
from llm_attention.latent import LatentCache
from llm_attention.sliding_window import RollingKVCache


def test_append_returns_everything_held_in_order():
    torch.manual_seed(0)
    cache = KVCache(2, 3, 4, context_length=10)
    chunks = [torch.randn(2, 3, n, 4) for n in (5, 1, 1, 3)]
    for chunk in chunks:
        keys, values, padding = cache.append(chunk, -chunk)
    expected = torch.cat(chunks, dim=2)
    assert cache.length == 10
    assert torch.equal(keys, expected)
    assert torch.equal(values, -expected)
    assert padding.shape == (2, 10) and bool(padding.all())


def test_padding_of_the_prompt_is_kept_for_later_tokens():
    cache = KVCache(2, 1, 2, context_length=6)
    prompt_padding = torch.tensor([[False, True, True], [True, True, True]])
    cache.append(torch.zeros(2, 1, 3, 2), torch.zeros(2, 1, 3, 2), prompt_padding)
    _, _, padding = cache.append(torch.ones(2, 1, 1, 2), torch.ones(2, 1, 1, 2))
    assert padding.tolist() == [[False, True, True, True], [True, True, True, True]]
    cache.reset()
    assert cache.length == 0 and bool(cache.key_padding.all())


def test_storage_matches_the_formula():
    for dtype, size in ((torch.float32, 4), (torch.bfloat16, 2)):
        cache = KVCache(3, 4, 8, context_length=16, dtype=dtype)
        formula = kv_cache_bytes(
            num_layers=1, num_kv_heads=4, head_dim=8, num_tokens=16, batch_size=3,
            bytes_per_value=size,
        )
        assert cache.nbytes == formula == 2 * 3 * 4 * 16 * 8 * size


def test_overflow_names_the_numbers():
    cache = KVCache(1, 1, 2, context_length=4)
    cache.append(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
    with pytest.raises(ValueError, match=r"holds 3 tokens; adding 2 would make 5.*context_length=4"):
        cache.append(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2))
    assert cache.length == 3  # a refused append changes nothing


def test_batch_size_may_not_change():
    cache = KVCache(2, 1, 2, context_length=4)
    with pytest.raises(ValueError, match="batch size 3 but the cache holds 2"):
        cache.append(torch.zeros(3, 1, 1, 2), torch.zeros(3, 1, 1, 2))


@pytest.mark.parametrize(
    "keys, values, padding, error, message",
    [
        ("no", torch.zeros(1, 1, 1, 2), None, TypeError, "keys must be a torch.Tensor"),
        (torch.zeros(1, 1, 2), torch.zeros(1, 1, 2), None, ValueError, r"shape \(B, H_kv"),
        (torch.zeros(1, 2, 1, 2), torch.zeros(1, 2, 1, 2), None, ValueError, "1 heads of width 2"),
        (torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 2, 2), None, ValueError, "same shape"),
        (torch.zeros(1, 1, 1, 2, dtype=torch.float64), torch.zeros(1, 1, 1, 2), None,
         TypeError, "float32"),
        (torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2), torch.ones(1, 1), TypeError, "bool"),
        (torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2), torch.ones(1, 2, dtype=torch.bool),
         ValueError, r"\(B, T_new\) = \(1, 1\)"),
    ],
)
def test_bad_inputs_are_named(keys, values, padding, error, message):
    cache = KVCache(1, 1, 2, context_length=4)
    with pytest.raises(error, match=message):
        cache.append(keys, values, padding)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(batch_size=0), ValueError, "batch_size must be at least 1, got 0"),
        (dict(num_heads=2.0), TypeError, "num_heads must be an int, got float"),
        (dict(context_length=True), TypeError, "context_length must be an int"),
        (dict(dtype=torch.int64), TypeError, "floating torch.dtype"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, message):
    arguments = dict(batch_size=1, num_heads=1, head_dim=2, context_length=4) | kwargs
    with pytest.raises(error, match=message):
        KVCache(**arguments)


def test_formula_checks_its_arguments():
    with pytest.raises(ValueError, match="num_tokens must be at least 1, got 0"):
        kv_cache_bytes(num_layers=1, num_kv_heads=1, head_dim=1, num_tokens=0)


def test_values_may_be_narrower_than_keys():
    """``value_dim``: values of their own width (MiMo-V2-Flash's 128 against 192), held and
    returned beside the keys; a value of another width is refused by name."""
    cache = KVCache(2, 1, 4, 5, value_dim=2)
    keys, values = torch.randn(2, 1, 3, 4), torch.randn(2, 1, 3, 2)
    held_keys, held_values, _ = cache.append(keys, values)
    assert held_values.shape == (2, 1, 3, 2) and cache.nbytes == (2 * 5 * 4 + 2 * 5 * 2) * 4
    torch.testing.assert_close(held_values, values)
    with pytest.raises(ValueError, match="values must have 1 heads of width 2"):
        cache.append(keys, torch.randn(2, 1, 3, 4))
    with pytest.raises(ValueError, match=r"same shape, got \(2, 1, 3, 4\) and \(2, 1, 2, 2\) "
                                         r"\(only their head widths may differ\)"):
        cache.append(keys, torch.randn(2, 1, 2, 2))
    rolling = RollingKVCache(2, 1, 4, 2, value_dim=2)
    held = [rolling.append(keys[:, :, t:t + 1], values[:, :, t:t + 1])[1] for t in range(3)]
    torch.testing.assert_close(held[-1], values)  # the two held and the new one
    torch.testing.assert_close(rolling.values, values[:, :, 1:])  # the last two kept


# caches of B = 2 sequences, and an append of two tokens to each
CACHES = {
    "KVCache": (lambda: KVCache(2, 1, 4, context_length=12),
                lambda cache, mask: cache.append(torch.ones(2, 1, 2, 4), torch.ones(2, 1, 2, 4), mask)),
    "RollingKVCache": (lambda: RollingKVCache(2, 1, 4, window=3),
                       lambda cache, mask: cache.append(torch.ones(2, 1, 2, 4), torch.ones(2, 1, 2, 4), mask)),
    "ChunkedKVCache": (lambda: ChunkedKVCache(2, 1, 4, chunk_size=3),
                       lambda cache, mask: cache.append(torch.ones(2, 1, 2, 4), torch.ones(2, 1, 2, 4), mask)),
    "LatentCache": (lambda: LatentCache(2, 4, 2, context_length=12),
                    lambda cache, mask: cache.append(torch.ones(2, 2, 4), torch.ones(2, 2, 2), mask)),
}


@pytest.mark.parametrize("kind", CACHES)
def test_has_padding_says_whether_a_padding_flag_false_was_ever_appended(kind):
    """No mask, or a mask with no False in it, is no padding; a False is, from then on (even
    once the padded tokens have rolled out of a window: the flag never looks again), until
    a reset."""
    make, append = CACHES[kind]
    cache = make()
    real, padded = torch.ones(2, 2, dtype=torch.bool), torch.tensor([[False, True], [True, True]])
    seen = []
    for mask in (None, real, padded, None, real, None):
        append(cache, mask)
        seen.append(cache.has_padding)
    assert seen == [False, False, True, True, True, True]
    cache.reset()
    assert not cache.has_padding
    append(cache, real)
    assert not cache.has_padding
