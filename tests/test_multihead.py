"""MultiHeadAttention: the book's numbers, causality, dtypes and devices, state dicts, dropout, bad input."""

from __future__ import annotations

import math
import re

import pytest
import torch

from llm_attention.multihead import MultiHeadAttention
from llm_attention.toy import toy_embeddings

PATHS = pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])


def fresh(seed=0, d_in=8, d_out=8, context_length=10, dropout=0.0, num_heads=2, **kwargs):
    torch.manual_seed(seed)
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, **kwargs)


@PATHS
def test_book_numbers(fast_path):
    """The book: seed 123, MultiHeadAttention(3, 2, 6, 0.0, num_heads=2) on two copies of the toy input."""
    x = toy_embeddings()
    torch.manual_seed(123)
    module = MultiHeadAttention(3, 2, 6, 0.0, num_heads=2, fast_path=fast_path)
    out = module(torch.stack((x, x)))
    assert out.shape == (2, 6, 2)
    torch.testing.assert_close(out[0, 0], torch.tensor([0.3190, 0.4858]), atol=5e-5, rtol=0)
    torch.testing.assert_close(out[0], out[1])  # same sequence twice, same answer twice


def test_parameters_buffer_and_state_dict_keys():
    module = fresh(d_in=6, d_out=12, num_heads=3, context_length=5, qkv_bias=True)
    assert module.head_dim == 4
    assert [name for name, _ in module.named_parameters()] == [
        "W_query.weight", "W_query.bias", "W_key.weight", "W_key.bias",
        "W_value.weight", "W_value.bias", "out_proj.weight", "out_proj.bias",
    ]  # fmt: skip
    assert module.W_query.weight.shape == (12, 6)
    assert module.out_proj.weight.shape == (12, 12)
    assert module.mask.dtype == torch.bool
    assert torch.equal(module.mask, torch.ones(5, 5).triu(1) == 1)  # True above the diagonal = future
    assert "mask" not in module.state_dict()  # persistent=False
    assert fresh(qkv_bias=False).W_key.bias is None


def test_parameters_created_in_order_query_key_value_out_proj():
    """Same seed, same draws in the same order as four nn.Linear layers made by hand."""
    module = fresh(seed=5, d_in=4, d_out=6, num_heads=3, qkv_bias=True)
    torch.manual_seed(5)
    layers = [torch.nn.Linear(4, 6), torch.nn.Linear(4, 6), torch.nn.Linear(4, 6), torch.nn.Linear(6, 6)]
    for mine, theirs in zip((module.W_query, module.W_key, module.W_value, module.out_proj), layers, strict=True):
        assert torch.equal(mine.weight, theirs.weight)
        assert torch.equal(mine.bias, theirs.bias)


@PATHS
@pytest.mark.parametrize("t_change", [0, 3, 6])
def test_a_later_token_changes_no_earlier_output(fast_path, t_change):
    module = fresh(seed=1, fast_path=fast_path).eval()
    x = torch.randn(3, 7, 8)
    changed = x.clone()
    changed[:, t_change:] = torch.randn(3, 7 - t_change, 8)
    with torch.no_grad():
        before, after = module(x), module(changed)
    torch.testing.assert_close(after[:, :t_change], before[:, :t_change], atol=0, rtol=0)
    assert (after[:, t_change:] - before[:, t_change:]).abs().amax(dim=-1).min() > 1e-4  # they do change


@PATHS
def test_without_causal_mask_an_earlier_output_sees_the_future(fast_path):
    module = fresh(seed=1, causal=False, fast_path=fast_path).eval()
    x = torch.randn(1, 5, 8)
    changed = x.clone()
    changed[:, -1] += 1.0
    with torch.no_grad():
        assert (module(changed)[0, 0] - module(x)[0, 0]).abs().max() > 1e-4


@PATHS
def test_padding_keys_are_ignored(fast_path):
    """With right padding, whatever the padding holds changes no output of a real token."""
    module = fresh(seed=2, causal=False, fast_path=fast_path).eval()
    x = torch.randn(2, 6, 8)
    padding_mask = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])
    noisy = x.clone()
    noisy[0, 4:] = 100 * torch.randn(2, 8)
    with torch.no_grad():
        a, b = module(x, padding_mask), module(noisy, padding_mask)
        unpadded_first = module(x[:1, :4])
    torch.testing.assert_close(b[0, :4], a[0, :4])
    torch.testing.assert_close(a[0, :4], unpadded_first[0])  # padding == the sequence cut short
    torch.testing.assert_close(b[1], a[1])


def test_all_true_padding_mask_changes_nothing():
    module = fresh(seed=3).eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        torch.testing.assert_close(module(x, torch.ones(2, 5, dtype=torch.bool)), module(x), atol=1e-6, rtol=0)


