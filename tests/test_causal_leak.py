"""No causal module of the package lets a token see the future: one check, every class.

The classes are found by scanning the package, so a new module's classes are checked as soon as
they exist. Each found ``nn.Module`` subclass needs an entry in ``REGISTRY``: how to build a small
one and what to feed it, or why it is not causal. A class without an entry fails the test, so
nobody can add an attention class and forget it here.

The check: run the module on a sequence, then on a copy whose tokens after position ``t`` are
replaced; the outputs up to ``t`` must not change, in train mode (dropout 0) and in eval mode, on
the explicit path and, where the class has one, the fast path. The last test runs the same check
on a deliberately broken copy of ``MultiHeadAttention`` and expects it to fail.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch
from torch import nn

import llm_attention

D_IN, CONTEXT, T, B = 8, 12, 7, 2


def package_modules() -> list[nn.Module]:
    """Every nn.Module subclass defined in a module of llm_attention."""
    found = []
    for info in pkgutil.iter_modules(llm_attention.__path__):
        module = importlib.import_module(f"llm_attention.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, nn.Module) and cls.__module__ == module.__name__:
                found.append(cls)
    return sorted(set(found), key=lambda cls: f"{cls.__module__}.{cls.__name__}")


def embeddings(generator):
    return torch.randn(B, T, D_IN, generator=generator)  # (B, T, d_in)


def token_ids(generator):
    return torch.randint(0, 16, (B, T), generator=generator)  # (B, T)


# name -> (build(**path_kwargs) -> module, make_input(generator)) or a reason it is not causal
REGISTRY = {
    "SelfAttentionV1": "not causal: chapter 3's attention sees every token by design",
    "SelfAttentionV2": "not causal: chapter 3's attention sees every token by design",
    "CausalAttention": (lambda **kw: _c("causal", "CausalAttention")(D_IN, 6, CONTEXT, 0.0, **kw), embeddings),
    "MultiHeadAttentionWrapper": (
        lambda **kw: _c("multihead_wrapper", "MultiHeadAttentionWrapper")(D_IN, 3, CONTEXT, 0.0, 2, **kw),
        embeddings,
    ),
    "MultiHeadAttention": (
        lambda **kw: _c("multihead", "MultiHeadAttention")(D_IN, 8, CONTEXT, 0.0, 2, **kw),
        embeddings,
    ),
    "TransformerBlock": (
        lambda **kw: _c("gpt", "TransformerBlock")(D_IN, CONTEXT, 2, 0.0, False, kw.get("fast_path", False)),
        embeddings,
    ),
    "GPTModel": (lambda **kw: _c("gpt", "GPTModel")(16, CONTEXT, D_IN, 2, 2, **kw), token_ids),
    "GroupedQueryAttention": (
        lambda **kw: _c("grouped_query", "GroupedQueryAttention")(D_IN, 8, CONTEXT, 0.0, 4, 2, **kw),
        embeddings,
    ),
    "LatentAttention": (lambda **kw: latent_layer(**kw), embeddings),
    "SparseLatentAttention": (lambda **kw: sparse_latent_layer(**kw), embeddings),
    "LightningIndexer": "not attention: it scores keys for SparseLatentAttention, which is checked with it",
    "CompressedAttention": (lambda **kw: compressed_layer(**kw), embeddings),
    "Compressor": "not attention: it pools closed windows for CompressedAttention, which is checked with it",
    "CompressedIndexer": "not attention: it scores entries for CompressedAttention, which is checked with it",
    "ModernAttention": (  # a window shorter than the sequence, QK-norm and RoPE all on
        lambda **kw: _c("modern", "ModernAttention")(
            D_IN, 8, CONTEXT, 0.0, 4, 2, window=3, qk_norm=True, **kw
        ),
        embeddings,
    ),
    "GatedDeltaNet": (lambda **kw: gated_delta_net(), embeddings),
    "KimiDeltaAttention": (lambda **kw: kimi_delta(), embeddings),
    "DeltaRuleLayer": "a base class: GatedDeltaNet and KimiDeltaAttention are checked, in both forms",
    "GatedRMSNorm": "not attention: it norms each position's own output; the linear layers are checked with it",
    "RotaryEmbedding": "not attention: it turns each position's own query or key; ModernAttention is checked with it",
    "UnitOffsetRMSNorm": "not attention: it norms each position's own query or key; FAMILY_OPTIONS checks it",
    "BlockSparseAttention": (  # blocks of 2 in 7 tokens, the top 2 and the local one
        lambda **kw: _c("block_sparse", "BlockSparseAttention")(
            D_IN, 8, CONTEXT, 0.0, 4, 2, index_n_heads=2, index_head_dim=4, block_size=2,
            top_k=2, **kw),
        embeddings,
    ),
    "BlockIndexer": "not attention: it scores blocks for BlockSparseAttention, which is checked with it",
    "Mamba2": (lambda **kw: mamba2_layer(), embeddings),
    "GroupedGatedRMSNorm": "not attention: it norms each position's own output; Mamba2 is checked with it",
}  # fmt: skip

# ModernAttention with each family's options, windows shorter than the sequence: (options, paths)
FAMILY_OPTIONS = {
    "gemma2": (dict(window=3, scale=0.3, softcap=2.0), [False]),
    "gemma3": (dict(window=3, qk_norm=True, norm_unit_offset=True, scale=0.3,
                    rope_scaling=dict(rope_type="linear", factor=8.0)), [False, True]),
    "gpt-oss": (dict(window=3, sinks=True, qkv_bias=True, out_bias=True,
                     rope_scaling=dict(rope_type="yarn", factor=4.0,
                                       original_max_position_embeddings=4)), [False]),
    "qwen3-next": (dict(output_gate=True, qk_norm=True, norm_unit_offset=True, head_dim=4,
                        partial_rotary_factor=0.5), [False, True]),
    "llama3.1": (dict(rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                        high_freq_factor=4.0,
                                        original_max_position_embeddings=4)), [False, True]),
    "llama4-chunked": (dict(chunk_size=3, qk_norm=True, qk_norm_weight=False,
                            rope_interleave=True), [False, True]),
    "llama4-nope": (dict(nope=True, temperature_tuning=(2, 0.5)), [False, True]),
    "smollm3-nope-window": (dict(nope=True, window=3), [False, True]),
    "gemma4-local": (dict(window=3, scale=1.0, qk_norm=True, value_norm=True), [False, True]),
    "gemma4-global": (dict(scale=1.0, qk_norm=True, value_norm=True, values_from_keys=True,
                           head_dim=8, rope_scaling=dict(rope_type="proportional"),
                           partial_rotary_factor=0.25), [False, True]),
}  # fmt: skip


def _c(module: str, name: str):
    return getattr(importlib.import_module(f"llm_attention.{module}"), name)


def has_fast_path(cls) -> bool:
    return "fast_path" in inspect.signature(cls.__init__).parameters


def cases():
    for cls in package_modules():
        entry = REGISTRY.get(cls.__name__)
        if isinstance(entry, str):
            continue
        paths = [False, True] if has_fast_path(cls) else [False]
        for fast in paths:
            for mode in ("train", "eval"):
                label = f"{cls.__name__}-{'fast' if fast else 'explicit'}-{mode}"
                yield pytest.param(cls, fast, mode, id=label)


def assert_no_leak(module: nn.Module, make_input, positions=(0, 3, T - 2)) -> None:
    """Changing every token after t leaves each output up to t exactly as it was."""
    generator = torch.Generator().manual_seed(0)
    x = make_input(generator)
    with torch.no_grad():
        before = module(x)
        for t in positions:
            changed = x.clone()
            changed[:, t + 1 :] = make_input(generator)[:, t + 1 :]
            after = module(changed)
            torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], atol=1e-6, rtol=0,
                                       msg=lambda m, t=t: f"outputs up to {t} changed: {m}")  # fmt: skip
            assert (after[:, t + 1 :] - before[:, t + 1 :]).abs().max() > 1e-4  # not inert


def test_every_module_class_is_registered():
    found = {cls.__name__ for cls in package_modules()}
    assert {"CausalAttention", "MultiHeadAttention", "GPTModel"} <= found  # the scan works
    missing = sorted(found - set(REGISTRY))
    assert not missing, f"add these classes to REGISTRY in {__file__}: {missing}"


@pytest.mark.parametrize("cls, fast_path, mode", list(cases()))
def test_no_output_sees_a_later_token(cls, fast_path, mode):
    build, make_input = REGISTRY[cls.__name__]
    torch.manual_seed(0)
    module = build(fast_path=fast_path) if has_fast_path(cls) else build()
    module.train(mode == "train")  # dropout is 0, so train mode must not leak either
    assert_no_leak(module, make_input)


def family_cases():
    for family, (_, paths) in FAMILY_OPTIONS.items():
        for fast in paths:
            for mode in ("train", "eval"):
                yield pytest.param(family, fast, mode,
                                   id=f"{family}-{'fast' if fast else 'explicit'}-{mode}")


@pytest.mark.parametrize("family, fast_path, mode", list(family_cases()))
def test_family_options_do_not_leak(family, fast_path, mode):
    options, _ = FAMILY_OPTIONS[family]
    torch.manual_seed(0)
    module = _c("modern", "ModernAttention")(D_IN, 8, CONTEXT, 0.0, 4, 2, fast_path=fast_path,
                                             **options)
    if module.sinks is not None:
        torch.nn.init.normal_(module.sinks)  # zeros would still be a sink; make them differ
    module.train(mode == "train")
    assert_no_leak(module, embeddings)


class OwnerThenReader(nn.Module):
    """Gemma 4's sharing: a windowed layer, then a layer that attends over its keys and
    values (kv_sharing.SharedKV), on the same tokens; the reader's output."""

    def __init__(self, fast_path):
        super().__init__()
        modern = _c("modern", "ModernAttention")
        self.owner = modern(D_IN, 8, CONTEXT, 0.0, 4, 2, window=3, qk_norm=True,
                            value_norm=True, scale=1.0, fast_path=fast_path)
        self.reader = modern(D_IN, 8, CONTEXT, 0.0, 4, 2, window=3, qk_norm=True,
                             kv_shared=True, scale=1.0, fast_path=fast_path)

    def forward(self, x):
        shared = _c("kv_sharing", "SharedKV")()
        self.owner(x, cache=shared)
        return self.reader(x, cache=shared)


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_a_layer_reading_shared_keys_does_not_leak(fast_path, mode):
    torch.manual_seed(0)
    module = OwnerThenReader(fast_path)
    module.train(mode == "train")
    assert_no_leak(module, embeddings)


