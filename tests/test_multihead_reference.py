"""MultiHeadAttention proven against trusted references, on many shapes and seeds.

- torch.nn.MultiheadAttention with the same weights copied in (causal via attn_mask, padding via
  key_padding_mask = ~padding_mask: its booleans mean the opposite of ours);
- a loop over heads and sequences written here in float64, independent of the module's
  view/transpose code (also covers d_in != d_out, which nn.MultiheadAttention cannot take);
- the fast path against the explicit path: outputs and gradients, float32 and bfloat16.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from llm_attention.multihead import MultiHeadAttention

BF16_EPS = 2.0**-8  # bfloat16 keeps 8 significant bits: one rounding moves a value by up to this, relatively

# (B, T, d_in, d_out, num_heads, context_length)
SHAPES = [
    (1, 1, 4, 4, 1, 1),
    (2, 6, 3, 2, 2, 6),
    (2, 5, 8, 8, 2, 9),
    (3, 7, 12, 12, 3, 7),
    (4, 16, 32, 32, 8, 20),
    (2, 33, 24, 48, 6, 40),
    (1, 64, 64, 64, 4, 64),
]
SQUARE = [s for s in SHAPES if s[2] == s[3]]
SEEDS = [0, 1, 2]


def make(shape, seed, *, qkv_bias=True, causal=True, fast_path=False, dtype=torch.float32):
    b, t, d_in, d_out, heads, context_length = shape
    torch.manual_seed(seed)
    module = MultiHeadAttention(d_in, d_out, context_length, 0.0, heads, qkv_bias, causal=causal, fast_path=fast_path)
    with torch.no_grad():  # biases are zero at init in no layer here, but make every parameter count
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x = torch.randn(b, t, d_in)
    return module.to(dtype).eval(), x.to(dtype)


def right_padding(b, t, seed):
    """(B, T) bool, True = real token: each sequence keeps at least its first token."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    return torch.arange(t)[None, :] < lengths[:, None]  # (B, T)


def to_torch_mha(module: MultiHeadAttention) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention holding the same weights (needs d_in == d_out)."""
    d_out = module.d_out
    ref = nn.MultiheadAttention(d_out, module.num_heads, bias=True, batch_first=True)
    ref = ref.to(module.W_query.weight.dtype).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([module.W_query.weight, module.W_key.weight, module.W_value.weight]))
        if module.W_query.bias is None:
            ref.in_proj_bias.zero_()
        else:
            ref.in_proj_bias.copy_(torch.cat([module.W_query.bias, module.W_key.bias, module.W_value.bias]))
        ref.out_proj.weight.copy_(module.out_proj.weight)
        ref.out_proj.bias.copy_(module.out_proj.bias)
    return ref


def loop_reference(module: MultiHeadAttention, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Attention one sequence and one head at a time, in float64. ``allowed``: (B, T, T), True = may attend."""
    w = {name: p.detach().double() for name, p in module.named_parameters()}
    x = x.double()
    b, t, _ = x.shape
    d_h = module.head_dim
    out = torch.zeros(b, t, module.d_out, dtype=torch.float64)
    for i in range(b):
        heads = []
        for h in range(module.num_heads):
            rows = slice(h * d_h, (h + 1) * d_h)
            q, k, v = (
                x[i] @ w[f"W_{n}.weight"][rows].T + (w[f"W_{n}.bias"][rows] if f"W_{n}.bias" in w else 0.0)
                for n in ("query", "key", "value")
            )
            head = torch.zeros(t, d_h, dtype=torch.float64)
            for r in range(t):  # one query at a time: softmax over the keys it may see
                keys = allowed[i, r].nonzero().flatten()
                if len(keys):
                    scores = (k[keys] @ q[r]) / d_h**0.5
                    head[r] = torch.softmax(scores, dim=0) @ v[keys]
            heads.append(head)
        out[i] = torch.cat(heads, dim=1) @ w["out_proj.weight"].T + w["out_proj.bias"]
    return out


def allowed_matrix(b, t, causal, padding_mask=None):
    allowed = torch.ones(b, t, t, dtype=torch.bool)
    if causal:
        allowed &= torch.ones(t, t, dtype=torch.bool).tril()
    if padding_mask is not None:
        allowed &= padding_mask[:, None, :]
    return allowed


# --- against nn.MultiheadAttention -------------------------------------------------------------


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SQUARE, ids=str)
def test_matches_torch_multihead_attention(shape, seed, causal, fast_path):
    module, x = make(shape, seed, causal=causal, fast_path=fast_path, qkv_bias=seed % 2 == 0)
    ref = to_torch_mha(module)
    t = x.shape[1]
    attn_mask = module.mask[:t, :t] if causal else None  # nn.MultiheadAttention: True = masked, as our buffer
    with torch.no_grad():
        expected, _ = ref(x, x, x, attn_mask=attn_mask, need_weights=False)
        got = module(x)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SQUARE, ids=str)
