"""Dropout checks that grouped-query attention and the combined module share (their tests call
them on both paths): eval ignores dropout, training rescales so the mean is the eval output,
and each attention weight is dropped or rescaled, never anything between."""

from __future__ import annotations

import math

import torch


def contexts(module, x, padding_mask=None):
    """The context vectors of one forward pass, split by head: (B, T, H, d_h), what
    out_proj receives."""
    seen = []
    hook = module.out_proj.register_forward_pre_hook(lambda _, args: seen.append(args[0]))
    try:
        module(x, padding_mask)
    finally:
        hook.remove()
    return seen[0].view(*x.shape[:2], module.num_heads, module.head_dim)


def assert_dropout_only_in_training(module, x, pad, tol):
    """Eval ignores dropout (it gives the output of p = 0); training drops weights,
    differently at each call, and the same way again under the same seed."""
    p = module.dropout.p
    with torch.no_grad():
        a, b = module.eval()(x, pad), module(x, pad)
        module.dropout.p = 0.0
        no_dropout = module.train()(x, pad)
        module.dropout.p = p
        torch.manual_seed(1)
        c, d = module(x, pad), module(x, pad)
        torch.manual_seed(1)
        again = module(x, pad)
    torch.testing.assert_close(a, b, atol=0, rtol=0)  # eval: deterministic
    torch.testing.assert_close(a, no_dropout, **tol)  # ... and nothing dropped
    assert not torch.allclose(c, a, atol=1e-4)  # training: weights dropped
    assert not torch.allclose(c, d, atol=1e-4)  # ... differently at each call
    torch.testing.assert_close(again, c, atol=0, rtol=0)  # ... alike under one seed


def dropout_samples(module, x, pad, n=4000):
    """The eval output of one sequence ``(T, d_out)`` and ``n`` training draws of it
    ``(n, T, d_out)``; asserts that the draws average to the eval output on every real
    token (within 5 standard errors). The first token must be padding: the caller checks
    what that query without keys gives."""
    with torch.no_grad():
        expected = module.eval()(x, pad)[0]  # (T, d_out)
        torch.manual_seed(0)
        samples = module.train()(x.expand(n, -1, -1), pad.expand(n, -1))  # (n, T, d_out)
    mean, std = samples[:, 1:].mean(0), samples[:, 1:].std(0)  # (T - 1, d_out)
    assert (std > 1e-3).all()  # dropout really varies every real output
    bound = 5 * std / math.sqrt(n) + 1e-6  # 5 standard errors
    assert ((mean - expected[1:]).abs() <= bound).all()
    return expected, samples


def assert_each_weight_dropped_or_rescaled(module, x, pad):
    """``x`` ``(n, T, d_in)``; ``pad`` starts every other row with two padding tokens. The
    first real token of a row sees only itself: its one weight, 1, becomes 0 or
    1 / (1 - p) = 2, so each head's context vector is 0 or twice its value vector. About
    half are dropped. A query with no key stays 0."""
    n, t = pad.shape
    heads, kv_heads = module.num_heads, module.num_kv_heads
    first = torch.where(pad[:, 0], 0, 2)  # (n,) position of the first real token
    with torch.no_grad():
        context = contexts(module.train(), x, pad)  # (n, T, H, d_h)
        values = module.W_value(x).view(n, t, kv_heads, module.head_dim)  # (n, T, H_kv, d_h)
        values = values.repeat_interleave(heads // kv_heads, dim=2)  # (n, T, H, d_h)
    rows = torch.arange(n)
    own, value = context[rows, first], values[rows, first]  # (n, H, d_h)
    kept = torch.isclose(own, 2 * value).all(-1)  # (n, H)
    dropped = (own == 0).all(-1)  # (n, H)
    assert (kept | dropped).all()
    assert 0.3 < dropped.float().mean() < 0.7  # p = 0.5 of n * H draws
    assert (context[::2, :2] == 0).all()  # padding queries: no key, no weight to drop
