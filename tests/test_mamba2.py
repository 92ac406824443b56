"""Mamba-2 (``ssd.py``, ``mamba2.py``) and its state cache, without transformers.

The rule's four forms agree in float64 (outputs, final state and gradients; several chunk
sizes, lengths that are not multiples of them, from zero and from a state); the layer's forms
agree too (chunked at several chunk sizes, token loop, cached decoding), with gradients. The
cache: token by token and uneven calls equal one pass; left padding leaks neither through the
convolution nor into the state, even with a projection bias (padded rows equal their prompts
alone); snapshots resume exactly where they were taken, and a snapshot of another position
does not; ``reorder`` and ``reset`` with padded rows. Bad arguments are refused by name.
"""

from __future__ import annotations

import math

import pytest
import torch

from llm_attention.delta_cache import DeltaStateCache
from llm_attention.linear_attention import GatedDeltaNet
from llm_attention.mamba2 import Mamba2, from_hf_state_dict
from llm_attention.ssd import chunked, masked, recurrent, step, step_in_place
from tests.decode_checks import StepLog, step_after_prompt

B, H, N, P = 2, 4, 6, 5
FLOAT64 = 1e-10


def rule_inputs(num_tokens, dtype=torch.float64, seed=0, requires_grad=False):
    gen = torch.Generator().manual_seed(seed)
    shape = (B, H, num_tokens)
    q = torch.randn(*shape, N, generator=gen, dtype=dtype)
    k = torch.randn(*shape, N, generator=gen, dtype=dtype)
    v = torch.randn(*shape, P, generator=gen, dtype=dtype)
    dt = torch.rand(shape, generator=gen, dtype=dtype) * 0.5 + 0.01
    g = -dt * torch.rand(B, H, 1, generator=gen, dtype=dtype)  # decays from 1 to e^-0.5
    state = torch.randn(B, H, N, P, generator=gen, dtype=dtype)
    tensors = [q, k, v, g, dt, state]
    for t in tensors:
        t.requires_grad_(requires_grad)
    return tensors


FORMS = {
    "masked": masked,
    **{f"chunked-{size}": (lambda size: lambda *a: chunked(*a, chunk_size=size))(size)
       for size in (1, 4, 7, 64)},
}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("num_tokens", [1, 7, 23])
@pytest.mark.parametrize("from_state", [False, True], ids=["from-zero", "from-state"])
def test_every_form_equals_the_recurrence_in_float64(form, num_tokens, from_state):
    q, k, v, g, dt, state = rule_inputs(num_tokens)
    state = state if from_state else None
    want_out, want_state = recurrent(q, k, v, g, dt, state)
    got_out, got_state = FORMS[form](q, k, v, g, dt, state)
    assert got_out.shape == (B, H, num_tokens, P) and got_state.shape == (B, H, N, P)
    assert (got_out - want_out).abs().max() <= FLOAT64
    assert (got_state - want_state).abs().max() <= FLOAT64


@pytest.mark.parametrize("form", FORMS)
def test_gradients_of_every_form_equal_those_of_the_recurrence(form):
    grads = []
    for rule in (recurrent, FORMS[form]):
        inputs = rule_inputs(13, requires_grad=True)
        out, final = rule(*inputs)
        weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(9),
                              dtype=out.dtype)
        ((out * weights).sum() + final.square().sum()).backward()
        grads.append([t.grad for t in inputs])
    for name, want, got in zip("q k v g dt state".split(), *grads):
        assert want is not None and want.abs().max() > 0, name  # every input matters
        assert (got - want).abs().max() <= FLOAT64, name


def test_recurrent_is_step_in_a_loop():
    q, k, v, g, dt, state = rule_inputs(5)
    out, final = recurrent(q, k, v, g, dt, state)
    for t in range(5):
        o, state = step(q[:, :, t], k[:, :, t], v[:, :, t], g[:, :, t], dt[:, :, t], state)
        assert torch.equal(o, out[:, :, t])
    assert torch.equal(state, final)