def test_matches_torch_multihead_attention_with_padding(shape, seed, causal, fast_path):
    module, x = make(shape, seed, causal=causal, fast_path=fast_path)
    ref = to_torch_mha(module)
    b, t, _ = x.shape
    padding_mask = right_padding(b, t, seed)
    attn_mask = module.mask[:t, :t] if causal else None
    with torch.no_grad():
        expected, _ = ref(x, x, x, attn_mask=attn_mask, key_padding_mask=~padding_mask, need_weights=False)
        got = module(x, padding_mask=padding_mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_swapping_the_mask_convention_is_caught():
    """Passing our padding_mask as key_padding_mask unchanged (the classic mix-up) gives other outputs."""
    module, x = make((2, 6, 8, 8, 2, 6), 0)
    padding_mask = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])
    ref = to_torch_mha(module)
    with torch.no_grad():
        wrong, _ = ref(x, x, x, attn_mask=module.mask[:6, :6], key_padding_mask=padding_mask, need_weights=False)
        got = module(x, padding_mask=padding_mask)
    assert not torch.allclose(got[0, 1:4], torch.nan_to_num(wrong[0, 1:4]), atol=1e-3)


# --- against a loop written here, in float64 ---------------------------------------------------


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("seed", SEEDS[:2])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_loop_reference(shape, seed, causal, fast_path):
    module, x = make(shape, seed, causal=causal, fast_path=fast_path, qkv_bias=seed == 0)
    b, t, _ = x.shape
    padding_mask = torch.rand(b, t, generator=torch.Generator().manual_seed(seed)) > 0.3  # any pattern, some rows empty
    expected = loop_reference(module, x, allowed_matrix(b, t, causal, padding_mask))
    with torch.no_grad():
        got = module(x, padding_mask=padding_mask)
        got_unpadded = module(x)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_unpadded.double(), loop_reference(module, x, allowed_matrix(b, t, causal)), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
def test_query_with_no_key_gives_zero_context_and_no_nan(fast_path):
    """Left padding: with the causal mask, a padding query at the start sees no real key at all."""
    module, x = make((2, 6, 8, 8, 2, 6), 3, fast_path=fast_path)
    module.train()  # gradients through the masked rows too (dropout is 0.0)
    x.requires_grad_(True)
    padding_mask = torch.tensor([[False, False, True, True, True, True], [False] * 6])
    out = module(x, padding_mask=padding_mask)
    assert not out.isnan().any()
    empty = out[0, :2].tolist() + out[1].tolist()  # every query of these rows has all its keys masked
    for row in empty:
        assert row == module.out_proj.bias.tolist()  # zero context -> out_proj gives its bias exactly
    out.square().sum().backward()
    for name, p in module.named_parameters():
        assert torch.isfinite(p.grad).all(), name
    assert torch.isfinite(x.grad).all()
    assert x.grad[1].abs().max() == 0  # a sequence that is all padding influences nothing
    assert x.grad[0, 2:].abs().max() > 0


# --- fast path against explicit path ----------------------------------------------------------


@pytest.mark.parametrize("padded", [False, True], ids=["no-padding", "padding"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fast_path_equals_explicit_float32_outputs_and_gradients(shape, seed, causal, padded):
    explicit, x = make(shape, seed, causal=causal)
    fast, _ = make(shape, seed, causal=causal, fast_path=True)
    b, t, _ = x.shape
    padding_mask = right_padding(b, t, seed) if padded else None
    outputs, grads = [], []
    for module in (explicit, fast):
        xi = x.clone().requires_grad_(True)
        out = module(xi, padding_mask=padding_mask)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        outputs.append(out.detach())
        grads.append([xi.grad] + [p.grad for p in module.parameters()])
    torch.testing.assert_close(outputs[1], outputs[0], atol=1e-6, rtol=1e-5)
    for g_fast, g_explicit in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(g_fast, g_explicit, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("padded", [False, True], ids=["no-padding", "padding"])
@pytest.mark.parametrize("seed", SEEDS)
def test_fast_path_equals_explicit_bfloat16(seed, padded):
    """bfloat16 keeps 8 significant bits, so each of the ~5 roundings along the way (projections,
    scores, weights, weighted sum, out_proj) may move a value by 2^-8 of its size. We ask that
    both paths stay within 4 such steps of the float64 answer (scaled by the output's size), that
    the fast path be no less accurate than the explicit one (up to one step), and that the two
    agree within 2 steps. float32 is checked to 1e-6 above; this is the bfloat16 budget."""
    shape = (3, 40, 64, 64, 8, 48)
    module, x = make(shape, seed)
    padding_mask = right_padding(3, 40, seed) if padded else None
    expected = loop_reference(module, x, allowed_matrix(3, 40, True, padding_mask))
    scale = expected.abs().max().item()
    module = module.to(torch.bfloat16)
    errors, outs = [], []
    with torch.no_grad():
        for fast_path in (False, True):
            module.fast_path = fast_path
            out = module(x.bfloat16(), padding_mask=padding_mask)
            assert out.dtype == torch.bfloat16
            outs.append(out.double())
            errors.append((out.double() - expected).abs().max().item())
    assert errors[0] <= 4 * BF16_EPS * scale
    assert errors[1] <= 4 * BF16_EPS * scale
    assert errors[1] <= errors[0] + BF16_EPS * scale
    assert (outs[1] - outs[0]).abs().max().item() <= 2 * BF16_EPS * scale


def test_fast_path_uses_scaled_dot_product_attention(monkeypatch):
    """The fast path really goes through F.scaled_dot_product_attention; the explicit one does not."""
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    module, x = make((2, 5, 8, 8, 2, 5), 0)
    module(x)
    assert calls == []
    module.fast_path = True
    module(x)
    module(x, padding_mask=right_padding(2, 5, 0))
    assert len(calls) == 2
    assert calls[0]["is_causal"] is True and calls[0]["dropout_p"] == 0.0
    assert calls[1]["attn_mask"].dtype == torch.bool
