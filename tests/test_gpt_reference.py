"""GPTModel against Hugging Face transformers' GPT2LMHeadModel, weights copied over.

A tiny GPT2Config with random weights (nothing is downloaded; HF_HUB_OFFLINE=1 makes sure
nothing reaches a hub), eager attention, dropout off, float32. Every GPT-2 tensor is
copied into a GPTModel of the same sizes by ``gpt2_to_gpt_model`` (and each is used
exactly once), then the logits must agree on both attention paths:

- a batch with no padding, every position up to ``context_length``;
- the same batch left-padded, GPT-2 given the ``attention_mask`` and the
  ``position_ids`` counted from each row's first real token (compared at real tokens:
  a padding query means nothing in either model);
- the padded prompt, then one token at a time, each model with its own cache.

Where GPTModel differs from GPT-2, and what the test does about it:

- ``qkv_bias`` is False by default (the book's choice); GPT-2's fused ``c_attn`` has a
  bias, so the test builds GPTModel with ``qkv_bias=True``.
- ``out_head`` is its own parameter, not tied to ``tok_emb`` (the book's GPTModel leaves
  them untied); GPT-2's ``lm_head`` is ``wte``, so the test copies ``wte`` into both.
- The GELU is ``nn.GELU(approximate="tanh")``: the formula of GPT-2's ``gelu_new``, from
  another kernel (they differ by under 1e-6), so GPT-2 keeps its default.

Nothing else differs: LayerNorm eps 1e-5, feed-forward width 4d, biases on ``out_proj``
and both feed-forward layers, scores scaled by 1/sqrt(d_h), pre-norm blocks, a final
norm. The config spells these GPT-2 defaults out, so a change to either side shows here.
"""

from __future__ import annotations

import functools
import os
import pathlib
from types import SimpleNamespace

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.generate import new_caches  # noqa: E402
from llm_attention.gpt import GPTModel  # noqa: E402

# transformers takes seconds to import: it is imported when a test first needs it, and
# these tests share the worker of the other transformers tests (test_modern_reference.py
# and the combined-module page), so only one worker pays for it.
pytestmark = pytest.mark.xdist_group(
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)  # float32, logits of size about 1
PATHS = pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
B, T, PROMPT = 3, 16, 9  # T = context_length: every position embedding is used
LEFT_PADS = [0, 5, PROMPT - 1]  # per row; the last row's prompt is one real token


@functools.cache
def hf() -> SimpleNamespace:
    """The parts of transformers these tests use; skips the tests where it is not installed."""
    pytest.importorskip("transformers")
    from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel

    return SimpleNamespace(**locals())


def gpt2_config():
    return hf().GPT2Config(
        vocab_size=50, n_positions=T, n_embd=32, n_layer=2, n_head=4,
        # GPT-2's own values, spelled out: GPTModel hard-codes each of them.
        n_inner=None,  # feed-forward width 4 * n_embd
        activation_function="gelu_new",  # the tanh approximation
        layer_norm_epsilon=1e-5,
        scale_attn_weights=True,  # scores / sqrt(d_h)
        scale_attn_by_inverse_layer_idx=False,
        reorder_and_upcast_attn=False,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        bos_token_id=0, eos_token_id=0,  # inside the tiny vocabulary
        attn_implementation="eager",
    )  # fmt: skip


def gpt2_to_gpt_model(gpt2_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """GPTModel's state dict from a GPT2LMHeadModel's; every GPT-2 tensor used once.

    GPT-2's ``Conv1D`` computes ``x @ W + b`` with ``W`` ``(d_in, d_out)``, so each
    weight is the transpose of the ``nn.Linear`` weight ``(d_out, d_in)`` that computes
    the same map. ``c_attn`` is the query, key and value projections side by side.
    """
    left = dict(gpt2_state)

    def take(name):
        return left.pop(name)

    ours = {
        "tok_emb.weight": take("transformer.wte.weight"),  # (V, d)
        "pos_emb.weight": take("transformer.wpe.weight"),  # (T_max, d)
        "final_norm.weight": take("transformer.ln_f.weight"),  # (d,)
        "final_norm.bias": take("transformer.ln_f.bias"),  # (d,)
        "out_head.weight": take("lm_head.weight"),  # (V, d): wte itself, tied
    }
    num_layers = 1 + max(int(k.split(".")[2]) for k in left if k.startswith("transformer.h."))
    for i in range(num_layers):
        h, block = f"transformer.h.{i}.", f"trf_blocks.{i}."
        for theirs, mine in (("ln_1", "norm1"), ("ln_2", "norm2")):
            ours[block + mine + ".weight"] = take(h + theirs + ".weight")  # (d,)
            ours[block + mine + ".bias"] = take(h + theirs + ".bias")  # (d,)
        q, k, v = take(h + "attn.c_attn.weight").chunk(3, dim=1)  # (d, 3d) -> 3 x (d, d)
        q_b, k_b, v_b = take(h + "attn.c_attn.bias").chunk(3)  # (3d,) -> 3 x (d,)
        for mine, weight, bias in (("W_query", q, q_b), ("W_key", k, k_b), ("W_value", v, v_b)):
            ours[block + f"att.{mine}.weight"] = weight.T  # (d_in, d_out) -> (d_out, d_in)
            ours[block + f"att.{mine}.bias"] = bias  # (d,)
        pairs = (
            ("attn.c_proj", "att.out_proj"),  # weight (d, d) -> (d, d)
            ("mlp.c_fc", "ff.0"),  # weight (d, 4d) -> (4d, d)
            ("mlp.c_proj", "ff.2"),  # weight (4d, d) -> (d, 4d)
        )
        for theirs, mine in pairs:
            ours[block + mine + ".weight"] = take(h + theirs + ".weight").T  # (d_out, d_in)
            ours[block + mine + ".bias"] = take(h + theirs + ".bias")  # (d_out,)
    assert not left, f"GPT-2 tensors with no place in GPTModel: {sorted(left)}"
    return {name: tensor.contiguous() for name, tensor in ours.items()}


@pytest.fixture(scope="module")
def gpt2():
    """A tiny GPT2LMHeadModel, every parameter random (GPT-2 starts biases at zero and
    norms at one: perturbed here, so a misplaced bias or norm weight shows)."""
    torch.manual_seed(0)
    model = hf().GPT2LMHeadModel(gpt2_config()).eval()
    assert model.lm_head.weight is model.transformer.wte.weight  # tied, as in GPT-2
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if ".ln_" in name and name.endswith("weight") else 0.0, 0.2)
    return model