def test_step_in_place_is_step_writing_into_the_state():
    q, k, v, g, dt, state = rule_inputs(3)
    held = state.clone()
    with torch.no_grad():
        for t in range(3):
            args = (q[:, :, t], k[:, :, t], v[:, :, t], g[:, :, t], dt[:, :, t])
            want, state = step(*args, state)
            assert (step_in_place(*args, held) - want).abs().max() <= 1e-14
    assert (held - state).abs().max() <= 1e-14
    with pytest.raises(ValueError, match=r"no gradients"):
        step_in_place(*(t[:, :, 0].requires_grad_() for t in (q, k, v, g, dt)), held)


def test_the_chunked_loop_only_carries_the_state():
    """4 and 12 chunks of 8: one cumulative sum for all chunks, and at most one more
    operation per chunk (decay and write in one)."""
    logs = {}
    for num_tokens in (32, 96):
        inputs = rule_inputs(num_tokens)
        with StepLog() as logs[num_tokens]:
            chunked(*inputs, chunk_size=8)
        assert logs[num_tokens].count("cumsum") == 1
    assert (len(logs[96].calls) - len(logs[32].calls)) / (12 - 4) <= 1


def test_the_rule_does_what_the_formula_says():
    q, k, v, g, dt, state = rule_inputs(1)
    one = (q[:, :, 0], k[:, :, 0], v[:, :, 0])
    # no decay, no write: the state is read as it is
    out, kept = step(*one, torch.zeros_like(g[:, :, 0]), torch.zeros_like(dt[:, :, 0]), state)
    assert torch.equal(kept, state)
    torch.testing.assert_close(out, (one[0].unsqueeze(-2) @ state).squeeze(-2))
    # from an empty state, one write read back: dt (q . k) v, whatever the decay
    out, _ = step(*one, g[:, :, 0], dt[:, :, 0], torch.zeros_like(state))
    want = dt[:, :, 0, None] * (one[0] * one[1]).sum(-1, keepdim=True) * one[2]
    torch.testing.assert_close(out, want)
    # a decay of exp(g) per token: two tokens later, an old state is exp(g1 + g2) of itself
    q, k, v, g, dt, state = rule_inputs(2)
    _, final = recurrent(q, k, v, g, torch.zeros_like(dt), state)
    torch.testing.assert_close(final, g.sum(-1).exp()[..., None, None] * state)


def test_the_rule_refuses_bad_inputs_by_name():
    q, k, v, g, dt, state = rule_inputs(4)
    with pytest.raises(ValueError, match=r"g must have shape \(2, 4, 4\)"):
        recurrent(q, k, v, g[..., :3], dt)
    with pytest.raises(ValueError, match=r"q and k must have the same shape"):
        chunked(q, k[..., :3], v, g, dt)
    with pytest.raises(ValueError, match=r"state must be None or a tensor of shape"):
        masked(q, k, v, g, dt, state[..., :2])
    with pytest.raises(ValueError, match=r"chunk_size must be a positive int, got 0"):
        chunked(q, k, v, g, dt, chunk_size=0)
    with pytest.raises(TypeError, match=r"dt must be a floating-point torch.Tensor"):
        recurrent(q, k, v, g, dt.long())
    with pytest.raises(ValueError, match=r"state must be a tensor .* got None"):
        step(q[:, :, 0], k[:, :, 0], v[:, :, 0], g[:, :, 0], dt[:, :, 0], None)


# ---- the layer -------------------------------------------------------------------------

D_IN = 24
SIZES = dict(head_dim=4, state_size=6, num_groups=2, conv_kernel=4, chunk_size=5)


