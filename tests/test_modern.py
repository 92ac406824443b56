"""ModernAttention on its own: its two paths, its caches, padding, the future, the window,
dropout, errors.

(Its equality with transformers' layers is in test_modern_reference.py.)
"""

from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F

from llm_attention.kv_cache import KVCache
from llm_attention.modern import ModernAttention
from llm_attention.multihead import MultiHeadAttention
from llm_attention.sliding_window import RollingKVCache
from tests.decode_checks import (
    assert_masks_only_with_padding, one_pass_last, sdpa_masks, step_after_prompt,
)
from tests.dropout_checks import (
    assert_dropout_only_in_training,
    assert_each_weight_dropped_or_rescaled,
    dropout_samples,
)

TOL = dict(atol=1e-5, rtol=1e-5)  # float32 outputs
GTOL = dict(atol=1e-4, rtol=1e-4)  # float32 gradients
VARIANTS = {
    "gqa+rope": dict(),
    "mqa": dict(num_kv_heads=1),
    "window": dict(window=3),
    "qk-norm": dict(qk_norm=True, head_dim=6),
    "all": dict(window=2, qk_norm=True, qkv_bias=True, out_bias=True),
    # MiMo-V2-Flash: values narrower than queries and keys, scaled; a third of a head turns
    "narrow-values": dict(head_dim=12, value_head_dim=4, value_scale=0.7, window=3,
                          partial_rotary_factor=0.34),
    # Laguna: a softplus gate per head, or per element, on a layer with its own head count
    "softplus-gate": dict(head_dim=6, qk_norm=True, softplus_gate="head", window=3),
    "softplus-gate-element": dict(softplus_gate="element", qkv_bias=True, out_bias=True),
}
PATHS = pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])


def make(name, seed=0, *, fast_path=False, dropout=0.0):
    options = dict(num_kv_heads=2)
    options.update(VARIANTS[name])
    torch.manual_seed(seed)
    module = ModernAttention(16, 16, 12, dropout, 4, fast_path=fast_path, **options)
    with torch.no_grad():
        for p_name, p in module.named_parameters():
            p.normal_(1.0 if "norm" in p_name else 0.0, 0.4)
    return module


def padding():
    pad = torch.ones(3, 9, dtype=torch.bool)
    pad[1, :4] = False  # left padding
    pad[2, :] = False  # a row of padding only: no query has a key
    return pad


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("padded", [False, True])
def test_paths_agree_in_values_and_gradients(name, padded):
    explicit, fast = make(name), make(name, fast_path=True)
    x = torch.randn(3, 9, 16)
    pad = padding() if padded else None
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1, out2 = explicit(x1, pad), fast(x2, pad)
    assert not out1.isnan().any() and not out2.isnan().any()
    torch.testing.assert_close(out1, out2, **TOL)
    grad = torch.randn_like(out1)
    out1.backward(grad)
    out2.backward(grad)
    torch.testing.assert_close(x1.grad, x2.grad, **GTOL)
    for (p_name, p1), p2 in zip(explicit.named_parameters(), fast.parameters()):
        assert not p1.grad.isnan().any(), p_name
        torch.testing.assert_close(p1.grad, p2.grad, **GTOL, msg=p_name)


@pytest.mark.parametrize("fast_path", [False, True])
def test_fully_padded_rows_give_the_output_bias(fast_path):
    module = make("all", fast_path=fast_path)
    out = module(torch.randn(3, 9, 16), padding())
    assert not out.isnan().any()
    torch.testing.assert_close(out[2], module.out_proj.bias.expand(9, -1))


