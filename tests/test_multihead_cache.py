"""MultiHeadAttention with a KV cache: prefill then decode equals one uncached pass, padding, errors."""

from __future__ import annotations

import re

import pytest
import torch

from llm_attention.kv_cache import KVCache
from llm_attention.multihead import MultiHeadAttention

PATHS = pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
# bound = atol + eps_factor * eps(dtype) * max|expected|. bfloat16 keeps 8 bits (eps = 2**-7),
# and the cached pass multiplies in other shapes than the uncached one, so a rounding may land
# an ulp apart. Measured: 0.0 on both paths (max|expected| = 0.746, bound 0.0117); over seeds
# 0-29 at most 0.56 eps * max, with ATEN_CPU_CAPABILITY=avx2 (0 with AVX512). The old 2e-2 was
# 3.4 eps * max, 9% of the mean |output|.
DTYPES = pytest.mark.parametrize(
    "dtype, atol, eps_factor", [(torch.float32, 1e-5, 0), (torch.bfloat16, 0.0, 2)], ids=["f32", "bf16"]
)


def fresh(fast_path=False, dtype=torch.float32, context_length=12, causal=True, seed=0):
    torch.manual_seed(seed)
    module = MultiHeadAttention(8, 12, context_length, 0.0, 3, fast_path=fast_path, causal=causal)
    return module.to(dtype).eval()


def new_cache(module, batch=2, context_length=12, dtype=torch.float32):
    return KVCache(batch, module.num_heads, module.head_dim, context_length, dtype=dtype)


def left_padded(batch=2, num_tokens=10, prompt=5, dtype=torch.float32, seed=1):
    """Tokens and a padding mask whose first sequence starts with 3 padding positions."""
    torch.manual_seed(seed)
    x = torch.randn(batch, num_tokens, 8).to(dtype)
    padding_mask = torch.ones(batch, num_tokens, dtype=torch.bool)
    padding_mask[0, :3] = False  # the prompt of sequence 0 is 2 real tokens, left-padded
    return x, padding_mask


@PATHS
@DTYPES
def test_prefill_then_decode_equals_one_uncached_pass(fast_path, dtype, atol, eps_factor):
    module = fresh(fast_path, dtype)
    x, padding_mask = left_padded(dtype=dtype)
    cache = new_cache(module, dtype=dtype)
    with torch.no_grad():
        expected = module(x, padding_mask)  # (B, 10, d_out), no cache
        parts = [module(x[:, :5], padding_mask[:, :5], cache=cache)]  # prefill: the prompt
        parts += [module(x[:, t : t + 1], cache=cache) for t in range(5, 8)]  # one at a time
        parts.append(module(x[:, 8:], cache=cache))  # two at once: the mask is offset too
    assert cache.length == 10
    assert [part.shape[1] for part in parts] == [5, 1, 1, 1, 2]
    atol += eps_factor * torch.finfo(dtype).eps * expected.abs().max().item()
    torch.testing.assert_close(torch.cat(parts, dim=1), expected, atol=atol, rtol=0)


@PATHS
def test_explicit_and_fast_paths_agree_with_a_cache(fast_path):
    other = fresh(not fast_path)
    module = fresh(fast_path)
    x, padding_mask = left_padded()
    caches = new_cache(module), new_cache(other)
    with torch.no_grad():
        for mod, cache in zip((module, other), caches, strict=True):
            mod(x[:, :4], padding_mask[:, :4], cache=cache)
        mine, theirs = (mod(x[:, 4:6], cache=c) for mod, c in zip((module, other), caches, strict=True))
    torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)


@PATHS
def test_padding_of_the_prompt_is_honoured_by_later_tokens(fast_path):
    """What sits at a padded position changes no real token's output, during prefill or after."""
    module = fresh(fast_path)
    x, padding_mask = left_padded()
    changed = x.clone()
    changed[0, :3] = 100 * torch.randn(3, 8)  # only the padded positions differ
    outputs = []
    for inputs in (x, changed):
        cache = new_cache(module)
        with torch.no_grad():
            prompt = module(inputs[:, :5], padding_mask[:, :5], cache=cache)
            later = [module(inputs[:, t : t + 1], cache=cache) for t in range(5, 8)]
        outputs.append(torch.cat([prompt, *later], dim=1)[:, 3:])  # the real tokens only
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-5, rtol=0)
    # ...and the check can fail: without the stored mask the padded keys would count
    cache = new_cache(module)
    with torch.no_grad():
        module(changed[:, :5], cache=cache)  # no padding mask given
        assert (module(changed[:, 5:6], cache=cache) - outputs[0][:, 2:3]).abs().max() > 1e-3