def layer(dtype=torch.float64, seed=0, **options):
    """A Mamba2 layer with weights that matter: slow decays (the state carries far),
    norms around 1, biases everywhere they may be."""
    torch.manual_seed(seed)
    options = {**SIZES, **dict(in_bias=True, out_bias=True), **options}
    module = Mamba2(D_IN, D_IN, 4, **options).to(dtype)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if name == "A_log":
                parameter.uniform_(math.log(0.02), math.log(0.2))
            elif name == "dt_bias":
                parameter.uniform_(-3.0, -1.0)
            elif "norm" in name:
                parameter.uniform_(0.5, 1.5)
            else:
                parameter.normal_(0.0, 0.3)
    return module.eval()


def tokens(num_tokens, batch=B, dtype=torch.float64, seed=1):
    return torch.randn(batch, num_tokens, D_IN, dtype=dtype,
                       generator=torch.Generator().manual_seed(seed))


def run(module, x, padding=None, sizes=None):
    """``module`` over ``x`` in calls of ``sizes`` tokens with one cache (one call when
    None): the outputs put together and the cache."""
    cache = module.make_cache(x.shape[0])
    ends = torch.tensor(sizes or [x.shape[1]]).cumsum(0).tolist()
    outs = [module(x[:, a:b], None if padding is None else padding[:, a:b], cache=cache)
            for a, b in zip([0, *ends[:-1]], ends)]
    return torch.cat(outs, dim=1), cache


def test_shapes_and_repr():
    module = layer(torch.float32)
    out = module(tokens(9, dtype=torch.float32))
    assert out.shape == (B, 9, D_IN) and out.dtype == torch.float32
    assert module.W_in.weight.shape == (2 * 16 + 2 * 2 * 6 + 4, D_IN)  # z, x, B, C, dt
    assert module.conv.weight.shape == (16 + 2 * 2 * 6, 1, 4)
    cache = module.make_cache(3)
    assert cache.conv_window.shape == (3, 40, 3) and cache.state.shape == (3, 4, 6, 4)
    assert "num_groups=2" in repr(module) and "groups=2" in repr(module.out_norm)


@pytest.mark.parametrize("norm, before", [(True, False), (True, True), (False, False)],
                         ids=["gate-then-norm", "norm-then-gate", "gate-only"])
def test_the_layer_forms_and_cached_decoding_agree_in_float64_with_gradients(norm, before):
    x = tokens(17).requires_grad_(True)
    results = []
    forms = [("recurrent", 5, None), *[("chunked", size, None) for size in (1, 4, 6, 32)],
             ("chunked", 5, [1] * 17), ("chunked", 5, [4, 6, 2, 5])]
    for form, size, sizes in forms:
        module = layer(norm=norm, norm_before_gate=before, chunk_size=size,
                       projection_multipliers=(0.8, 1.2, 0.9, 1.1, 1.3), in_multiplier=1.1)
        module.form = form
        x.grad = None
        out, cache = run(module, x, sizes=sizes)
        weights = torch.randn(out.shape, dtype=out.dtype,
                              generator=torch.Generator().manual_seed(5))
        ((out * weights).sum() + cache.state.square().sum()).backward()
        results.append((out.detach(), cache.state.detach(), x.grad.clone(),
                        {n: p.grad.clone() for n, p in module.named_parameters()}))
    want_out, want_state, want_dx, want_grads = results[0]
    assert want_out.abs().max() > 0.1 and all(g.abs().max() > 0 for g in want_grads.values())
    for got_out, got_state, got_dx, got_grads in results[1:]:
        assert (got_out - want_out).abs().max() <= FLOAT64
        assert (got_state - want_state).abs().max() <= FLOAT64
        assert (got_dx - want_dx).abs().max() <= FLOAT64
        for name, want in want_grads.items():
            assert (got_grads[name] - want).abs().max() <= FLOAT64, name


