"""GatedDeltaNet and KimiDeltaAttention on their own (transformers is compared in
tests/test_linear_reference.py): both forms give the same layer output, in float64 to 1e-10,
with equal gradients; a left-padded row computes what its prompt alone computes (outputs, final
state and convolution window); a prompt read whole equals a part of it then tokens one at a time
or in chunks, padded and unpadded; the cache keeps the same bytes whatever it has read and moves
rows for beam search; bad arguments, padding after a real token and foreign caches are refused
by name."""

from __future__ import annotations

import pytest
import torch

from llm_attention.delta_cache import DeltaStateCache
from llm_attention.linear_attention import GatedDeltaNet, KimiDeltaAttention
from tests.decode_checks import step_after_prompt

D_IN, B, T = 24, 3, 11
PADDING = {1: 3, 2: 8}  # row -> left-padded positions


def gated_delta_net(**kw):
    return GatedDeltaNet(D_IN, D_IN, 4, num_key_heads=2, key_head_dim=6, value_head_dim=5,
                         chunk_size=4, **kw)


def kimi_delta(**kw):
    return KimiDeltaAttention(D_IN, D_IN, 3, head_dim=6, chunk_size=4, **kw)


LAYERS = {"gated-delta-net": gated_delta_net, "kimi-delta": kimi_delta}


@pytest.fixture(params=list(LAYERS), ids=list(LAYERS))
def layer(request):
    torch.manual_seed(0)
    module = LAYERS[request.param]().eval()
    with torch.no_grad():  # decays of every speed, so that forgetting shows
        module.A_log.uniform_(-2.0, 1.0)
        module.dt_bias.normal_(0.0, 1.0)
    return module