# Tokens per call: the prompt, then the new tokens of each decoding step.
DECODE_STEPS = {
    "4+1+1+1+1+1": [4, 1, 1, 1, 1, 1],
    "4+3+2": [4, 3, 2],  # chunks as long as the window ("window") or longer ("all")
    "2+3+4": [2, 3, 4],  # a prompt shorter than the window, then longer chunks
}


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("fast_path", [False, True])
@pytest.mark.parametrize("cache_kind", ["made", "full"])
@pytest.mark.parametrize("steps", DECODE_STEPS.values(), ids=DECODE_STEPS)
def test_cached_decoding_equals_the_whole_sequence(name, fast_path, cache_kind, steps):
    """The prompt at once, then one or several tokens at a time: the outputs of one full
    pass. ``made`` is make_cache (rolling with a window, which must keep the last
    ``window`` keys of a chunk of any length); ``full`` a KVCache in every case."""
    module = make(name, fast_path=fast_path)
    x, pad = torch.randn(3, 9, 16), padding()
    pad[2, 5:] = True  # the third row: padding, then real tokens
    full = module(x, pad)
    if cache_kind == "made":
        cache = module.make_cache(3)
    else:
        cache = KVCache(3, module.num_kv_heads, module.head_dim, 12,
                        value_dim=module.value_head_dim)
    outs, start = [], 0
    for size in steps:
        end = start + size
        outs.append(module(x[:, start:end], pad[:, start:end], cache=cache))
        start = end
    assert [out.shape[1] for out in outs] == steps and cache.length == 9
    torch.testing.assert_close(torch.cat(outs, dim=1), full, **TOL)
    if cache_kind == "made" and module.window is not None:
        assert isinstance(cache, RollingKVCache) and cache.keys.shape[2] == module.window


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("fast_path", [False, True])
def test_the_future_changes_nothing_before_it(name, fast_path):
    module = make(name, fast_path=fast_path)
    x = torch.randn(2, 9, 16)
    changed = x.clone()
    changed[:, 5:] = torch.randn(2, 4, 16)
    torch.testing.assert_close(module(changed)[:, :5], module(x)[:, :5], **TOL)
    assert not torch.allclose(module(changed)[:, 5:], module(x)[:, 5:])


def test_window_hides_keys_too_far_back():
    """With window w, the output at t does not move when a token w or more back
    changes, and does when a token w - 1 back changes."""
    module = make("window")  # window 3
    x = torch.randn(1, 9, 16)
    far, near = x.clone(), x.clone()
    far[0, 5] += 1.0  # 3 back from position 8
    near[0, 6] += 1.0  # 2 back
    torch.testing.assert_close(module(far)[0, 8], module(x)[0, 8])
    assert not torch.allclose(module(near)[0, 8], module(x)[0, 8])