def test_a_decoding_step_writes_the_state_where_it_lies():
    """One new token after a prompt of 9, without gradients: the cache's state is updated in
    place (no call allocates a state's worth), nothing is read back to Python, and the
    output is the one pass's last. (Heads wide enough that the state outweighs the
    convolution's window, as in the published models.)"""
    module = layer(head_dim=16, state_size=16, num_groups=1)
    x = tokens(10)
    cache = module.make_cache(B)
    state_bytes = cache.state.numel() * cache.state.element_size()
    log, out = step_after_prompt(module, cache, x)
    assert log.allocations_of_at_least(state_bytes) == [] and log.read_backs == 0
    with torch.no_grad():
        assert (out - module(x)[:, -1:]).abs().max() <= FLOAT64


def test_the_state_carries_past_the_convolution_and_across_chunks():
    """A change to the first token still moves the last output, 16 tokens and three
    chunk boundaries (chunks of 5) later, far past the convolution's 4 taps: through the
    state only."""
    module = layer()
    x = tokens(17)
    nudged = x.clone()
    nudged[:, 0] += 1.0
    with torch.no_grad():
        gap = (module(x)[:, -1] - module(nudged)[:, -1]).abs().max()
        module.A_log.fill_(math.log(1e4))  # a state that forgets every token at once
        gone = (module(x)[:, -1] - module(nudged)[:, -1]).abs().max()
    assert gap > 1e-3 and gone < 1e-12


def left_padded(num_tokens=12, pad=(0, 5)):
    x = tokens(num_tokens, batch=len(pad))
    padding = torch.ones(len(pad), num_tokens, dtype=torch.bool)
    for row, count in enumerate(pad):
        padding[row, :count] = False
        x[row, :count] = torch.randn(count, D_IN, dtype=x.dtype) * 3  # junk, masked
    return x, padding


@pytest.mark.parametrize("sizes", [None, [1] * 12, [4, 6, 2], [7, 5]],
                         ids=["one-call", "token-by-token", "4+6+2", "7+5"])
def test_padded_rows_equal_their_prompts_alone(sizes):
    """Left padding leaks neither through the convolution nor into the state, even with
    a projection bias and a convolution bias (what the pads' projection would carry)."""
    module = layer()  # in_bias=True, conv_bias=True
    x, padding = left_padded()
    with torch.no_grad():
        got, cache = run(module, x, padding, sizes)
        alone, alone_cache = run(module, x[1:, 5:])
        assert got[1, :5].abs().max() == 0  # zeros at padding
        assert (got[1, 5:] - alone[0]).abs().max() <= FLOAT64
        assert (cache.state[1] - alone_cache.state[0]).abs().max() <= FLOAT64
        assert (cache.conv_window[1] - alone_cache.conv_window[0]).abs().max() <= FLOAT64
        more = tokens(3, seed=4)
        cont = module(more, cache=cache)
        cont_alone = module(more[1:], cache=alone_cache)
        assert (cont[1] - cont_alone[0]).abs().max() <= FLOAT64
        # the same pads as zero inputs without a mask: the projection's bias reaches the
        # convolution and the state (what zeroing only the inputs would do)
        leaky = module(x[1:] * padding[1:, :, None])
        assert (leaky[0, 5:] - alone[0]).abs().max() > 1e-3


def test_padding_after_a_real_token_is_refused():
    module = layer()
    x, padding = left_padded()
    padding[0, 7] = False
    with pytest.raises(ValueError, match=r"pads row 0 at position 7, after a real token"):
        module(x, padding)
    cache = module.make_cache(2)
    module(x[:, :6], torch.ones(2, 6, dtype=torch.bool), cache=cache)
    with pytest.raises(ValueError, match=r"after a real token .* held in the cache"):
        module(x[:, 6:7], torch.tensor([[True], [False]]), cache=cache)


# ---- snapshots, reorder, reset ----------------------------------------------------------