def inputs(dtype=torch.float32, seed=1):
    x = torch.randn(B, T, D_IN, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    padding = torch.ones(B, T, dtype=torch.bool)
    for row, count in PADDING.items():
        padding[row, :count] = False
    return x, padding


def test_both_forms_agree_in_float64_with_equal_gradients(layer):
    layer = layer.double()
    x, padding = inputs(torch.float64)
    results = []
    for form in ("recurrent", "chunked"):
        layer.form = form
        layer.zero_grad()
        xs = x.clone().requires_grad_(True)
        out = layer(xs, padding)
        out.square().sum().backward()
        grads = {n: p.grad.clone() for n, p in layer.named_parameters()}
        results.append((out.detach(), xs.grad, grads))
    (out_r, gx_r, gp_r), (out_c, gx_c, gp_c) = results
    assert (out_c - out_r).abs().max() <= 1e-10
    assert (gx_c - gx_r).abs().max() <= 1e-10
    for name in gp_r:
        assert gp_r[name].abs().max() > 0, name  # every weight takes part
        assert (gp_c[name] - gp_r[name]).abs().max() <= 1e-10, name


def test_a_left_padded_row_computes_what_its_prompt_alone_computes(layer):
    x, padding = inputs()
    cache = layer.make_cache(B)
    with torch.no_grad():
        out = layer(x, padding, cache=cache)
        for row, count in PADDING.items():
            alone_cache = layer.make_cache(1)
            alone = layer(x[row : row + 1, count:], cache=alone_cache)
            assert (out[row, count:] - alone[0]).abs().max() <= 1e-5
            assert (cache.state[row] - alone_cache.state[0]).abs().max() <= 1e-5
            assert (cache.conv_window[row] - alone_cache.conv_window[0]).abs().max() <= 1e-6
            assert torch.equal(out[row, :count], torch.zeros_like(out[row, :count]))


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
@pytest.mark.parametrize("sizes", [[5, 1, 1, 1, 1, 1, 1], [2, 4, 3, 2], [1] * T],
                         ids=["prompt-then-tokens", "chunks", "token-by-token"])
def test_cached_decoding_equals_one_pass(layer, padded, sizes):
    x, padding = inputs()
    mask = padding if padded else None
    with torch.no_grad():
        whole = layer(x, mask)
        cache = layer.make_cache(B)
        parts, start = [], 0
        for size in sizes:
            new = None if mask is None else mask[:, start : start + size]
            parts.append(layer(x[:, start : start + size], new, cache=cache))
            start += size
    assert cache.length == T
    assert (torch.cat(parts, dim=1) - whole)[padding].abs().max() <= 1e-5


@pytest.mark.parametrize("make", [
    lambda: GatedDeltaNet(D_IN, D_IN, 2, key_head_dim=16, value_head_dim=16),
    lambda: KimiDeltaAttention(D_IN, D_IN, 2, head_dim=16)], ids=list(LAYERS))
def test_a_decoding_step_writes_the_state_where_it_lies(make):
    """One new token after a prompt of 10, without gradients: the cache's state is updated
    in place (no call allocates or writes a state's worth but that update), nothing is
    read back to Python, and the output is the one pass's last. (Heads wide enough that
    the state outweighs the convolution's window, as in the published models.)"""
    torch.manual_seed(0)
    module = make().eval()
    cache = module.make_cache(B)
    state_bytes = cache.state.numel() * cache.state.element_size()
    x = inputs()[0]
    log, out = step_after_prompt(module, cache, x)
    assert log.allocations_of_at_least(state_bytes) == [] and log.read_backs == 0
    assert log.writes_of_at_least(state_bytes) == ["mul_", "baddbmm_"]  # decay, write
    with torch.no_grad():
        torch.testing.assert_close(out, module(x)[:, -1:], atol=1e-5, rtol=1e-4)


def test_the_cache_keeps_the_same_bytes_whatever_it_has_read(layer):
    cache = layer.make_cache(2)
    empty = cache.nbytes
    heads, d_k, d_v = layer.num_heads, layer.key_head_dim, layer.value_head_dim
    channels = layer.conv.in_channels
    assert empty == 4 * (2 * heads * d_k * d_v + 2 * channels * 3)  # float32, K - 1 = 3
    with torch.no_grad():
        for length in (1, 7, 40):
            layer(torch.randn(2, length, D_IN), cache=cache)
            assert cache.nbytes == empty
    assert cache.length == 48 and bool(cache.started.all())
    cache.reset()
    assert cache.length == 0 and not cache.state.any() and not cache.started.any()


def test_reorder_moves_whole_rows_for_beam_search(layer):
    x, _ = inputs()
    with torch.no_grad():
        cache = layer.make_cache(B)
        layer(x[:, :6], cache=cache)
        flipped = layer.make_cache(B)
        layer(x.flip(0)[:, :6], cache=flipped)
        flipped.reorder(torch.tensor([2, 1, 0]))
        assert torch.allclose(flipped.state, cache.state, atol=1e-6)
        assert torch.allclose(layer(x[:, 6:7], cache=cache), layer(x[:, 6:7], cache=flipped),
                              atol=1e-6)
    with pytest.raises(ValueError, match=r"rows must be an int tensor of shape \(B,\) = \(3,\)"):
        cache.reorder(torch.tensor([0.0, 1.0, 2.0]))


def test_reorder_moves_the_started_flags_of_padded_rows(layer):
    """Rows 1 and 2 left-padded: after four tokens row 0 and row 1 have started and row 2
    has not. Reordered, each row's flag, state and next output are those of a cache that read
    the same rows in that order."""
    x, padding = inputs()
    order = torch.tensor([2, 0, 1])
    with torch.no_grad():
        cache = layer.make_cache(B)
        layer(x[:, :4], padding[:, :4], cache=cache)
        assert cache.started.tolist() == [True, True, False]
        cache.reorder(order)
        assert cache.started.tolist() == [False, True, True]
        direct = layer.make_cache(B)
        layer(x[order, :4], padding[order, :4], cache=direct)
        assert torch.equal(cache.started, direct.started)
        assert torch.allclose(cache.state, direct.state, atol=1e-6)
        step = padding[order, 4:6]  # the unstarted row, now row 0, still padding
        assert torch.allclose(layer(x[order, 4:6], step, cache=cache),
                              layer(x[order, 4:6], step, cache=direct), atol=1e-6)
        late = torch.ones(B, 1, dtype=torch.bool)
        late[2] = False  # row 2, the one that read padding then a token: refused
        with pytest.raises(ValueError, match=r"pads row 2 at position 0"):
            layer(x[:, 6:7], late, cache=cache)


def test_float32_state_under_a_bfloat16_layer(layer):
    cache = layer.to(torch.bfloat16).make_cache(1)
    assert cache.conv_window.dtype == torch.bfloat16 and cache.state.dtype == torch.float32
    with torch.no_grad():
        out = layer(torch.randn(1, 5, D_IN, dtype=torch.bfloat16), cache=cache)
    assert out.dtype == torch.bfloat16 and cache.state.dtype == torch.float32


def test_padding_after_a_real_token_is_refused(layer):
    x, padding = inputs()
    late = padding.clone()
    late[0, 5] = False
    with pytest.raises(ValueError, match=r"pads row 0 at position 5, after a real token"):
        layer(x, late)
    cache = layer.make_cache(B)
    with torch.no_grad():
        layer(x[:, :4], padding[:, :4], cache=cache)  # row 1 has started, row 2 not yet
    assert cache.started.tolist() == [True, True, False]  # row 1: padding, then one token
    right_after = torch.ones(B, 1, dtype=torch.bool)
    right_after[1] = False
    with pytest.raises(ValueError, match=r"pads row 1 at position 0"):
        layer(x[:, 4:5], right_after, cache=cache)
    assert cache.length == 4  # the refused call changed nothing
    again = torch.ones(B, 2, dtype=torch.bool)
    again[2] = False  # row 2 still padding: allowed
    with torch.no_grad():
        layer(x[:, 4:6], again, cache=cache)
    again[1, 0] = False  # row 1 read a real token before: refused
    with pytest.raises(ValueError, match=r"pads row 1 at position 0"):
        layer(x[:, 6:8], again, cache=cache)


def test_bad_arguments_and_caches_are_refused_by_name(layer):
    with pytest.raises(ValueError, match=r"num_key_heads must divide num_heads"):
        GatedDeltaNet(8, 8, 4, num_key_heads=3, key_head_dim=2, value_head_dim=2)
    with pytest.raises(TypeError, match=r"key_head_dim must be a positive int"):
        GatedDeltaNet(8, 8, 4, key_head_dim=2.0, value_head_dim=2)
    with pytest.raises(ValueError, match=r"form must be one of chunked, recurrent, got 'fast'"):
        KimiDeltaAttention(8, 8, 2, head_dim=4, form="fast")
    with pytest.raises(ValueError, match=r"norm_eps must be a positive float"):
        KimiDeltaAttention(8, 8, 2, head_dim=4, norm_eps=0)
    x, _ = inputs()
    with pytest.raises(ValueError, match=r"x must have last dimension d_in=24"):
        layer(x[..., :8])
    with pytest.raises(TypeError, match=r"cache must be a DeltaStateCache or None"):
        layer(x, cache={})
    with pytest.raises(ValueError, match=r"use layer.make_cache\(B\)"):
        layer(x, cache=layer.make_cache(B + 1))
    with pytest.raises(ValueError, match=r"conv_kernel must be a positive int"):
        DeltaStateCache(1, 2, 3, 4, 5, 0)