def latent_layer(**kw):
    return _c("latent", "LatentAttention")(
        D_IN, 8, CONTEXT, 0.0, 2, kv_lora_rank=6, qk_nope_head_dim=4, qk_rope_head_dim=2,
        v_head_dim=3, q_lora_rank=5, **kw
    )


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_absorbed_latent_attention_does_not_leak(fast_path, mode):
    torch.manual_seed(0)
    module = latent_layer(fast_path=fast_path, absorb=True)
    module.train(mode == "train")
    assert_no_leak(module, embeddings)


def sparse_latent_layer(**kw):
    """Top-k 3 of up to 7 tokens: the selection decides what each query sees."""
    return _c("sparse_latent", "SparseLatentAttention")(
        D_IN, 8, CONTEXT, 0.0, 2, kv_lora_rank=6, qk_nope_head_dim=4, qk_rope_head_dim=2,
        v_head_dim=3, q_lora_rank=5, index_n_heads=2, index_head_dim=4, index_topk=3, **kw
    )


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("form", ["gathered", "masked-absorbed"])
def test_sparse_latent_attention_forms_do_not_leak(form, fast_path, mode):
    torch.manual_seed(0)
    module = sparse_latent_layer(fast_path=fast_path, gathered=form == "gathered",
                                 absorb=form == "masked-absorbed")
    module.train(mode == "train")
    assert_no_leak(module, embeddings)


