"""GroupedQueryAttention against MultiHeadAttention, against SDPA with keys repeated by
hand, its two paths against each other, its KV cache, dropout, and its errors."""

from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F

from llm_attention.grouped_query import GroupedQueryAttention
from llm_attention.kv_cache import KVCache, kv_cache_bytes
from llm_attention.multihead import MultiHeadAttention
from tests.decode_checks import (
    assert_masks_only_with_padding, one_pass_last, sdpa_masks, step_after_prompt,
)
from tests.dropout_checks import (
    assert_dropout_only_in_training,
    assert_each_weight_dropped_or_rescaled,
    dropout_samples,
)

# (B, T, d_in, d_out, num_heads, num_kv_heads, context_length)
SHAPES = [
    (1, 1, 4, 4, 1, 1, 1),
    (2, 6, 8, 8, 4, 2, 8),
    (2, 9, 12, 24, 6, 3, 9),
    (3, 5, 16, 16, 8, 1, 12),
    (2, 17, 32, 32, 8, 8, 20),
]
TOL = dict(atol=1e-5, rtol=1e-5)  # float32 outputs
GTOL = dict(atol=1e-4, rtol=1e-4)  # float32 gradients: longer sums, larger values
PATHS = pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])


def make(shape, seed, *, fast_path=False, causal=True, dropout=0.0):
    b, t, d_in, d_out, heads, kv_heads, context_length = shape
    torch.manual_seed(seed)
    module = GroupedQueryAttention(
        d_in, d_out, context_length, dropout, heads, kv_heads, True,
        causal=causal, fast_path=fast_path,
    )
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.5)
    x = torch.randn(b, t, d_in)
    return module, x