@pytest.mark.parametrize("sizes", [None, [3, 9], [1] * 12], ids=["one-call", "3+9", "tokens"])
@pytest.mark.parametrize("build", [layer, lambda: GatedDeltaNet(
    D_IN, D_IN, 4, num_key_heads=2, key_head_dim=6, value_head_dim=4, chunk_size=5,
).double().eval()], ids=["Mamba2", "GatedDeltaNet"])
def test_a_snapshot_resumes_exactly_where_it_was_taken(sizes, build):
    module = build()
    x, padding = left_padded(16, pad=(0, 3))
    prefix = 7  # tokens read, padding included
    with torch.no_grad():
        cache = module.make_cache(2)
        cache.save_at(prefix, 9)
        whole, _ = run(module, x[:, :12], padding[:, :12], sizes)  # warm-up, no snapshot
        ends = torch.tensor(sizes or [12]).cumsum(0).tolist()
        outs = [module(x[:, a:b], padding[:, a:b], cache=cache)
                for a, b in zip([0, *ends[:-1]], ends)]
        assert torch.cat(outs, 1).sub(whole).abs().max() <= FLOAT64  # stops change nothing
        assert sorted(cache.snapshots) == [prefix, 9] and not cache.pending
        resumed = cache.snapshot(prefix)
        assert resumed.length == prefix
        tail = module(x[:, prefix:], padding[:, prefix:], cache=resumed)
        recomputed = module(x, padding)  # the whole sequence from scratch
        assert (tail - recomputed[:, prefix:]).abs().max() <= FLOAT64
        for wrong in (prefix - 1, prefix + 1):  # a state taken one token off
            other = module.make_cache(2)
            other.save_at(wrong)
            module(x[:, :12], padding[:, :12], cache=other)
            off = module(x[:, prefix:], padding[:, prefix:], cache=other.snapshot(wrong))
            assert (off - recomputed[:, prefix:]).abs().max() > 1e-3
        again = module(x[:, prefix:], padding[:, prefix:], cache=cache.snapshot(prefix))
        assert torch.equal(again, tail)  # a snapshot can be resumed more than once


def test_snapshot_requests_are_checked():
    module = layer()
    cache = module.make_cache(2)
    module(tokens(4), cache=cache)
    with pytest.raises(ValueError, match=r"positions must be ints beyond the 4 tokens read"):
        cache.save_at(4)
    with pytest.raises(ValueError, match=r"no snapshot at position 6; kept: \[\]"):
        cache.snapshot(6)
    cache.save_at(6)
    with pytest.raises(ValueError, match=r"read past position 6 without stopping"):
        cache.update(cache.conv_window, cache.state, 3)  # a layer that would not stop


def test_reorder_moves_each_sequence_with_its_padding_and_snapshots():
    module = layer()
    x, padding = left_padded(12, pad=(0, 5, 2))
    rows = torch.tensor([2, 0, 0])  # beam search: row 2 first, row 0 twice
    with torch.no_grad():
        cache = module.make_cache(3)
        cache.save_at(8)
        module(x[:, :10], padding[:, :10], cache=cache)
        cache.reorder(rows)
        got = module(x[rows, 10:], cache=cache)
        want = module(x[rows], padding[rows])[:, 10:]
        assert (got - want).abs().max() <= FLOAT64
        assert cache.started.tolist() == [True, True, True]
        snap = cache.snapshot(8)
        from_snap = module(x[rows, 8:], padding[rows, 8:], cache=snap)
        assert (from_snap - module(x[rows], padding[rows])[:, 8:]).abs().max() <= FLOAT64
        with pytest.raises(ValueError, match=r"rows must be an int tensor of shape \(B,\)"):
            cache.reorder(torch.tensor([0, 1]))


def test_reset_forgets_every_token_padding_and_snapshot():
    module = layer()
    x, padding = left_padded()
    with torch.no_grad():
        cache = module.make_cache(2)
        cache.save_at(3, 20)
        module(x, padding, cache=cache)
        cache.reset()
        assert cache.length == 0 and not cache.snapshots and not cache.pending
        assert not cache.started.any() and cache.state.abs().max() == 0
        assert torch.equal(module(x, padding, cache=cache), module(x, padding))