@PATHS
def test_padding_query_of_the_prompt_gets_the_bias_not_nan(fast_path):
    module = fresh(fast_path)
    x, padding_mask = left_padded()
    with torch.no_grad():
        out = module(x[:, :5], padding_mask[:, :5], cache=new_cache(module))
    assert not out.isnan().any()
    torch.testing.assert_close(out[0, 0], module.out_proj.bias.detach(), atol=1e-6, rtol=0)


@PATHS
def test_reset_starts_a_new_sequence(fast_path):
    module = fresh(fast_path)
    x, _ = left_padded()
    cache = new_cache(module)
    with torch.no_grad():
        first = module(x[:, :6], cache=cache)
        cache.reset()
        again = module(x[:, :6], cache=cache)
    torch.testing.assert_close(again, first, atol=0, rtol=0)


@PATHS
def test_without_causal_mask_new_tokens_see_every_held_token(fast_path):
    """causal=False: the last token of a cached pass sees the same keys as in one pass."""
    module = fresh(fast_path, causal=False)
    x, _ = left_padded()
    cache = new_cache(module)
    with torch.no_grad():
        expected = module(x[:, :7])[:, -1]
        module(x[:, :6], cache=cache)
        got = module(x[:, 6:7], cache=cache)[:, -1]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


class NotACache:
    keys = torch.zeros(2, 3, 12, 4)


BAD_CACHES = [
    (lambda m: NotACache(), TypeError, "cache must be a KVCache"),
    (lambda m: torch.zeros(2, 3, 12, 4), TypeError, "cache must be a KVCache (llm_attention.kv_cache) or None, got Tensor"),
    (lambda m: KVCache(2, 4, 4, 12), ValueError, "num_heads=3 heads of width head_dim=4, got 4 heads of width 4"),
    (lambda m: KVCache(2, 3, 2, 12), ValueError, "num_heads=3 heads of width head_dim=4, got 3 heads of width 2"),
    (lambda m: KVCache(2, 3, 4, 12, dtype=torch.float64), TypeError, "dtype torch.float32, got dtype torch.float64"),
    (lambda m: KVCache(2, 3, 4, 12, device="meta"), ValueError, "device cpu, got device meta"),
    (lambda m: KVCache(2, 3, 4, 20), ValueError, "cache holds up to 20 tokens, more than the module's context_length=12"),
]  # fmt: skip


@PATHS
@pytest.mark.parametrize("make_cache, error, message", BAD_CACHES)
def test_bad_caches_are_named_before_any_change(fast_path, make_cache, error, message, monkeypatch):
    module = fresh(fast_path)
    cache = make_cache(module)
    projected = []  # both paths start their tensor work by projecting x
    for layer in (module.W_query, module.W_key, module.W_value):
        monkeypatch.setattr(layer, "forward", lambda x: projected.append(x) or torch.zeros(2, 3, 12))
    with pytest.raises(error, match=re.escape(message)):
        module(torch.randn(2, 3, 8), cache=cache)
    assert projected == []  # refused before any tensor work, whatever the object given
    if isinstance(cache, KVCache):
        assert cache.length == 0  # ...and nothing was appended


@PATHS
def test_overflow_comes_from_the_cache_with_its_numbers(fast_path):
    module = fresh(fast_path)
    cache = new_cache(module)
    with torch.no_grad():
        module(torch.randn(2, 10, 8), cache=cache)
        with pytest.raises(ValueError, match=re.escape("holds 10 tokens; adding 3 would make 13, more than context_length=12")):
            module(torch.randn(2, 3, 8), cache=cache)
    assert cache.length == 10


@PATHS
def test_a_changed_batch_size_is_refused(fast_path):
    module = fresh(fast_path)
    cache = new_cache(module)
    with torch.no_grad():
        module(torch.randn(2, 4, 8), cache=cache)
        with pytest.raises(ValueError, match="batch size 3 but the cache holds 2 sequences"):
            module(torch.randn(3, 1, 8), cache=cache)


@PATHS
def test_a_padding_mask_for_the_new_tokens_only(fast_path):
    """With a cache, padding_mask covers the new tokens (B, T), not everything held."""
    module = fresh(fast_path)
    cache = new_cache(module)
    with torch.no_grad():
        module(torch.randn(2, 4, 8), cache=cache)
        with pytest.raises(ValueError, match=re.escape("padding_mask must have shape (B, T) = (2, 1)")):
            module(torch.randn(2, 1, 8), torch.ones(2, 5, dtype=torch.bool), cache=cache)
    assert cache.length == 4
