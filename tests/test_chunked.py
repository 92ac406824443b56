"""``chunked.py``: the chunk mask against its definition, token by token; the cache that keeps
only the current chunk gives the outputs of a full cache while holding at most a chunk; and
ModernAttention with ``chunk_size`` on both paths, with and without left padding."""

from __future__ import annotations

import pytest
import torch

from llm_attention.chunked import ChunkedKVCache, chunk_mask, left_padding
from llm_attention.kv_cache import KVCache
from llm_attention.modern import ModernAttention


def test_left_padding_counts_only_the_leading_padding():
    padding = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1], [0, 1, 0, 1], [0, 0, 0, 0]]).bool()
    assert left_padding(padding).tolist() == [0, 2, 1, 4]


@pytest.mark.parametrize("chunk", [1, 3, 4])
def test_the_mask_is_the_definition(chunk):
    """Query p and key k share a chunk when (p - pad) // C == (k - pad) // C."""
    pad = torch.tensor([0, 2])
    got = chunk_mask(2, 5, 0, 7, chunk, pad)  # queries 2..6, keys 0..6
    assert got.shape == (2, 1, 5, 7)
    for b in range(2):
        for i, p in enumerate(range(2, 7)):
            for k in range(7):
                same = (p - int(pad[b])) // chunk == (k - int(pad[b])) // chunk
                assert bool(got[b, 0, i, k]) == (not same)


def layer(chunk_size=3, fast_path=False):
    torch.manual_seed(0)
    return ModernAttention(16, 16, 32, 0.0, 4, 2, chunk_size=chunk_size,
                           fast_path=fast_path).eval()


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("sizes", [[1] * 11, [4, 1, 5, 1], [7, 4]], ids=str)
def test_the_chunked_cache_gives_the_prefill_and_holds_one_chunk(sizes, padded, fast_path):
    module = layer(fast_path=fast_path)
    x = torch.randn(3, 11, 16, generator=torch.Generator().manual_seed(1))
    padding = torch.ones(3, 11, dtype=torch.bool)
    if padded:
        padding[1, :2] = False
        padding[2, :5] = False
    mask = padding if padded else None
    with torch.no_grad():
        whole = module(x, mask)
        chunked, full = module.make_cache(3), KVCache(3, 2, 4, 32)
        assert isinstance(chunked, ChunkedKVCache)
        start = 0
        for size in sizes:
            end = start + size
            part = None if mask is None else mask[:, start:end]
            got = module(x[:, start:end], part, cache=chunked)
            from_full = module(x[:, start:end], part, cache=full)
            real = padding[:, start:end]
            torch.testing.assert_close(got[real], whole[:, start:end][real])
            torch.testing.assert_close(from_full[real], whole[:, start:end][real])
            assert chunked.held <= module.chunk_size - 1  # at most the current chunk
            start = end
    assert chunked.length == 11 and chunked.left_padding.tolist() == (
        [0, 2, 5] if padded else [0, 0, 0])
    if not padded:  # 11 tokens, chunks of 3: 9 and 10 are held
        assert chunked.held == 11 % 3


def test_a_token_sees_only_its_chunk():
    """The first token of a chunk attends to itself alone: changing every earlier token
    leaves it as it was; the last token of the chunk sees its chunk."""
    module = layer(chunk_size=4)
    x = torch.randn(1, 8, 16)
    changed = x.clone()
    changed[:, :4] = torch.randn(1, 4, 16)
    with torch.no_grad():
        before, after = module(x), module(changed)
    torch.testing.assert_close(before[:, 4:], after[:, 4:])  # chunk 4..7 never looked back
    assert (before[:, :4] - after[:, :4]).abs().max() > 1e-3


def test_errors():
    with pytest.raises(ValueError, match="window=3 and chunk_size=4 cannot both be set"):
        ModernAttention(16, 16, 8, 0.0, 2, 1, window=3, chunk_size=4)
    with pytest.raises(TypeError, match="chunk_size must be an int >= 1 or None, got 2.5"):
        ModernAttention(16, 16, 8, 0.0, 2, 1, chunk_size=2.5)
    with pytest.raises(ValueError, match="chunk_size must be at least 1, got 0"):
        ChunkedKVCache(1, 1, 4, 0)
    cache = ChunkedKVCache(2, 1, 4, 3)
    with pytest.raises(ValueError, match=r"keys must have shape \(B, H_kv, T, d_h\)"):
        cache.append(torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 4))
    with pytest.raises(TypeError, match="padding_mask must be a bool torch.Tensor"):
        cache.append(torch.zeros(2, 1, 1, 4), torch.zeros(2, 1, 1, 4), torch.ones(2, 1))
    module = layer()
    rolling = ModernAttention(16, 16, 32, 0.0, 4, 2, window=2).make_cache(1)
    module(torch.randn(1, 3, 16), cache=rolling)  # keys from 0 still: allowed
    with pytest.raises(ValueError, match="a chunked layer needs the keys from position 0"):
        module(torch.randn(1, 1, 16), cache=rolling)