def left_padding(b, t, seed):
    """A (B, T) mask with a few pad tokens at the start of each row; row 0 all padding
    when T > 1, to exercise queries with no key at all."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, t + 1, (b,), generator=gen)
    mask = torch.arange(t)[None, :] >= (t - lengths)[:, None]
    if t > 1:
        mask[0] = False
    return mask


def sdpa_repeated(module, x, padding_mask=None, *, causal=True):
    """Reference: keys and values repeated by hand to H heads, then PyTorch's SDPA."""
    b, t, _ = x.shape
    h, h_kv, d_h = module.num_heads, module.num_kv_heads, module.head_dim
    q = module.W_query(x).view(b, t, h, d_h).transpose(1, 2)
    k = module.W_key(x).view(b, t, h_kv, d_h).transpose(1, 2)
    v = module.W_value(x).view(b, t, h_kv, d_h).transpose(1, 2)
    k = k.repeat_interleave(h // h_kv, dim=1)
    v = v.repeat_interleave(h // h_kv, dim=1)
    allowed = torch.ones(t, t, dtype=torch.bool)
    if causal:
        allowed = allowed.tril()
    if padding_mask is not None:
        allowed = allowed & padding_mask[:, None, None, :]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    out = torch.nan_to_num(out)  # SDPA gives NaN where no key is allowed; we give 0
    return module.out_proj(out.transpose(1, 2).reshape(b, t, -1))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fast_path", [False, True])
def test_equals_multihead_when_every_head_has_its_keys(shape, fast_path):
    b, t, d_in, d_out, heads, _, context_length = shape
    gqa, x = make(shape[:5] + (heads,) + shape[6:], 0, fast_path=fast_path)
    mha = MultiHeadAttention(d_in, d_out, context_length, 0.0, heads, True)
    mha.load_state_dict(gqa.state_dict())  # the same names and shapes
    pad = left_padding(b, t, 1)
    torch.testing.assert_close(gqa(x), mha(x), **TOL)
    torch.testing.assert_close(gqa(x, pad), mha(x, pad), **TOL)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fast_path", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_equals_sdpa_with_keys_repeated_by_hand(shape, fast_path, seed):
    module, x = make(shape, seed, fast_path=fast_path)
    pad = left_padding(x.shape[0], x.shape[1], seed)
    torch.testing.assert_close(module(x), sdpa_repeated(module, x), **TOL)
    torch.testing.assert_close(module(x, pad), sdpa_repeated(module, x, pad), **TOL)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_padding", [False, True])
def test_paths_agree_in_values_and_gradients(shape, with_padding):
    explicit, x = make(shape, 3)
    fast, _ = make(shape, 3, fast_path=True)
    fast.load_state_dict(explicit.state_dict())
    pad = left_padding(x.shape[0], x.shape[1], 3) if with_padding else None
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1, out2 = explicit(x1, pad), fast(x2, pad)
    assert not out1.isnan().any() and not out2.isnan().any()
    torch.testing.assert_close(out1, out2, **TOL)
    grad = torch.randn_like(out1)
    out1.backward(grad)
    out2.backward(grad)
    assert not x1.grad.isnan().any()
    torch.testing.assert_close(x1.grad, x2.grad, **GTOL)
    for (name, p1), p2 in zip(explicit.named_parameters(), fast.parameters()):
        assert not p1.grad.isnan().any(), name
        torch.testing.assert_close(p1.grad, p2.grad, **GTOL, msg=name)


def test_fully_padded_rows_give_the_output_bias():
    module, x = make((2, 5, 8, 8, 4, 2, 8), 0)
    pad = torch.ones(2, 5, dtype=torch.bool)
    pad[0, :3] = False  # left padding: the first three queries of row 0 see no key
    for fast_path in (False, True):
        module.fast_path = fast_path
        out = module(x, pad)
        assert not out.isnan().any()
        expected = module.out_proj.bias.expand(3, -1)
        torch.testing.assert_close(out[0, :3], expected)


@pytest.mark.parametrize("shape", SHAPES[1:])
@pytest.mark.parametrize("fast_path", [False, True])
def test_cached_decoding_equals_the_whole_sequence(shape, fast_path):
    module, x = make(shape, 4, fast_path=fast_path)
    b, t = x.shape[:2]
    pad = left_padding(b, t, 4)
    full = module(x, pad)
    cache = KVCache(b, module.num_kv_heads, module.head_dim, module.context_length)
    prompt = t // 2
    outs = [module(x[:, :prompt], pad[:, :prompt], cache=cache)] if prompt else []
    for i in range(prompt, t):
        outs.append(module(x[:, i : i + 1], pad[:, i : i + 1], cache=cache))
    torch.testing.assert_close(torch.cat(outs, dim=1), full, **TOL)
    assert cache.length == t


DECODE_CHUNKS = {"5+3+2": [5, 3, 2], "2+4+1+3": [2, 4, 1, 3]}  # the prompt, then chunks


@pytest.mark.parametrize(
    "shape", [(2, 10, 8, 8, 4, 2, 12), (3, 10, 16, 16, 8, 1, 12)], ids=["gqa", "mqa"]
)
@pytest.mark.parametrize("chunks", DECODE_CHUNKS.values(), ids=DECODE_CHUNKS)
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@PATHS
def test_decoding_several_tokens_at_a_time_equals_the_whole_sequence(
    shape, chunks, padded, fast_path
):
    """After the prompt, chunks of new tokens: each sees every held key and the tokens
    of its chunk up to its own. (The kernel's own causal mask would line the chunk up
    with the first keys held, not the last.)"""
    module, x = make(shape, 7, fast_path=fast_path)
    b, t = x.shape[:2]
    pad = left_padding(b, t, 7) if padded else None
    full = module(x, pad)
    cache = KVCache(b, module.num_kv_heads, module.head_dim, module.context_length)
    outs, start = [], 0
    for size in chunks:
        new_pad = None if pad is None else pad[:, start : start + size]
        outs.append(module(x[:, start : start + size], new_pad, cache=cache))
        start += size
    assert [out.shape[1] for out in outs] == chunks and cache.length == t
    torch.testing.assert_close(torch.cat(outs, dim=1), full, **TOL)


@pytest.mark.parametrize("num_kv_heads", [8, 4, 2, 1])
def test_cache_shrinks_by_the_group_size(num_kv_heads):
    heads, d_out, tokens = 8, 64, 12
    module = GroupedQueryAttention(d_out, d_out, tokens, 0.0, heads, num_kv_heads)
    mha_cache = KVCache(1, heads, d_out // heads, tokens)
    cache = KVCache(1, num_kv_heads, module.head_dim, tokens)
    module(torch.randn(1, tokens, d_out), cache=cache)  # fills it to the brim
    assert cache.keys.shape[1] == num_kv_heads
    assert mha_cache.nbytes == cache.nbytes * (heads // num_kv_heads)
    assert cache.nbytes == kv_cache_bytes(
        num_layers=1, num_kv_heads=num_kv_heads, head_dim=module.head_dim,
        num_tokens=tokens, bytes_per_value=4,
    )
    held = module.W_key.weight.shape[0] * tokens * 4 * 2  # key and value rows, float32
    assert cache.nbytes == held


def test_fast_path_does_not_copy_the_keys(monkeypatch):
    """The fast path hands H_kv key heads to the kernel, never H."""
    module, x = make((2, 6, 16, 16, 8, 2, 8), 0, fast_path=True)
    seen = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, **kwargs):
        seen.append((q.shape[1], k.shape[1], v.shape[1], kwargs.get("enable_gqa")))
        return real(q, k, v, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    module(x)
    module(x, torch.ones(2, 6, dtype=torch.bool))
    assert seen == [(8, 2, 2, True)] * 2


@PATHS
@pytest.mark.parametrize("padded", [False, True], ids=["no-padding", "left-padded"])
def test_a_decoding_step_copies_no_cache_and_masks_only_padding(fast_path, padded, monkeypatch):
    """One new token over 40 held: no call allocates as much as the held keys once (the
    explicit path used to expand them to the G query heads and copy them, G times that), no
    number is read back to Python, and a mask is built (and handed to SDPA) only when the
    prompt had padding: a prompt mask with no padding in it counts as none."""
    torch.manual_seed(0)
    module = GroupedQueryAttention(128, 128, 64, 0.0, 8, 2, fast_path=fast_path)  # G = 4
    cache = KVCache(2, 2, 16, 64)
    prompt_mask = torch.ones(2, 40, dtype=torch.bool)
    prompt_mask[1, :3] = not padded
    x = torch.randn(2, 41, 128)
    masks = sdpa_masks(monkeypatch)
    log, out = step_after_prompt(module, cache, x, prompt_mask)
    assert cache.has_padding == padded
    held_keys = cache.keys[:, :, :41].numel() * 4  # bytes, float32
    assert log.allocations_of_at_least(held_keys) == [] and log.read_backs == 0
    assert log.writes_of_at_least(held_keys) == []  # only the new token is written
    assert_masks_only_with_padding(log, masks, fast_path, padded)
    torch.testing.assert_close(out, one_pass_last(module, x, prompt_mask), **TOL)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(num_kv_heads=3), ValueError, "num_kv_heads must divide num_heads.*num_heads=4, num_kv_heads=3"),
        (dict(num_kv_heads=0), ValueError, "num_kv_heads must be a positive int, got 0"),
        (dict(num_kv_heads=2.0), TypeError, "num_kv_heads must be a positive int"),
        (dict(num_kv_heads=True), TypeError, "num_kv_heads must be a positive int"),
        (dict(num_heads=3), ValueError, "num_heads must divide d_out"),
        (dict(dropout=1.0), ValueError, "dropout must be a float in"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    args = dict(d_in=8, d_out=8, context_length=4, dropout=0.0, num_heads=4, num_kv_heads=2)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        GroupedQueryAttention(**args)


def test_bad_inputs_and_caches():
    module = GroupedQueryAttention(8, 8, 4, 0.0, 4, 2)
    with pytest.raises(ValueError, match="5 tokens, more than context_length=4"):
        module(torch.randn(1, 5, 8))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        module([[0.0] * 8])
    with pytest.raises(TypeError, match="padding_mask must have dtype torch.bool"):
        module(torch.randn(1, 3, 8), torch.ones(1, 3))
    with pytest.raises(ValueError, match="cache must hold num_kv_heads=2 heads of width head_dim=2, got 4"):
        module(torch.randn(1, 3, 8), cache=KVCache(1, 4, 2, 4))
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        module(torch.randn(1, 3, 8), cache="cache")
    with pytest.raises(TypeError, match="cache must be torch.float32"):
        module(torch.randn(1, 3, 8), cache=KVCache(1, 2, 2, 4, dtype=torch.float64))
    cache = KVCache(1, 2, 2, 4)
    module(torch.randn(1, 3, 8), cache=cache)
    with pytest.raises(ValueError, match="holds 3 tokens; adding 2"):
        module(torch.randn(1, 2, 8), cache=cache)


@pytest.mark.parametrize("fast_path", [False, True])
def test_without_the_causal_mask_it_equals_multihead_too(fast_path):
    gqa, x = make((2, 6, 8, 8, 4, 4, 8), 5, fast_path=fast_path, causal=False)
    mha = MultiHeadAttention(8, 8, 8, 0.0, 4, True, causal=False)
    mha.load_state_dict(gqa.state_dict())
    pad = left_padding(2, 6, 5)
    torch.testing.assert_close(gqa(x), mha(x), **TOL)
    torch.testing.assert_close(gqa(x, pad), mha(x, pad), **TOL)


@pytest.mark.parametrize(
    "shape", SHAPES[1:4], ids=["H=4,H_kv=2", "H=6,H_kv=3", "H=8,H_kv=1"]
)
@PATHS
def test_grouped_heads_without_the_causal_mask_equal_sdpa_with_keys_repeated(
    shape, fast_path
):
    """causal=False with fewer key/value heads than query heads: every query sees every
    real key of its row, the future included, through its group's key/value head."""
    module, x = make(shape, 6, fast_path=fast_path, causal=False)
    pad = left_padding(x.shape[0], x.shape[1], 6)
    expected = sdpa_repeated(module, x, causal=False)
    torch.testing.assert_close(module(x), expected, **TOL)
    expected = sdpa_repeated(module, x, pad, causal=False)
    torch.testing.assert_close(module(x, pad), expected, **TOL)


# --- dropout ----------------------------------------------------------------------------


@PATHS
def test_dropout_only_in_training(fast_path):
    module, x = make((2, 6, 8, 8, 4, 2, 8), 8, fast_path=fast_path, dropout=0.5)
    assert_dropout_only_in_training(module, x, left_padding(2, 6, 8), TOL)


@PATHS
def test_dropout_is_rescaled_so_its_mean_is_the_eval_output(fast_path):
    """On average the output is the eval output. The first token is padding: that query
    has no key, and gets the output bias at every draw."""
    module, x = make((1, 5, 8, 8, 4, 2, 8), 9, fast_path=fast_path, dropout=0.5)
    pad = torch.tensor([[False, True, True, True, True]])
    _, samples = dropout_samples(module, x, pad)  # (n, T, d_out)
    bias = module.out_proj.bias.expand(samples.shape[0], -1)  # (n, d_out)
    torch.testing.assert_close(samples[:, 0], bias, atol=0, rtol=0)


@PATHS
def test_dropout_drops_or_rescales_each_attention_weight(fast_path):
    """Dropout acts on the weights, rescaled, and training keeps the causal and padding
    masks (tests/dropout_checks.py)."""
    module, x = make((1, 4, 8, 8, 4, 2, 8), 10, fast_path=fast_path, dropout=0.5)
    n = 64
    pad = torch.ones(n, 4, dtype=torch.bool)
    pad[::2, :2] = False  # every other row starts with two padding tokens
    assert_each_weight_dropped_or_rescaled(module, x.expand(n, -1, -1), pad)
