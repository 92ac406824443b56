"""One test per pitfall of docs/beyond/pitfalls.md: each fails if our modules made that mistake.

The references are written here from the formulas, head by head, with the causal mask built by
hand (``tril``, True = may attend), or taken from PyTorch (``scaled_dot_product_attention``,
``nn.MultiheadAttention``). Comparisons run in float64, with random, non-symmetric weights, so a
swapped role or a wrong scale cannot hide behind a coincidence.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from llm_attention.causal import CausalAttention
from llm_attention.multihead import MultiHeadAttention
from llm_attention.multihead_wrapper import MultiHeadAttentionWrapper
from llm_attention.self_attention import SelfAttentionV1, SelfAttentionV2
from llm_attention.simple import attention_weights
from llm_attention.toy import toy_embeddings

# (B, T, d_in, d_out, num_heads): T, d_in, d_out and d_out // num_heads all differ,
# so a scale by the wrong one of them shows.
SHAPES = [(2, 5, 3, 8, 2), (3, 7, 6, 12, 4), (1, 9, 4, 10, 5)]


@pytest.fixture(params=[False, True], ids=["explicit", "fast_path"])
def fast_path(request):
    return request.param


def make_mha(d_in, d_out, context_length, num_heads, *, dropout=0.0, qkv_bias=False, fast_path=False, seed=0):
    torch.manual_seed(seed)
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias, fast_path=fast_path).double()


def make_causal(d_in, d_out, context_length, *, dropout=0.0, qkv_bias=False, seed=0):
    torch.manual_seed(seed)
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias).double()


def batch_of(B, T, d_in, seed=1, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return scale * torch.randn(B, T, d_in, generator=generator, dtype=torch.float64)


def projections(module, x):
    """Queries, keys and values, each ``x @ weight.T + bias`` of its own layer."""
    return [F.linear(x, layer.weight, layer.bias) for layer in (module.W_query, module.W_key, module.W_value)]


def reference_attention(queries, keys, values, *, num_heads=1, scale=None, padding_mask=None):
    """softmax(Q_h K_h^T / scale + M) V_h for each head h (columns h*d_h to (h+1)*d_h), concatenated.

    M is -inf where the key is in the future or is padding; a query with no key left gets zeros.
    """
    B, T, width = queries.shape
    d_h = width // num_heads
    allowed = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T), True = may attend
    if padding_mask is not None:
        allowed = allowed & padding_mask[:, None, :]  # (B, T, T)
    heads = []
    for h in range(num_heads):
        cols = slice(h * d_h, (h + 1) * d_h)
        scores = queries[..., cols] @ keys[..., cols].transpose(-2, -1) / (scale or d_h**0.5)  # (B, T, T)
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
        heads.append(weights @ values[..., cols])  # (B, T, d_h)
    return torch.cat(heads, dim=-1)  # (B, T, width)


def reference_mha(module, x, **options):
    queries, keys, values = projections(module, x)
    if options.pop("swap", False):
        queries, keys = keys, queries
    heads = reference_attention(queries, keys, values, num_heads=module.num_heads, **options)
    return module.out_proj(heads)


def reference_causal(module, x, **options):
    queries, keys, values = projections(module, x)
    if options.pop("swap", False):
        queries, keys = keys, queries
    return reference_attention(queries, keys, values, **options)


def far(a, b, gap=1e-3):
    return (a - b).abs().max().item() > gap


# --- #normalise-by-hand ------------------------------------------------------------------------


def test_normalise_by_hand_weights_stay_a_distribution_for_large_scores():
    x = 40.0 * toy_embeddings(torch.float64)  # scores up to about 2400: exp() overflows
    scores = x @ x.T
    shifted = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)  # the stable softmax, by hand
    weights = attention_weights(x)
    assert torch.isfinite(weights).all() and (weights >= 0).all()
    assert torch.allclose(weights, shifted / shifted.sum(dim=-1, keepdim=True))


def test_normalise_by_hand_modules_stay_finite_for_large_inputs(fast_path):
    mha = make_mha(4, 8, 6, 2, fast_path=fast_path)
    ca = make_causal(4, 8, 6)
    x = batch_of(2, 6, 4, scale=200.0)
    with torch.no_grad():
        for got, want in ((mha(x), reference_mha(mha, x)), (ca(x), reference_causal(ca, x))):
            assert torch.isfinite(got).all()
            assert torch.allclose(got, want)


# --- #softmax-dim and #mask-after-softmax: read the weights through one-hot values ---------------


def weights_through_identity(T, scale):
    """A CausalAttention whose output IS its attention weights: one-hot inputs, identity values."""
    ca = make_causal(T, T, T)
    with torch.no_grad():
        ca.W_value.weight.copy_(torch.eye(T, dtype=torch.float64))
    x = torch.stack([torch.eye(T, dtype=torch.float64), scale * torch.eye(T, dtype=torch.float64)])  # (2, T, T)
    with torch.no_grad():
        out = ca(x)
    return ca, x, out / torch.tensor([1.0, scale], dtype=torch.float64)[:, None, None]


def test_softmax_dim_each_query_row_sums_to_one_and_sequences_stay_apart():
    ca, x, weights = weights_through_identity(T=6, scale=3.0)
    assert torch.allclose(weights.sum(dim=-1), torch.ones(2, 6, dtype=torch.float64))
    with torch.no_grad():
        one_at_a_time = torch.cat([ca(x[i : i + 1]) for i in range(2)])
        assert torch.allclose(ca(x), one_at_a_time)


def test_mask_after_softmax_future_is_zero_and_past_is_renormalised():
    ca, x, weights = weights_through_identity(T=6, scale=3.0)
    assert torch.equal(weights.triu(diagonal=1), torch.zeros_like(weights))
    queries, keys, _ = projections(ca, x)
    full = torch.softmax(queries @ keys.transpose(1, 2) / 6**0.5, dim=-1)  # (2, 6, 6), no mask
    kept = full.tril()
    assert torch.allclose(weights, kept / kept.sum(dim=-1, keepdim=True))  # mask, then renormalise
    assert not torch.allclose(weights, kept)  # the pitfall: zeroed, not renormalised


# --- #weight-transfer -----------------------------------------------------------------------------


def test_weight_transfer_needs_the_transpose_of_nn_linear():
    torch.manual_seed(3)
    v1, v2 = SelfAttentionV1(4, 4).double(), SelfAttentionV2(4, 4).double()
    assert v1.W_query.shape == (4, 4) and v2.W_query.weight.shape == (4, 4)
    assert not torch.allclose(v2.W_query.weight, v2.W_query.weight.T)  # not symmetric
    x = batch_of(1, 6, 4)[0]
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(v1, name).copy_(getattr(v2, name).weight)  # the pitfall: no transpose
        assert far(v1(x), v2(x))
        for name in ("W_query", "W_key", "W_value"):
            getattr(v1, name).copy_(getattr(v2, name).weight.T)
        assert torch.allclose(v1(x), v2(x))


def test_weight_transfer_layouts_are_the_documented_ones():
    v1, v2 = SelfAttentionV1(3, 2), SelfAttentionV2(3, 2)
    for name in ("W_query", "W_key", "W_value"):
        assert getattr(v1, name).shape == (3, 2)  # (d_in, d_out)
        assert getattr(v2, name).weight.shape == (2, 3)  # (d_out, d_in), as nn.Linear stores it


# --- #swapped-projections -------------------------------------------------------------------------


@pytest.mark.parametrize("B, T, d_in, d_out, num_heads", SHAPES)
def test_swapped_projections_multihead(B, T, d_in, d_out, num_heads, fast_path):
    mha = make_mha(d_in, d_out, T, num_heads, fast_path=fast_path)
    x = batch_of(B, T, d_in, scale=2.0)
    with torch.no_grad():
        got, right, swapped = mha(x), reference_mha(mha, x), reference_mha(mha, x, swap=True)
    assert far(right, swapped)  # the weights are not symmetric, so the two differ
    assert torch.allclose(got, right)


def test_swapped_projections_causal_and_self_attention():
    ca = make_causal(3, 4, 6)
    x = batch_of(2, 6, 3, scale=2.0)
    with torch.no_grad():
        assert far(reference_causal(ca, x), reference_causal(ca, x, swap=True))
        assert torch.allclose(ca(x), reference_causal(ca, x))
    torch.manual_seed(5)
    for module in (SelfAttentionV1(3, 4).double(), SelfAttentionV2(3, 4).double()):
        x1 = x[0]
        if isinstance(module, SelfAttentionV1):
            q, k, v = x1 @ module.W_query, x1 @ module.W_key, x1 @ module.W_value
        else:
            q, k, v = projections(module, x1)
        right = torch.softmax(q @ k.T / 2.0, dim=-1) @ v  # d_out = 4, sqrt = 2
        swapped = torch.softmax(k @ q.T / 2.0, dim=-1) @ v
        with torch.no_grad():
            assert far(right, swapped)
            assert torch.allclose(module(x1), right)


# --- #wrong-scale and #batched-transpose ----------------------------------------------------------


@pytest.mark.parametrize("B, T, d_in, d_out, num_heads", SHAPES)
def test_wrong_scale_multihead_divides_by_sqrt_head_dim(B, T, d_in, d_out, num_heads, fast_path):
    mha = make_mha(d_in, d_out, T, num_heads, fast_path=fast_path)
    x = batch_of(B, T, d_in, scale=3.0)
    with torch.no_grad():
        got = mha(x)
        assert torch.allclose(got, reference_mha(mha, x))  # sqrt(d_out // num_heads)
        for wrong in (d_out, d_in, T):
            assert far(got, reference_mha(mha, x, scale=wrong**0.5))


def test_wrong_scale_causal_matches_pytorch_attention():
    ca = make_causal(3, 5, 7)
    x = batch_of(4, 7, 3, scale=3.0)
    queries, keys, values = projections(ca, x)
    with torch.no_grad():
        got = ca(x)
        assert torch.allclose(got, F.scaled_dot_product_attention(queries, keys, values, is_causal=True))
        for wrong in (3, 7):  # d_in, T
            assert far(got, reference_causal(ca, x, scale=wrong**0.5))


@pytest.mark.parametrize("B, T, d_in, d_out, num_heads", SHAPES)
def test_batched_transpose_each_sequence_as_if_alone(B, T, d_in, d_out, num_heads, fast_path):
    mha = make_mha(d_in, d_out, T, num_heads, fast_path=fast_path)
    ca = make_causal(d_in, d_out, T)
    x = batch_of(B, T, d_in)
    with torch.no_grad():
        for module in (mha, ca):
            alone = torch.cat([module(x[i : i + 1]) for i in range(B)])
            assert torch.allclose(module(x), alone)


# --- #mask-slice ---------------------------------------------------------------------------------


def test_mask_slice_short_batches_work_and_long_ones_are_refused(fast_path):
    modules = [
        make_mha(3, 4, 8, 2, fast_path=fast_path),
        make_causal(3, 4, 8),
        MultiHeadAttentionWrapper(3, 2, 8, 0.0, num_heads=2).double(),
    ]
    x = batch_of(2, 8, 3)
    for module in modules:
        with torch.no_grad():
            full = module(x)
            for T in (1, 3, 7):
                assert torch.allclose(module(x[:, :T]), full[:, :T])
        with pytest.raises(ValueError, match="context_length"):
            module(batch_of(2, 9, 3))


# --- #mask-conventions ----------------------------------------------------------------------------


def torch_mha_like(mha):
    """nn.MultiheadAttention holding the same weights as our MultiHeadAttention."""
    d_out = mha.d_out
    ref = nn.MultiheadAttention(d_out, mha.num_heads, batch_first=True, kdim=None, vdim=None).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_query.weight, mha.W_key.weight, mha.W_value.weight]))
        ref.in_proj_bias.zero_()
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        ref.out_proj.bias.copy_(mha.out_proj.bias)
    return ref.eval()


def test_mask_conventions_match_nn_multiheadattention(fast_path):
    """Ours: padding_mask True = real token. nn.MultiheadAttention: True = masked, in both masks."""
    mha = make_mha(6, 6, 7, 3, fast_path=fast_path)  # d_in == d_out, as nn.MultiheadAttention needs
    x = batch_of(3, 7, 6, scale=2.0)
    real = torch.ones(3, 7, dtype=torch.bool)
    real[0, 5:] = False  # right padding: every query keeps at least the first key
    real[2, 3:] = False
    future = torch.ones(7, 7, dtype=torch.bool).triu(diagonal=1)  # built here, True = masked
    ref = torch_mha_like(mha)
    with torch.no_grad():
        want, _ = ref(x, x, x, attn_mask=future, key_padding_mask=~real, need_weights=False)
        assert torch.allclose(mha(x, padding_mask=real), want)
        want_causal, _ = ref(x, x, x, attn_mask=future, need_weights=False)
        assert torch.allclose(mha(x), want_causal)


def test_mask_conventions_no_token_sees_the_future_or_the_padding(fast_path):
    mha = make_mha(3, 4, 6, 2, fast_path=fast_path)
    x = batch_of(2, 6, 3)
    real = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    with torch.no_grad():
        base = mha(x, padding_mask=real)
        for t in range(6):
            changed = x.clone()
            changed[:, t] += 1.0
            out = mha(changed, padding_mask=real)
            assert torch.allclose(out[:, :t], base[:, :t])  # nothing before t moved
        padding_changed = x.clone()
        padding_changed[1, 4:] = 5.0  # change only the padding of sequence 1
        out = mha(padding_changed, padding_mask=real)
        assert torch.allclose(out[1, :4], base[1, :4])


# --- #fully-masked-rows ---------------------------------------------------------------------------


def test_fully_masked_rows_give_zeros_not_nan(fast_path):
    mha = make_mha(3, 4, 6, 2, fast_path=fast_path)
    tokens = batch_of(1, 4, 3)
    padded = torch.cat([torch.zeros(1, 2, 3, dtype=torch.float64), tokens], dim=1)  # left padding
    real = torch.tensor([[False, False, True, True, True, True]])
    out = mha(padded, padding_mask=real)
    assert torch.isfinite(out).all()
    assert torch.allclose(out[0, :2], mha.out_proj.bias.expand(2, -1))  # zero context, then out_proj
    with torch.no_grad():
        assert torch.allclose(out[0, 2:], mha(tokens)[0])  # the real tokens never saw the pads
    out[real].sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())
    assert torch.allclose(out, reference_mha(mha, padded, padding_mask=real))


# --- #mask-buffer ---------------------------------------------------------------------------------


def masked_modules():
    mha = MultiHeadAttention(3, 4, 6, 0.0, 2)
    ca = CausalAttention(3, 2, 6, 0.0)
    wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
    return [mha, ca, *wrapper.heads]


def test_mask_buffer_moves_with_the_module():
    by_hand = torch.ones(6, 6).triu(diagonal=1).bool()
    for module in masked_modules():
        assert "mask" in dict(module.named_buffers())
        assert module.mask.dtype == torch.bool and torch.equal(module.mask, by_hand)
        module.to(torch.float64)
        assert module.W_query.weight.dtype == torch.float64 and module.mask.dtype == torch.bool
        module.to("meta")
        assert module.mask.device.type == "meta" and module.W_query.weight.device.type == "meta"


# --- #mask-in-state-dict --------------------------------------------------------------------------


def test_mask_in_state_dict_is_left_out_and_weights_load_into_a_longer_context():
    x = batch_of(2, 6, 3).float()
    pairs = [
        (MultiHeadAttention(3, 4, 6, 0.0, 2), MultiHeadAttention(3, 4, 10, 0.0, 2)),
        (CausalAttention(3, 2, 6, 0.0), CausalAttention(3, 2, 10, 0.0)),
        (MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2), MultiHeadAttentionWrapper(3, 2, 10, 0.0, 2)),
    ]
    for short, long in pairs:
        assert not any(key.endswith("mask") for key in short.state_dict())
        long.load_state_dict(short.state_dict())  # strict: raises on any missing or unexpected key
        with torch.no_grad():
            assert torch.allclose(long(x), short(x))


# --- #dropout-at-inference and #ignored-arguments -------------------------------------------------


def dropout_pairs():
    """(module with dropout 0.5, the same weights with dropout 0.0), for every module with dropout."""
    pairs = []
    for fast in (False, True):
        pairs.append((make_mha(3, 4, 6, 2, dropout=0.5, fast_path=fast), make_mha(3, 4, 6, 2, fast_path=fast)))
    pairs.append((make_causal(3, 2, 6, dropout=0.5), make_causal(3, 2, 6)))
    torch.manual_seed(0)
    wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.5, 2).double()
    torch.manual_seed(0)
    pairs.append((wrapper, MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2).double()))
    for noisy, plain in pairs:
        plain.load_state_dict(noisy.state_dict())
    return pairs


def test_dropout_at_inference_is_off_in_eval_mode():
    x = batch_of(2, 6, 3)
    for noisy, plain in dropout_pairs():
        noisy.eval()
        with torch.no_grad():
            assert torch.equal(noisy(x), noisy(x))
            assert torch.allclose(noisy(x), plain(x))


def test_ignored_arguments_dropout_runs_in_training_mode():
    x = batch_of(2, 6, 3)
    for noisy, plain in dropout_pairs():
        assert noisy.training
        torch.manual_seed(1)
        with torch.no_grad():
            assert far(noisy(x), plain(x), gap=1e-6)
            assert far(noisy(x), noisy(x), gap=1e-6)


def test_ignored_arguments_qkv_bias_adds_biases_that_count(fast_path):
    modules = [
        make_mha(3, 4, 6, 2, qkv_bias=True, fast_path=fast_path),
        make_causal(3, 2, 6, qkv_bias=True),
        *MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2, qkv_bias=True).double().heads,
    ]
    x = batch_of(2, 6, 3)
    for module in modules:
        layers = (module.W_query, module.W_key, module.W_value)
        assert all(layer.bias is not None for layer in layers)
        with torch.no_grad():
            before = module(x)
            module.W_value.bias.add_(1.0)
            assert far(module(x), before)
    for module in (make_mha(3, 4, 6, 2), make_causal(3, 2, 6)):
        assert all(layer.bias is None for layer in (module.W_query, module.W_key, module.W_value))


# --- #contiguous-view and #head-split -------------------------------------------------------------


@pytest.mark.parametrize("B, T, d_in, d_out, num_heads", SHAPES)
def test_contiguous_view_many_heads_and_non_contiguous_input(B, T, d_in, d_out, num_heads, fast_path):
    mha = make_mha(d_in, d_out, T, num_heads, fast_path=fast_path)
    x = batch_of(B, T, 2 * d_in)[..., ::2]  # (B, T, d_in), every other number: not contiguous
    assert not x.is_contiguous()
    with torch.no_grad():
        assert torch.allclose(mha(x), reference_mha(mha, x.contiguous()))


@pytest.mark.parametrize("B, T, d_in, d_out, num_heads", SHAPES)
def test_head_split_each_head_uses_its_own_columns_and_no_future(B, T, d_in, d_out, num_heads, fast_path):
    mha = make_mha(d_in, d_out, T, num_heads, fast_path=fast_path)
    x = batch_of(B, T, d_in, scale=2.0)
    with torch.no_grad():
        base = mha(x)
        assert torch.allclose(base, reference_mha(mha, x))  # heads = column slices, per token
        changed = x.clone()
        changed[:, -1] += 1.0  # the last token only
        assert torch.allclose(mha(changed)[:, :-1], base[:, :-1])


# --- #is-causal-alignment: a cached step has fewer queries than keys ------------------------------
def test_is_causal_alignment_cached_steps_see_every_earlier_key(fast_path):
    """Decoding with a cache, one token and then two at a time, gives what one uncached pass
    gives: no new token is limited to the first keys, as a top-left causal mask would do."""
    from llm_attention.kv_cache import KVCache

    mha = make_mha(4, 6, 8, 2, fast_path=fast_path).eval()
    x = batch_of(2, 8, 4)
    cache = KVCache(2, mha.num_heads, mha.head_dim, 8, dtype=torch.float64)
    with torch.no_grad():
        whole = mha(x)  # (2, 8, 6)
        parts = [mha(x[:, :5], cache=cache), mha(x[:, 5:6], cache=cache), mha(x[:, 6:], cache=cache)]
    assert torch.allclose(torch.cat(parts, dim=1), whole, atol=1e-12)
    # Top-left alignment would let the sixth token see only key 0, and give it the output of the
    # first token (which sees only itself): it must not.
    assert not torch.allclose(parts[1][:, 0], whole[:, 0])