@PATHS
def test_fewer_tokens_than_context_length(fast_path):
    module = fresh(seed=4, context_length=10, fast_path=fast_path).eval()
    x = torch.randn(2, 10, 8)
    with torch.no_grad():
        torch.testing.assert_close(module(x[:, :4]), module(x)[:, :4], atol=1e-6, rtol=0)  # causal: a prefix


# --- dtypes, devices, state dicts ---------------------------------------------------------------


@PATHS
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_moves_across_dtypes_with_its_buffer(fast_path, dtype):
    module = fresh(seed=6, fast_path=fast_path).eval()
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        expected = module(x)
        module = module.to(dtype)
        assert module.W_query.weight.dtype == dtype
        assert module.mask.dtype == torch.bool  # a bool buffer is not cast
        out = module(x.to(dtype))
    assert out.dtype == dtype
    tol = 1e-6 if dtype == torch.float64 else 4 * 2.0**-8 * expected.abs().max().item()  # see the bfloat16 test
    torch.testing.assert_close(out.float(), expected, atol=tol, rtol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
@PATHS
def test_moves_to_gpu(fast_path):
    module = fresh(seed=7, fast_path=fast_path).eval()
    x = torch.randn(2, 6, 8)
    padding_mask = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])
    with torch.no_grad():
        expected = module(x, padding_mask)
        module = module.to("cuda")
        assert module.mask.device.type == "cuda"
        out = module(x.cuda(), padding_mask.cuda())
    assert out.device.type == "cuda"
    torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match=r"x must be on the module's device"):
        module(x)


def test_state_dict_round_trip_between_paths_and_context_lengths():
    explicit = fresh(seed=8, context_length=6, qkv_bias=True).eval()
    torch.manual_seed(99)  # different weights until the state dict is loaded
    fast = MultiHeadAttention(8, 8, 32, 0.0, 2, qkv_bias=True, fast_path=True).eval()
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        assert not torch.allclose(fast(x), explicit(x), atol=1e-3)
        fast.load_state_dict(explicit.state_dict())  # strict: same keys, no mask to clash
        torch.testing.assert_close(fast(x), explicit(x), atol=1e-6, rtol=1e-5)
        back = fresh(seed=9, context_length=6, qkv_bias=True).eval()
        back.load_state_dict(fast.state_dict())
        torch.testing.assert_close(back(x), explicit(x), atol=0, rtol=0)


# --- dropout --------------------------------------------------------------------------------------


@PATHS
def test_dropout_only_in_training(fast_path):
    module = fresh(seed=10, dropout=0.5, fast_path=fast_path)
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        module.eval()
        a, b = module(x), module(x)
        module.train()
        c, d = module(x), module(x)
    torch.testing.assert_close(a, b, atol=0, rtol=0)  # eval: deterministic
    assert not torch.allclose(c, a, atol=1e-4)  # training: weights dropped
    assert not torch.allclose(c, d, atol=1e-4)  # ... differently each call


@PATHS
def test_zero_dropout_in_training_equals_eval(fast_path):
    module = fresh(seed=11, dropout=0.0, fast_path=fast_path)
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        train_out = module.train()(x)
        eval_out = module.eval()(x)
    torch.testing.assert_close(train_out, eval_out, atol=1e-6, rtol=0)


@PATHS
def test_dropout_is_rescaled_so_its_mean_is_the_eval_output(fast_path):
    """Dropout keeps a weight with probability 1 - p and scales it by 1 / (1 - p): on average the
    output is the eval output. 4000 copies of one sequence each get their own dropout draw."""
    module = fresh(seed=12, d_in=4, d_out=4, dropout=0.5, fast_path=fast_path)
    x = torch.randn(1, 5, 4)
    with torch.no_grad():
        expected = module.eval()(x)[0]
        torch.manual_seed(0)
        samples = module.train()(x.expand(4000, 5, 4))
    mean, std = samples.mean(0), samples.std(0)
    assert (std > 1e-3).all()  # dropout really varies every output
    bound = 5 * std / math.sqrt(4000) + 1e-6  # 5 standard errors
    assert ((mean - expected).abs() <= bound).all()


# --- bad arguments and inputs ----------------------------------------------------------------------

GOOD = dict(d_in=8, d_out=8, context_length=6, dropout=0.1, num_heads=2)


def with_(**changes):
    return {**GOOD, **changes}