@pytest.mark.parametrize("name", ["window", "all"])
@pytest.mark.parametrize("extra", [-1, 0, 1], ids=["T=w-1", "T=w", "T=w+1"])
def test_fast_path_leaves_the_window_to_the_kernel_while_it_hides_nothing(
    name, extra, monkeypatch
):
    """Without padding or cache, T <= window: no key is window or more back, so the fast
    path passes no mask and lets the kernel mask the future; at T = window + 1 the
    window hides a key, and the fast path needs its mask. Both give the explicit path's
    values and gradients."""
    explicit, fast = make(name), make(name, fast_path=True)
    num_tokens = fast.window + extra
    calls = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, is_causal=False, **kwargs):
        calls.append((attn_mask is None, is_causal))
        return real(q, k, v, attn_mask=attn_mask, is_causal=is_causal, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    x = torch.randn(3, num_tokens, 16)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1, out2 = explicit(x1), fast(x2)
    if extra <= 0:  # no mask; the kernel's causal mask unless one token sees itself
        assert calls == [(True, num_tokens > 1)]
    else:
        assert calls == [(False, False)]
    torch.testing.assert_close(out1, out2, **TOL)
    grad = torch.randn_like(out1)
    out1.backward(grad)
    out2.backward(grad)
    torch.testing.assert_close(x1.grad, x2.grad, **GTOL)
    for (p_name, p1), p2 in zip(explicit.named_parameters(), fast.parameters()):
        torch.testing.assert_close(p1.grad, p2.grad, **GTOL, msg=p_name)


# --- a decoding step: what a GPU needs of it ------------------------------------------------

# a layer of 8 query heads and 2 key/value heads of 16, and what its cache holds after a
# prompt of 40 tokens: KVCache 40, RollingKVCache its window of 16, ChunkedKVCache the 8
# tokens of the chunk of 32 the new token falls in
CACHE_KINDS = {"full": dict(), "window": dict(window=16), "chunks": dict(chunk_size=32)}
HELD = {"full": 40, "window": 16, "chunks": 8}


@PATHS
@pytest.mark.parametrize("kind", CACHE_KINDS)
@pytest.mark.parametrize("padded", [False, True], ids=["no-padding", "left-padded"])
def test_a_decoding_step_copies_no_cache_and_masks_only_padding(fast_path, kind, padded,
                                                                 monkeypatch):
    """One new token after a prompt of 40: no mask is built, nor handed to SDPA, unless
    the prompt had padding (a full window needs none: the keys past it are left out); no
    number is read back to Python; no call allocates as much as the keys held, but for
    the rolling cache's one copy of its window (its keys and its values)."""
    torch.manual_seed(0)
    module = ModernAttention(128, 128, 64, 0.0, 8, 2, fast_path=fast_path,
                             **CACHE_KINDS[kind])
    cache = module.make_cache(2)
    prompt_mask = torch.ones(2, 40, dtype=torch.bool)
    prompt_mask[1, :3] = not padded
    x = torch.randn(2, 41, 128)
    masks = sdpa_masks(monkeypatch)
    log, out = step_after_prompt(module, cache, x, prompt_mask)
    held_keys = 2 * 2 * HELD[kind] * 16 * 4  # bytes, float32
    copies = log.allocations_of_at_least(held_keys)
    assert copies == (["cat", "cat"] if kind == "window" else []), copies
    assert log.writes_of_at_least(held_keys) == []  # only the new token is written
    assert log.read_backs == 0
    assert_masks_only_with_padding(log, masks, fast_path, padded)
    torch.testing.assert_close(out, one_pass_last(module, x, prompt_mask), **TOL)


# --- dropout ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gqa+rope", "all"])
@PATHS
def test_dropout_only_in_training(name, fast_path):
    module = make(name, fast_path=fast_path, dropout=0.5)
    assert_dropout_only_in_training(module, torch.randn(3, 9, 16), padding(), TOL)


@pytest.mark.parametrize("name", ["gqa+rope", "all"])
@PATHS
def test_dropout_is_rescaled_so_its_mean_is_the_eval_output(name, fast_path):
    """On average the output is the eval output, window and padding included. The first
    token is padding: that query has no key, and gets the output bias (or 0) at every
    draw."""
    module = make(name, 1, fast_path=fast_path, dropout=0.5)
    pad = torch.tensor([[False, True, True, True, True]])
    expected, samples = dropout_samples(module, torch.randn(1, 5, 16), pad)
    n = samples.shape[0]
    torch.testing.assert_close(samples[:, 0], expected[0].expand(n, -1), atol=0, rtol=0)


@pytest.mark.parametrize("name", ["gqa+rope", "all"])
@PATHS
def test_dropout_drops_or_rescales_each_attention_weight(name, fast_path):
    """Dropout acts on the weights, rescaled, and training keeps the causal, window and
    padding masks (tests/dropout_checks.py)."""
    module = make(name, 2, fast_path=fast_path, dropout=0.5)
    n, t = 32, 4
    pad = torch.ones(n, t, dtype=torch.bool)
    pad[::2, :2] = False  # every other row starts with two padding tokens
    assert_each_weight_dropped_or_rescaled(module, torch.randn(1, t, 16).expand(n, -1, -1), pad)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(num_kv_heads=3), ValueError, "num_kv_heads must divide num_heads.*num_heads=4, num_kv_heads=3"),
        (dict(num_kv_heads=0), ValueError, "num_kv_heads must be a positive int, got 0"),
        (dict(window=0), ValueError, "window must be at least 1.*got 0"),
        (dict(window=2.0), TypeError, "window must be an int >= 1 or None"),
        (dict(head_dim=5), ValueError, "head_dim must be even.*head_dim=5"),
        (dict(d_out=18), ValueError, "num_heads must divide d_out"),
        (dict(head_dim=0), ValueError, "head_dim must be a positive int, got 0"),
        (dict(rope_base=0.5), ValueError, "base must be a number greater than 1"),
        (dict(qk_norm=1), TypeError, "qk_norm must be True or False"),
        (dict(out_bias=None), TypeError, "out_bias must be True or False"),
        (dict(norm_eps=0.0), ValueError, "norm_eps must be positive"),
        (dict(dropout=1.5), ValueError, r"dropout must be a float in \[0, 1\)"),
        (dict(context_length=0), ValueError, "context_length must be a positive int, got 0"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    args = dict(d_in=16, d_out=16, context_length=8, dropout=0.0, num_heads=4,
                num_kv_heads=2)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        ModernAttention(**args)


def test_bad_inputs_and_caches():
    module = ModernAttention(16, 16, 8, 0.0, 4, 2, window=4)
    with pytest.raises(ValueError, match="9 tokens, more than context_length=8"):
        module(torch.randn(1, 9, 16))
    with pytest.raises(TypeError, match="x must hold floating-point numbers"):
        module(torch.ones(1, 3, 16, dtype=torch.long))
    with pytest.raises(ValueError, match=r"padding_mask must have shape \(B, T\) = \(1, 3\)"):
        module(torch.randn(1, 3, 16), torch.ones(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="cache must hold num_kv_heads=2 heads of width head_dim=4, got 4 heads"):
        module(torch.randn(1, 3, 16), cache=KVCache(1, 4, 4, 8))
    cache = module.make_cache(1)  # rolling: never full, but positions end at 8
    module(torch.randn(1, 6, 16), cache=cache)
    with pytest.raises(ValueError, match=r"positions 6\.\.8 go beyond context_length=8"):
        module(torch.randn(1, 3, 16), cache=cache)
    assert cache.length == 6  # a refused call changes nothing


def test_equals_multihead_attention_when_the_rotation_is_off():
    """num_kv_heads == num_heads and every position at 0 (cos 1, sin 0): the layer is
    MultiHeadAttention, so the projections and the heads line up."""
    module = ModernAttention(16, 16, 8, 0.0, 4, 4, out_bias=True)
    module.rope.cos.fill_(1.0)
    module.rope.sin.fill_(0.0)
    mha = MultiHeadAttention(16, 16, 8, 0.0, 4)
    mha.load_state_dict(module.state_dict())
    x = torch.randn(2, 7, 16)
    torch.testing.assert_close(module(x), mha(x), **TOL)


def test_paths_agree_in_bfloat16():
    """bfloat16 keeps 8 significant bits; the two paths round at different steps."""
    explicit, fast = make("all").to(torch.bfloat16), make("all", fast_path=True)
    fast = fast.to(torch.bfloat16)
    x = torch.randn(3, 9, 16, dtype=torch.bfloat16)
    out1, out2 = explicit(x, padding()), fast(x, padding())
    assert out1.dtype == out2.dtype == torch.bfloat16 and not out1.isnan().any()
    scale = out1.float().abs().max()
    assert (out1.float() - out2.float()).abs().max() <= 4 * 2.0**-8 * scale


def test_narrow_scaled_values_and_the_softplus_gate_are_what_they_say():
    """MiMo-V2-Flash's values (``d_v`` wide, times ``value_scale``) and Laguna's gate
    (``softplus`` of ``W_gate``), against the same layer written out by hand."""
    module = make("narrow-values")
    assert module.W_value.weight.shape == (2 * 4, 16) and module.out_proj.weight.shape == (16, 4 * 4)
    plain = ModernAttention(16, 16, 12, 0.0, 4, 2, head_dim=12, value_head_dim=4, window=3,
                            partial_rotary_factor=0.34)
    plain.load_state_dict(module.state_dict())
    x = torch.randn(2, 9, 16)
    with torch.no_grad():  # attention is linear in the values: the scale comes out whole
        plain.out_proj.weight.mul_(0.7)
    torch.testing.assert_close(module(x), plain(x), **TOL)
    assert module.rope.cos.shape[-1] == 4  # int(12 * 0.34): a third of each head turns
    gated = make("softplus-gate")
    ungated = ModernAttention(16, 16, 12, 0.0, 4, 2, head_dim=6, qk_norm=True, window=3)
    ungated.load_state_dict({k: v for k, v in gated.state_dict().items() if "W_gate" not in k})
    gates = torch.nn.functional.softplus(gated.W_gate(x))  # (B, T, H)
    heads = {}
    ungated.out_proj.register_forward_hook(lambda m, args, out: heads.update(x=args[0]))
    ungated(x)
    expected = (heads["x"].view(2, 9, 4, 6) * gates[..., None]).view(2, 9, 24)
    torch.testing.assert_close(gated(x), gated.out_proj(expected), **TOL)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(value_head_dim=0), "value_head_dim must be a positive int, got 0"),
        (dict(value_scale=0.0), "value_scale must be None or a positive number, got 0.0"),
        (dict(softplus_gate="row"), "softplus_gate must be None, 'head' or 'element'"),
        (dict(softplus_gate="head", output_gate=True), "softplus_gate and output_gate=True"),
        (dict(value_head_dim=2, output_gate=True), "value_head_dim=2 .* output_gate"),
        (dict(value_head_dim=2, chunk_size=4), "value_head_dim=2 .* chunk_size"),
    ],
)
def test_bad_value_and_gate_options(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        ModernAttention(16, 16, 8, 0.0, 4, 2, **kwargs)


@pytest.mark.parametrize("name", ["narrow-values", "softplus-gate", "softplus-gate-element"])
@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
def test_a_left_padded_row_equals_its_prompt_alone(name, fast_path):
    module = make(name, fast_path=fast_path)
    x = torch.randn(3, 9, 16)
    together = module(x, padding())
    torch.testing.assert_close(together[1, 4:], module(x[1:2, 4:])[0], **TOL)


def test_a_qk_norm_across_heads_normalises_each_projection_whole():
    """OLMo-Hybrid's QK-norm: one mean square over all of ``H d_h`` (and ``H_kv d_h``), one
    weight per channel; the layer equals one whose projections were normed by hand, and
    differs from the per-head norm with the same (unit) weights."""
    torch.manual_seed(0)
    layer = ModernAttention(16, 16, 32, 0.0, 4, 2, qk_norm=True, qk_norm_across_heads=True,
                            nope=True).eval()
    assert layer.q_norm.weight.shape == (16,) and layer.k_norm.weight.shape == (8,)
    x = torch.randn(2, 5, 16)
    unnormed = {k: v for k, v in layer.state_dict().items() if "norm" not in k}
    with torch.no_grad():
        per_head = ModernAttention(16, 16, 32, 0.0, 4, 2, qk_norm=True, nope=True).eval()
        per_head.load_state_dict(unnormed, strict=False)  # unit weights in both
        assert (per_head(x) - layer(x)).abs().max() > 1e-3
        layer.q_norm.weight.uniform_(0.5, 1.5)
        layer.k_norm.weight.uniform_(0.5, 1.5)
        plain = ModernAttention(16, 16, 32, 0.0, 4, 2, nope=True).eval()
        plain.load_state_dict(unnormed)
        for proj, norm in ((plain.W_query, layer.q_norm), (plain.W_key, layer.k_norm)):
            out = proj(x)  # (B, T, H d_h): the whole projection, normed by hand
            normed = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + norm.eps)
            proj.forward = lambda _, normed=normed, w=norm.weight: normed * w
        torch.testing.assert_close(layer(x), plain(x))
    with pytest.raises(ValueError, match=r"qk_norm_across_heads=True needs qk_norm=True"):
        ModernAttention(16, 16, 32, 0.0, 4, 2, qk_norm_across_heads=True)
    with pytest.raises(ValueError, match=r"no output_gate, values_from_keys or kv_shared"):
        ModernAttention(16, 16, 32, 0.0, 4, 2, qk_norm=True, qk_norm_across_heads=True,
                        output_gate=True)