def compressed_layer(kind="compressed_sparse_attention", **kw):
    """DeepSeek-V4's attention: a window of 3; entries of 2 tokens (CSA: the top 2 of up to 3,
    over overlapping windows); every weight off its starting value."""
    rate = {"sliding_attention": None, "heavily_compressed_attention": 2}.get(kind, 2)
    indexer = dict(index_n_heads=2, index_head_dim=4, index_topk=2) if (
        kind == "compressed_sparse_attention") else {}
    module = _c("compressed_attention", "CompressedAttention")(
        D_IN, 8, CONTEXT, 0.0, 2, head_dim=4, q_lora_rank=5, o_groups=2, o_lora_rank=3,
        window=3, layer_type=kind, compress_rate=rate, rope_head_dim=2, **indexer, **kw
    )
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0.0, 0.5)
    return module


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("kind", ["sliding_attention", "heavily_compressed_attention",
                                  "compressed_sparse_attention", "gathered"])
def test_every_kind_of_compressed_attention_does_not_leak(kind, fast_path, mode):
    torch.manual_seed(0)
    gathered = kind == "gathered"
    module = compressed_layer("compressed_sparse_attention" if gathered else kind,
                              fast_path=fast_path, gathered=gathered)
    module.train(mode == "train")
    assert_no_leak(module, embeddings)


def gated_delta_net(form="chunked"):
    return _c("linear_attention", "GatedDeltaNet")(
        D_IN, 8, 4, num_key_heads=2, key_head_dim=4, value_head_dim=3, chunk_size=3, form=form
    )


def mamba2_layer(form="chunked"):
    return _c("mamba2", "Mamba2")(D_IN, D_IN, 4, head_dim=4, state_size=4, num_groups=2,
                                  chunk_size=3, form=form)


def kimi_delta(form="chunked"):
    return _c("linear_attention", "KimiDeltaAttention")(D_IN, 8, 2, head_dim=4, chunk_size=3,
                                                        form=form)


@pytest.mark.parametrize("form", ["chunked", "recurrent"])
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("build", [gated_delta_net, kimi_delta, mamba2_layer],
                         ids=["gated-delta-net", "kda", "mamba2"])
def test_linear_attention_does_not_leak_in_either_form(build, form, mode):
    """The state reads only what came before; chunks of 3 over 7 tokens, the last one short."""
    torch.manual_seed(0)
    module = build(form)
    module.train(mode == "train")
    assert_no_leak(module, embeddings)


class PeeksOneAhead(_c("multihead", "MultiHeadAttention")):
    """A broken copy: its mask hides the future from two tokens on, so each token sees the next."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.mask = torch.ones_like(self.mask).triu(diagonal=2)  # one future key let through
        self.fast_path = False  # the fused kernel makes its own mask; break the explicit one


def test_the_check_catches_a_broken_mask():
    torch.manual_seed(0)
    broken = PeeksOneAhead(D_IN, 8, CONTEXT, 0.0, 2).eval()
    with pytest.raises(AssertionError, match="outputs up to 0 changed"):
        assert_no_leak(broken, embeddings)