BAD_ARGUMENTS = [
    (with_(num_heads=3), ValueError, "num_heads must divide d_out.*d_out=8, num_heads=3"),
    (with_(d_in=0), ValueError, "d_in must be a positive int, got 0"),
    (with_(d_out=-4), ValueError, "d_out must be a positive int, got -4"),
    (with_(context_length=0), ValueError, "context_length must be a positive int, got 0"),
    (with_(num_heads=-1), ValueError, "num_heads must be a positive int, got -1"),
    (with_(d_in=8.0), TypeError, r"d_in must be a positive int, got 8.0 \(float\)"),
    (with_(num_heads="2"), TypeError, r"num_heads must be a positive int, got '2' \(str\)"),
    (with_(context_length=True), TypeError, r"context_length must be a positive int, got True \(bool\)"),
    (with_(dropout=1.0), ValueError, r"dropout must be a float in \[0, 1\), got 1.0"),
    (with_(dropout=-0.1), ValueError, r"dropout must be a float in \[0, 1\), got -0.1"),
    (with_(dropout="0.1"), TypeError, r"dropout must be a float in \[0, 1\), got '0.1' \(str\)"),
    (with_(qkv_bias=1), TypeError, r"qkv_bias must be True or False, got 1 \(int\)"),
    (with_(causal="yes"), TypeError, r"causal must be True or False, got 'yes' \(str\)"),
    (with_(fast_path=None), TypeError, r"fast_path must be True or False, got None \(NoneType\)"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_ARGUMENTS, ids=[m for _, _, m in BAD_ARGUMENTS])
def test_bad_arguments(kwargs, error, message, monkeypatch):
    made = []
    monkeypatch.setattr(torch.nn.Linear, "__init__", lambda *a, **k: made.append(a))
    with pytest.raises(error, match=message):
        MultiHeadAttention(**kwargs)
    assert made == []  # raised before any layer was built


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


BAD_INPUTS = [
    ([[0.1] * 8] * 3, None, TypeError, r"x must be a torch.Tensor of shape \(B, T, d_in=8\), got list"),
    (_x(2, 3, 8, dtype=torch.int64), None, TypeError, "x must hold floating-point numbers, got dtype torch.int64"),
    (_x(3, 8), None, ValueError, r"x must have shape \(B, T, d_in=8\).*got shape \(3, 8\).*unsqueeze\(0\)"),
    (_x(1, 2, 3, 8), None, ValueError, r"x must have shape \(B, T, d_in=8\) \(3 dimensions\), got shape \(1, 2, 3, 8\)"),
    (_x(2, 3, 5), None, ValueError, r"x must have last dimension d_in=8, got shape \(2, 3, 5\)"),
    (_x(2, 0, 8), None, ValueError, r"x must have at least one sequence and one token, got shape \(2, 0, 8\)"),
    (_x(2, 7, 8), None, ValueError, "x has 7 tokens, more than context_length=6"),
    (_x(2, 3, 8, dtype=torch.float64), None, TypeError, "x must have the module's dtype torch.float32, got dtype torch.float64"),
    (_x(2, 3, 8), [[True] * 3] * 2, TypeError, r"padding_mask must be a bool torch.Tensor of shape \(B, T\) or None, got list"),
    (_x(2, 3, 8), torch.ones(2, 3), TypeError, "padding_mask must have dtype torch.bool .*got dtype torch.float32"),
    (_x(2, 3, 8), torch.ones(3, 2, dtype=torch.bool), ValueError, r"padding_mask must have shape \(B, T\) = \(2, 3\) to match x, got shape \(3, 2\)"),
    (_x(2, 3, 8), torch.ones(2, 1, 3, dtype=torch.bool), ValueError, r"padding_mask must have shape \(B, T\) = \(2, 3\).*got shape \(2, 1, 3\)"),
]


@PATHS
@pytest.mark.parametrize(("x", "padding_mask", "error", "message"), BAD_INPUTS, ids=[m for *_, m in BAD_INPUTS])
def test_bad_inputs(x, padding_mask, error, message, fast_path, monkeypatch):
    module = MultiHeadAttention(**GOOD, fast_path=fast_path)
    called = []
    monkeypatch.setattr(module.W_query, "forward", lambda *a: called.append(a))
    with pytest.raises(error, match=message):
        module(x, padding_mask)
    assert called == []  # raised before any tensor work


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_ARGUMENTS, ids=[m for _, _, m in BAD_ARGUMENTS])
def test_argument_errors_start_with_an_argument_that_was_wrong(kwargs, error, message):
    """The raised message, not the table, opens with the name of an argument changed from GOOD."""
    changed = {name for name, value in kwargs.items() if name not in GOOD or repr(value) != repr(GOOD[name])}
    with pytest.raises(error) as raised:
        MultiHeadAttention(**kwargs)
    assert re.match(r"\w+", str(raised.value))[0] in changed, (str(raised.value), changed)


@PATHS
@pytest.mark.parametrize(("x", "padding_mask", "error", "message"), BAD_INPUTS, ids=[m for *_, m in BAD_INPUTS])
def test_input_errors_start_with_the_input_that_was_wrong(x, padding_mask, error, message, fast_path):
    """In BAD_INPUTS a padding mask is given only when it is the wrong input."""
    wrong = "x" if padding_mask is None else "padding_mask"
    with pytest.raises(error) as raised:
        MultiHeadAttention(**GOOD, fast_path=fast_path)(x, padding_mask)
    assert re.match(r"\w+", str(raised.value))[0] == wrong, str(raised.value)
