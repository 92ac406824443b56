"""The gated delta rule's three forms agree: ``chunked`` equals ``recurrent`` in float64 to
1e-10 (outputs and final state, from zero and from a given state, any chunk size, lengths that
are not multiples of it, one decay per head and per key channel), their gradients agree, and
``recurrent`` is ``step`` in a loop; ``chunked`` does the work within chunks once for all of them,
its loop a few operations per chunk. The rule does what the page says it does (a write with
beta = 1 is read back exactly; g = 0 and beta = 0 leave the state alone), and bad inputs are
refused by name."""

from __future__ import annotations

import pytest
import torch

from llm_attention.delta_rule import (
    chunk_overlaps,
    chunked,
    decay_within,
    recurrent,
    step,
    step_in_place,
)
from tests.decode_checks import StepLog

B, H, D_K, D_V = 2, 3, 8, 5


def rule_inputs(num_tokens, per_channel, dtype=torch.float64, seed=0, requires_grad=False):
    gen = torch.Generator().manual_seed(seed)
    shape = (B, H, num_tokens)
    q = torch.randn(*shape, D_K, generator=gen, dtype=dtype) * D_K**-0.5
    k = torch.nn.functional.normalize(torch.randn(*shape, D_K, generator=gen, dtype=dtype), dim=-1)
    v = torch.randn(*shape, D_V, generator=gen, dtype=dtype)
    g_shape = (*shape, D_K) if per_channel else shape
    g = -torch.rand(g_shape, generator=gen, dtype=dtype) * 2  # decays from 1 to e^-2
    beta = torch.rand(shape, generator=gen, dtype=dtype)
    state = torch.randn(B, H, D_K, D_V, generator=gen, dtype=dtype)
    tensors = [q, k, v, g, beta, state]
    for t in tensors:
        t.requires_grad_(requires_grad)
    return tensors


DECAYS = pytest.mark.parametrize("per_channel", [False, True], ids=["per-head", "per-channel"])


@DECAYS
@pytest.mark.parametrize("num_tokens, chunk_size", [(1, 4), (7, 7), (37, 8), (64, 16), (50, 64),
                                                    (29, 1)])
@pytest.mark.parametrize("from_state", [False, True], ids=["from-zero", "from-state"])
def test_chunked_equals_recurrent_in_float64(per_channel, num_tokens, chunk_size, from_state):
    q, k, v, g, beta, state = rule_inputs(num_tokens, per_channel)
    state = state if from_state else None
    want_out, want_state = recurrent(q, k, v, g, beta, state)
    got_out, got_state = chunked(q, k, v, g, beta, state, chunk_size)
    assert got_out.shape == (B, H, num_tokens, D_V) and got_state.shape == (B, H, D_K, D_V)
    assert (got_out - want_out).abs().max() <= 1e-10
    assert (got_state - want_state).abs().max() <= 1e-10


@DECAYS
def test_gradients_through_chunked_equal_those_through_the_recurrence(per_channel):
    grads = []
    for form in (recurrent, lambda *a: chunked(*a, chunk_size=6)):
        inputs = rule_inputs(17, per_channel, requires_grad=True)
        out, final = form(*inputs)
        weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(9),
                              dtype=out.dtype)
        ((out * weights).sum() + final.square().sum()).backward()
        grads.append([t.grad for t in inputs])
    for name, want, got in zip("q k v g beta state".split(), *grads):
        assert want is not None and want.abs().max() > 0, name  # every input matters
        assert (got - want).abs().max() <= 1e-10, name


@DECAYS
def test_strong_decays_leave_no_inf_or_nan_in_outputs_or_gradients(per_channel):
    """g = -20 a token in float32: above the diagonal of a chunk of 16, exp(c_i - c_j) would be
    up to exp(300), past float32's largest number; the chunked form never computes it, so its
    outputs match the recurrence and its gradients are finite."""
    q, k, v, g, beta, state = rule_inputs(40, per_channel, dtype=torch.float32)
    g = torch.full_like(g, -20.0).requires_grad_()
    k.requires_grad_()
    want_out, want_state = recurrent(q, k, v, g, beta, state)
    got_out, got_state = chunked(q, k, v, g, beta, state, chunk_size=16)
    assert (got_out - want_out).abs().max() <= 1e-5
    assert (got_state - want_state).abs().max() <= 1e-5
    (got_out.sum() + got_state.sum()).backward()
    assert torch.isfinite(g.grad).all() and torch.isfinite(k.grad).all()


@DECAYS
def test_the_work_within_chunks_is_done_once_and_the_loop_only_carries_the_state(per_channel):
    """4 and 12 chunks of 8: one triangular solve and one cumulative sum for all chunks,
    whatever their number, and at most 4 more operations per chunk (the loop's: what the
    queries read of the state, the written values, the decay and the write)."""
    logs = {}
    for num_tokens in (32, 96):
        inputs = rule_inputs(num_tokens, per_channel)
        with StepLog() as logs[num_tokens]:
            chunked(*inputs, chunk_size=8)
        assert logs[num_tokens].count("linalg_solve_triangular") == 1
        assert logs[num_tokens].count("cumsum") == 1
    per_chunk = (len(logs[96].calls) - len(logs[32].calls)) / (12 - 4)
    assert per_chunk <= 4, per_chunk