def gpt_model(gpt2, fast_path):
    config = gpt2.config
    model = GPTModel(
        config.vocab_size, config.n_positions, config.n_embd, config.n_head,
        config.n_layer, dropout=0.0, qkv_bias=True, fast_path=fast_path,
    ).eval()  # fmt: skip
    model.load_state_dict(gpt2_to_gpt_model(gpt2.state_dict()))  # strict: every name and shape
    return model


def batch(seed=1):
    """Token ids (B, T) and a padding mask (B, T), True = real: LEFT_PADS pads per row."""
    tokens = torch.randint(0, 50, (B, T), generator=torch.Generator().manual_seed(seed))
    padding = torch.arange(T)[None, :] >= torch.tensor(LEFT_PADS)[:, None]  # (B, T)
    return tokens, padding


def hf_positions(attention_mask):
    """GPT-2's position_ids for a left-padded batch, as transformers' generation makes
    them: count the real tokens, from 0 at each row's first; pads get 1 (never read)."""
    positions = attention_mask.long().cumsum(dim=-1) - 1  # (B, T)
    return positions.masked_fill(attention_mask == 0, 1)  # (B, T)


@PATHS
def test_logits_match_gpt2(gpt2, fast_path):
    model = gpt_model(gpt2, fast_path)
    tokens, _ = batch()
    with torch.no_grad():
        expected = gpt2(tokens).logits  # (B, T, V)
        got = model(tokens)  # (B, T, V)
    assert expected.abs().amax() > 1.0  # logits of size about 1: the tolerance means something
    torch.testing.assert_close(got, expected, **TOL)


@PATHS
def test_left_padded_logits_match_gpt2(gpt2, fast_path):
    model = gpt_model(gpt2, fast_path)
    tokens, padding = batch()
    with torch.no_grad():
        expected = gpt2(
            tokens, attention_mask=padding.long(), position_ids=hf_positions(padding)
        ).logits  # (B, T, V)
        got = model(tokens, padding)  # (B, T, V)
    torch.testing.assert_close(got[padding], expected[padding], **TOL)


@PATHS
def test_cached_decoding_matches_gpt2(gpt2, fast_path):
    """The left-padded prompt, then one token at a time: GPT-2 with a DynamicCache, the
    growing attention_mask and the positions of the new tokens; GPTModel with its
    KVCaches, given the padding mask with the prompt only."""
    model = gpt_model(gpt2, fast_path)
    tokens, padding = batch(seed=2)
    positions = hf_positions(padding)  # (B, T)
    hf_cache, caches = hf().DynamicCache(config=gpt2.config), new_caches(model, B)
    steps = [(0, PROMPT)] + [(t, t + 1) for t in range(PROMPT, T)]
    with torch.no_grad():
        for start, end in steps:
            expected = gpt2(
                tokens[:, start:end], past_key_values=hf_cache, use_cache=True,
                attention_mask=padding[:, :end].long(), position_ids=positions[:, start:end],
            ).logits  # (B, end - start, V)
            mask = padding[:, start:end] if start == 0 else None  # the prompt's, kept
            got = model(tokens[:, start:end], mask, caches=caches)  # (B, end - start, V)
            real = padding[:, start:end]
            torch.testing.assert_close(got[real], expected[real], **TOL)
    assert [cache.length for cache in caches] == [T] * gpt2.config.n_layer