# ---- arguments and weights --------------------------------------------------------------

def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match=r"num_groups must divide num_heads .* num_groups=3"):
        Mamba2(8, 8, 4, head_dim=2, state_size=4, num_groups=3)
    with pytest.raises(TypeError, match=r"state_size must be a positive int"):
        Mamba2(8, 8, 4, head_dim=2, state_size=4.0)
    with pytest.raises(ValueError, match=r"time_step_limit must be \(low, high\)"):
        Mamba2(8, 8, 4, head_dim=2, state_size=4, time_step_limit=(0.1, 0.01))
    with pytest.raises(ValueError, match=r"projection_multipliers must be None or five"):
        Mamba2(8, 8, 4, head_dim=2, state_size=4, projection_multipliers=(1, 2))
    with pytest.raises(ValueError, match=r"form must be one of chunked, recurrent"):
        Mamba2(8, 8, 4, head_dim=2, state_size=4, form="parallel")
    with pytest.raises(TypeError, match=r"norm must be True or False"):
        Mamba2(8, 8, 4, head_dim=2, state_size=4, norm=1)
    module = layer()
    with pytest.raises(ValueError, match=r"cache holds a window .*use layer\.make_cache"):
        module(tokens(3), cache=module.make_cache(3))
    with pytest.raises(TypeError, match=r"cache must be a DeltaStateCache or None"):
        module(tokens(3), cache={})
    with pytest.raises(TypeError, match=r"x must have the module's dtype"):
        module(tokens(3, dtype=torch.float32))


@pytest.mark.parametrize("bias, bound", [(-1e4, 0.3), (1e4, 0.4)], ids=["low", "high"])
def test_the_step_size_is_clamped_to_its_limits(bias, bound):
    """dt pushed far below (above) the limits computes what dt = low (high) computes."""
    clamped = layer(time_step_limit=(0.3, 0.4))
    pinned = layer(time_step_limit=(0.0, math.inf))
    dt_rows = slice(clamped.W_in.out_features - 4, None)  # the last H rows make dt
    with torch.no_grad():
        clamped.dt_bias.fill_(bias)
        pinned.W_in.weight[dt_rows] = 0
        pinned.W_in.bias[dt_rows] = 0
        pinned.dt_bias.fill_(math.log(math.expm1(bound)))  # softplus gives the bound
        x = tokens(9)
        assert (clamped(x) - pinned(x)).abs().max() <= 1e-9
        assert (clamped(x) - layer()(x)).abs().max() > 1e-3  # and the bound matters


HF_NAMES = {"W_in": "in_proj", "conv": "conv1d", "out_norm": "norm", "out_proj": "out_proj"}


def test_weights_from_a_transformers_state_dict_are_renamed():
    module = layer()
    ours = module.state_dict()
    theirs = {}
    for key, value in ours.items():
        head, dot, rest = key.partition(".")
        theirs[HF_NAMES.get(head, head) + dot + rest] = value
    assert {"in_proj.weight", "conv1d.bias", "norm.weight", "A_log", "D"} <= set(theirs)
    assert from_hf_state_dict(theirs).keys() == ours.keys()
    prefixed = {f"model.layers.3.mamba.{k}": v for k, v in theirs.items()}
    assert from_hf_state_dict(prefixed, "model.layers.3.mamba.").keys() == ours.keys()
    with pytest.raises(ValueError, match=r"not a weight of a Mamba-2 layer"):
        from_hf_state_dict({**theirs, "mup_vector.weight": torch.ones(1)})


def test_a_cache_is_a_delta_state_cache_in_float32_at_least():
    cache = layer(torch.float32).make_cache(2)
    assert isinstance(cache, DeltaStateCache) and cache.state.dtype == torch.float32
    half = Mamba2(8, 8, 2, head_dim=2, state_size=4).to(torch.bfloat16).make_cache(1)
    assert half.state.dtype == torch.float32 and half.conv_window.dtype == torch.bfloat16