def test_per_channel_decays_go_a_group_of_chunks_at_a_time_within_the_budget():
    """A chunk's per-channel decays are C C d_k numbers per head: over the budget, the chunks
    of all heads go a few at a time (one: a budget of 1; five of the 24: groups that cross
    from one head to the next, the last one shorter), with the same overlaps and scores,
    and those equal the sums that define them."""
    q, k, _, g, beta, _ = rule_inputs(32, per_channel=True)
    split = (B, H, 4, 8)
    q, k = q.reshape(*split, D_K), k.reshape(*split, D_K)
    beta, log_decay = beta.reshape(*split, 1), g.reshape(*split, D_K).cumsum(dim=3)
    whole, one_at_a_time, five = (chunk_overlaps(q, k, beta, log_decay, budget)
                                  for budget in (2**26, 1, 5 * 8 * 8 * D_K))
    # the definitions, a sum over the key channels for each pair j <= i
    gaps = log_decay.unsqueeze(-2) - log_decay.unsqueeze(-3)  # (B, H, n, C, C, d_k)
    lower = torch.ones(8, 8, dtype=torch.bool).tril()  # j <= i
    decay = torch.where(lower.unsqueeze(-1), gaps, -torch.inf).exp()
    keys = decay * k.unsqueeze(-3)  # exp(c_i - c_j) k_j, 0 for j > i
    wanted = ((beta * k).unsqueeze(-2) * keys).sum(-1), (q.unsqueeze(-2) * keys).sum(-1)
    for a, b, c, want in zip(whole, one_at_a_time, five, wanted):
        assert a.shape == (*split, 8) and (a - want).abs().max() <= 1e-14
        assert (a - b).abs().max() <= 1e-14 and (a - c).abs().max() <= 1e-14


def test_recurrent_is_step_in_a_loop():
    q, k, v, g, beta, state = rule_inputs(5, per_channel=True)
    out, final = recurrent(q, k, v, g, beta, state)
    for t in range(5):
        o, state = step(q[:, :, t], k[:, :, t], v[:, :, t], g[:, :, t], beta[:, :, t], state)
        assert torch.equal(o, out[:, :, t])
    assert torch.equal(state, final)


@DECAYS
def test_step_in_place_is_step_writing_into_the_state(per_channel):
    q, k, v, g, beta, state = rule_inputs(3, per_channel)
    held = state.clone()
    with torch.no_grad():
        for t in range(3):
            args = (q[:, :, t], k[:, :, t], v[:, :, t], g[:, :, t], beta[:, :, t])
            want, state = step(*args, state)
            got = step_in_place(*args, held)
            assert torch.equal(got, want) or (got - want).abs().max() <= 1e-14
    assert (held - state).abs().max() <= 1e-14
    with pytest.raises(ValueError, match=r"no gradients"):
        step_in_place(*(t[:, :, 0].requires_grad_() for t in (q, k, v, g, beta)), held)


def test_a_full_write_is_read_back_exactly_and_a_blank_token_changes_nothing():
    q, k, v, g, beta, state = rule_inputs(1, per_channel=False)
    k0, v0 = k[:, :, 0], v[:, :, 0]
    # beta = 1, no decay: reading k right after writing (k, v) gives v, whatever was there
    out, new = step(k0, k0, v0, torch.zeros(B, H, dtype=k.dtype), torch.ones(B, H, dtype=k.dtype),
                    state)
    assert (out - v0).abs().max() <= 1e-12
    # beta = 0 and g = 0: the state is left as it was
    _, same = step(q[:, :, 0], k0, v0, torch.zeros(B, H, dtype=k.dtype),
                   torch.zeros(B, H, dtype=k.dtype), state)
    assert torch.equal(same, state)
    # a plain linear state (no delta) would read back v plus what k already held
    plain = state + k0.unsqueeze(-1) * v0.unsqueeze(-2)
    recalled = (k0.unsqueeze(-2) @ plain).squeeze(-2)
    assert (recalled - v0).abs().max() > 0.1


def test_decay_within_a_chunk_is_lower_triangular_and_exact():
    log_decay = -torch.rand(1, 1, 6, 1, dtype=torch.float64).cumsum(2)
    decay = decay_within(log_decay)[0, 0]  # (C, C)
    assert torch.equal(decay.triu(1), torch.zeros(6, 6, dtype=torch.float64))
    assert torch.allclose(decay.diagonal(), torch.ones(6, dtype=torch.float64))
    c = log_decay[0, 0, :, 0]
    assert torch.allclose(decay[4, 1], (c[4] - c[1]).exp())
    # per channel: one such matrix per key channel
    per_channel = decay_within(-torch.rand(1, 1, 6, D_K, dtype=torch.float64).cumsum(2))
    assert per_channel.shape == (1, 1, 6, 6, D_K)


def test_bad_inputs_are_refused_by_name():
    q, k, v, g, beta, state = rule_inputs(4, per_channel=False)
    with pytest.raises(ValueError, match=r"g must have shape \(2, 3, 4\)"):
        recurrent(q, k, v, g[..., :2], beta)
    with pytest.raises(ValueError, match=r"beta must have shape"):
        chunked(q, k, v, g, beta[:, :1])
    with pytest.raises(ValueError, match=r"q and k must have the same shape"):
        chunked(q[..., :4], k, v, g, beta)
    with pytest.raises(ValueError, match=r"state must be None or a tensor of shape"):
        chunked(q, k, v, g, beta, state[..., :2])
    with pytest.raises(ValueError, match=r"chunk_size must be a positive int, got 0"):
        chunked(q, k, v, g, beta, chunk_size=0)
    with pytest.raises(TypeError, match=r"v must be a floating-point torch.Tensor"):
        recurrent(q, k, v.long(), g, beta)
    with pytest.raises(ValueError, match=r"q must have shape \(B, H, d_k\)"):
        step(q, k[:, :, 0], v[:, :, 0], g[:, :, 0], beta[:, :, 0], state)
    with pytest.raises(ValueError, match=r"state must be a tensor"):
        step(q[:, :, 0], k[:, :, 0], v[:, :, 0], g[:, :, 0], beta[:, :, 0], None)
