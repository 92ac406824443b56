# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The family table: every model family the site builds, one entry each.

An entry (``Family``) holds what the site knows of a family, written once:

- ``published``: for one model or more, the fields of its ``config.json`` that its
  attention reads, copied from the file named beside it (on the Hugging Face Hub; the
  values are the published ones, the field names those of the file). Gemma 4's were
  read from copies of Google's files that others published in their own repositories
  (several, which agree), not from Google's files themselves: the source says so;
- ``tiny``: a tiny transformers config of the family (a few layers, width 32), with
  every mechanism sized to bite within the parity harness's twelve tokens;
- ``mechanisms``: what its layers do beyond plain causal attention, each with the
  ``Change`` that drops it from the transformers model (a config field, or an edit of
  the built model). The harness (``parity.py``) drops each and fails unless the
  output moves: a tiny config that never reaches a branch fails loudly.

The pages, their parity tables, the tests and the at-a-glance tables read these
entries (``family_rows.py`` derives the tables' rows). Adding a family is adding an
entry (and, where its idea is new, a layer module): CONTRIBUTING says how. Not a model
module: the edits use transformers' module names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from . import switches
from .switches import (
    fill, identity_conv, open_output_gate, own_values, replace, set_attribute,
)

VOCAB = 50  # tiny models' vocabulary


@dataclass(frozen=True)
class Change:
    """A change to a tiny transformers model: ``config`` fields replaced before it is
    built, then ``edit(model)`` on the built model (weights already set);
    ``patch(model)``, a context manager the model's runs go through (a change to
    transformers' code or to weights, undone after). As a mechanism's switch,
    ``layers`` names the mixers whose output must move when it is dropped (layer
    indices, kinds such as ``"sliding_attention"``, or mixer names such as
    ``"mamba"``; None: every token mixer). As a variant, ``ties`` says that it leaves
    choices to ``torch.topk``'s tie-breaking, which differs with the shape of the call:
    the variant is compared with transformers call for call, not decoding against one
    pass."""

    config: dict = field(default_factory=dict)
    edit: Callable | None = None
    patch: Callable | None = None  # model -> context manager, around the model's runs
    layers: tuple | None = None
    ties: bool = False


@dataclass(frozen=True)
class Family:
    """One family of the table (see the module's docstring)."""

    key: str
    title: str
    page: str  # the page that explains it, under docs/
    tiny: dict  # the tiny transformers config, ``model_type`` included
    mechanisms: dict = field(default_factory=dict)  # name -> Change that drops it
    published: dict = field(default_factory=dict)  # model -> (source, fields)
    tables: tuple = ()  # the at-a-glance tables it appears in
    variants: dict = field(default_factory=dict)  # name -> Change, proven as well
    init: dict = field(default_factory=dict)  # parameter pattern -> initialiser
    model_class: str | None = None  # transformers' class, where Auto has none
    # "reference": a left-padded row is compared with transformers' own padded row;
    # "prompt alone": with transformers run on the row's prompt alone, where its padded
    # rows differ from that (its compressors and indexers pool the padding)
    padded_rows: str = "reference"
    # "slots": positions count every slot, padding included, as a plain model call does;
    # "slots, passed": the same, passed to a model that does not count them itself;
    # "from first real token": as ``generate`` passes them (the layers read them)
    positions: str = "slots"


def rope_default(theta: float) -> Change:
    """Plain rotary angles at base ``theta`` instead of a scaled table."""
    plain = dict(rope_type="default", rope_theta=theta)
    return Change(config=dict(rope_parameters=plain))


# --- the tiny configs' shared sizes -------------------------------------------------

SMALL = dict(  # grouped-query heads: 4 query heads, 2 key/value heads of 16
    hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
    intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64,
)
MOE = dict(num_experts=2, num_experts_per_tok=1, moe_intermediate_size=32)
LINEAR = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
              linear_value_head_dim=6)
WINDOW = 5  # windows and chunks of 5 tokens: two boundaries in twelve
LATENT = dict(  # DeepSeek's latent attention, small
    hidden_size=32, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16,
    qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, intermediate_size=64,
    moe_intermediate_size=32, n_routed_experts=2, num_experts_per_tok=1, n_group=1,
    topk_group=1, first_k_dense_replace=1, vocab_size=VOCAB, max_position_embeddings=64,
)
DEEPSEEK_YARN = dict(  # YaRN over 16 positions: heads of 4 rotary numbers see each part
    rope_type="yarn", rope_theta=10000.0, factor=4.0, beta_fast=32.0, beta_slow=1.0,
    mscale=1.0, mscale_all_dim=1.0, original_max_position_embeddings=16,
)
LLAMA31_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
GEMMA4_ROPE = {  # Gemma 4's rotary: each kind of layer its own
    "full_attention": {
        "partial_rotary_factor": 0.25,
        "rope_theta": 1000000.0,
        "rope_type": "proportional",
    },
    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
}
# Norms that scale by (1 + w) (Gemma 2 and 3, Qwen3-Next, Qwen3.5): w around 0, so
# that queries and keys keep the sizes the default draw gives other families
ONE_PLUS_W_NORMS = {"*norm*": lambda p: p.uniform_(-0.5, 0.5)}
SMALL_2026 = dict(vocab_size=64, hidden_size=32, intermediate_size=32,
                  max_position_embeddings=16)
M3_ROPE = dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5)
MISTRAL4_ROPE = dict(  # YaRN over 4 positions, the query scale growing every 4
    type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=4,
    beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0,
    llama_4_scaling_beta=0.5)
MIMO_ROPE = {
    kind: dict(rope_type="default", rope_theta=theta, partial_rotary_factor=0.334)
    for kind, theta in (("full_attention", 5e6), ("sliding_attention", 1e4))
}
LAGUNA_ROPE = {  # Laguna XS.2.1's kinds: YaRN on half of each head of the full layers
    "full_attention": dict(rope_type="yarn", rope_theta=5e5, factor=4.0,
                           original_max_position_embeddings=4, beta_fast=64.0,
                           beta_slow=1.0, attention_factor=1.35,
                           partial_rotary_factor=0.5),
    "sliding_attention": dict(rope_type="default", rope_theta=1e4,
                              partial_rotary_factor=1.0),
}
V4_YARN = {"beta_fast": 32, "beta_slow": 1, "factor": 16,
           "original_max_position_embeddings": 65536, "type": "yarn"}
CSA_KIND, HCA_KIND = "compressed_sparse_attention", "heavily_compressed_attention"
HYBRID_SMALL = dict(  # the hybrids' tiny sizes: width 64, 4 query and 2 key/value heads
    vocab_size=VOCAB, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=64, intermediate_size=64, pad_token_id=0, bos_token_id=1,
    eos_token_id=2,
)
MAMBA_SIZES = dict(mamba_n_heads=8, mamba_d_state=16, mamba_n_groups=2,
                   mamba_chunk_size=8)
SLOW_DECAY = {  # decays of 0.02 to 0.2, steps of about 0.05 to 0.3: the state carries
    "*A_log": lambda p: p.copy_(torch.empty(p.shape).uniform_(0.02, 0.2).log()),
    "*dt_bias": lambda p: p.uniform_(-3.0, -1.0),
}


def _mamba2(layers=None) -> dict:
    """Mamba-2's mechanisms, each dropped by a switch of ``switches`` on the layers (or
    mixers) ``layers``."""
    return {
        "state": Change(patch=switches.patched(switches.no_state), layers=layers),
        "decay": Change(patch=switches.patched(switches.no_decay), layers=layers),
        "short convolution": Change(patch=switches.patched(switches.no_conv),
                                    layers=layers),
        "gate": Change(patch=switches.patched(switches.no_gate), layers=layers),
        "norm groups": Change(patch=switches.patched(switches.no_norm_groups),
                              layers=layers),
        "skip D": Change(patch=switches.patched(switches.no_skip), layers=layers),
        "groups of B and C": Change(patch=switches.patched(switches.one_group),
                                    layers=layers),
        "chunks crossing": Change(patch=switches.patched(switches.chunks_apart),
                                  layers=layers),
    }
SLIDING = ("sliding_attention",)
FULL = ("full_attention",)
LINEAR_LAYERS = ("linear_attention",)

# --- the table ----------------------------------------------------------------------

_FAMILIES = [
    Family(
        key="gpt2",
        title="GPT-2",
        page="chapters/multi-head-attention.md",
        tiny=dict(model_type="gpt2", n_embd=32, n_head=4, n_layer=2, n_positions=64,
                  n_inner=64, vocab_size=VOCAB, bos_token_id=0, eos_token_id=0),
        mechanisms={
            "score scale 1/sqrt(d_h)": Change(config=dict(scale_attn_weights=False)),
            "query, key and value biases": Change(edit=fill("*attn.c_attn.bias", 0.0)),
        },
        published={
            "GPT-2 small": (
                "openai-community/gpt2/config.json",
                dict(model_type="gpt2", n_embd=768, n_head=12, n_layer=12,
                     n_positions=1024, vocab_size=50257),
            ),
        },
    ),
    Family(
        key="llama",
        title="Llama 3.1",
        page="modern/scaled-rotary.md",
        tiny=dict(  # heads of 16 at original 32: pairs kept, blended and divided
            model_type="llama", **SMALL, num_hidden_layers=2, attention_bias=True,
            rope_parameters=dict(LLAMA31_ROPE, rope_theta=10000.0,
                                 original_max_position_embeddings=32),
        ),
        mechanisms={
            "llama3 angles": rope_default(10000.0),
            "biases": Change(edit=fill("*self_attn.*_proj.bias", 0.0)),
        },
        published={
            "Llama 3.1 8B": (
                "meta-llama/Llama-3.1-8B/config.json",
                dict(
                    model_type="llama",
                    hidden_size=4096,
                    num_hidden_layers=32,
                    num_attention_heads=32,
                    num_key_value_heads=8,
                    max_position_embeddings=131072,
                    rope_theta=500000.0,
                    rope_scaling=LLAMA31_ROPE,
                    attention_bias=False,
                ),
            ),
            "Llama 3.1 405B": (
                "meta-llama/Llama-3.1-405B/config.json",
                dict(
                    model_type="llama",
                    hidden_size=16384,
                    num_hidden_layers=126,
                    num_attention_heads=128,
                    num_key_value_heads=8,
                    max_position_embeddings=131072,
                    rope_theta=500000.0,
                    rope_scaling=LLAMA31_ROPE,
                    attention_bias=False,
                ),
            ),
        },
        tables=("softmax",),
    ),
    Family(
        key="mistral",
        title="Mistral",
        page="modern/sliding-window.md",
        tiny=dict(model_type="mistral", **SMALL, num_hidden_layers=2,
                  sliding_window=WINDOW),
        mechanisms={"window": Change(config=dict(sliding_window=None))},
        published={
            "Mistral 7B v0.1": (
                "mistralai/Mistral-7B-v0.1/config.json",
                dict(
                    model_type="mistral",
                    hidden_size=4096,
                    num_hidden_layers=32,
                    num_attention_heads=32,
                    num_key_value_heads=8,
                    max_position_embeddings=32768,
                    rope_theta=10000.0,
                    sliding_window=4096,
                ),
            ),
        },
        tables=("softmax",),
    ),
    Family(
        key="qwen3",
        title="Qwen3",
        page="modern/combined.md",
        tiny=dict(model_type="qwen3", **SMALL, num_hidden_layers=2),  # d_h 16, not 32/4
        mechanisms={"QK-norm": Change(edit=replace("*self_attn.[qk]_norm"))},
        published={
            "Qwen3 8B": (
                "Qwen/Qwen3-8B/config.json",
                dict(
                    model_type="qwen3",
                    hidden_size=4096,
                    num_hidden_layers=36,
                    num_attention_heads=32,
                    num_key_value_heads=8,
                    head_dim=128,
                    max_position_embeddings=40960,
                    rope_theta=1000000.0,
                    rms_norm_eps=1e-6,
                    attention_bias=False,
                    use_sliding_window=False,
                ),
            ),
        },
        tables=("softmax",),
    ),
    Family(
        key="gemma2",
        title="Gemma 2",
        page="modern/open-families.md",
        tiny=dict(model_type="gemma2", **SMALL, num_hidden_layers=2,
                  sliding_window=WINDOW, query_pre_attn_scalar=24,
                  attn_logit_softcapping=2.0),
        mechanisms={
            "window": Change(config=dict(sliding_window=64), layers=SLIDING),
            "soft cap": Change(config=dict(attn_logit_softcapping=None)),
            "own score scale": Change(config=dict(query_pre_attn_scalar=16)),
        },
        published={
            "Gemma 2 9B": (
                "google/gemma-2-9b/config.json",
                dict(
                    model_type="gemma2",
                    hidden_size=3584,
                    num_hidden_layers=42,
                    num_attention_heads=16,
                    num_key_value_heads=8,
                    head_dim=256,
                    max_position_embeddings=8192,
                    rope_theta=10000.0,
                    sliding_window=4096,
                    query_pre_attn_scalar=256,
                    attn_logit_softcapping=50.0,
                ),
            ),
        },
        init=ONE_PLUS_W_NORMS,
        tables=("softmax",),
    ),
    Family(
        key="gemma3",
        title="Gemma 3",
        page="modern/open-families.md",
        tiny=dict(model_type="gemma3_text", **SMALL, num_hidden_layers=6,
                  sliding_window=WINDOW, query_pre_attn_scalar=24),
        mechanisms={
            "window": Change(config=dict(sliding_window=64), layers=SLIDING),
            "(1 + w) QK-norm": Change(edit=replace("*self_attn.[qk]_norm")),
            "local rotary base": Change(
                config=dict(rope_parameters=dict(
                    full_attention=dict(rope_type="default", rope_theta=1000000.0),
                    sliding_attention=dict(rope_type="default", rope_theta=1000000.0),
                )),
                layers=SLIDING,
            ),
        },
        published={
            "Gemma 3 27B": (
                "google/gemma-3-27b-it/config.json (text_config)",
                dict(
                    model_type="gemma3",
                    text_config=dict(
                        model_type="gemma3_text",
                        hidden_size=5376,
                        num_hidden_layers=62,
                        num_attention_heads=32,
                        num_key_value_heads=16,
                        head_dim=128,
                        max_position_embeddings=131072,
                        rope_theta=1000000.0,
                        rope_local_base_freq=10000.0,
                        rope_scaling={"factor": 8.0, "rope_type": "linear"},
                        sliding_window=1024,
                        sliding_window_pattern=6,
                        query_pre_attn_scalar=168,
                        rms_norm_eps=1e-6,
                    ),
                ),
            ),
        },
        init=ONE_PLUS_W_NORMS,
        tables=("softmax",),
    ),
    Family(
        key="gpt_oss",
        title="gpt-oss",
        page="modern/open-families.md",
        tiny=dict(  # YaRN at a low base: heads of 16 have pairs kept, ramped, divided
            model_type="gpt_oss", **SMALL, num_hidden_layers=2, sliding_window=WINDOW,
            num_local_experts=2, num_experts_per_tok=1,
            rope_parameters=dict(rope_type="yarn", rope_theta=10.0, factor=4.0,
                                 beta_fast=32.0, beta_slow=1.0, truncate=False,
                                 original_max_position_embeddings=16),
        ),
        mechanisms={
            "window": Change(config=dict(sliding_window=64), layers=SLIDING),
            "sinks": Change(edit=fill("*self_attn.sinks", -torch.inf)),
            "yarn angles": rope_default(10.0),
            "biases": Change(edit=fill("*self_attn.*_proj.bias", 0.0)),
        },
        published={
            "gpt-oss-120b": (
                "openai/gpt-oss-120b/config.json",
                dict(
                    model_type="gpt_oss",
                    hidden_size=2880,
                    num_hidden_layers=36,
                    num_attention_heads=64,
                    num_key_value_heads=8,
                    head_dim=64,
                    max_position_embeddings=131072,
                    rope_theta=150000.0,
                    sliding_window=128,
                    attention_bias=True,
                    rope_scaling={
                        "rope_type": "yarn",
                        "factor": 32.0,
                        "beta_fast": 32.0,
                        "beta_slow": 1.0,
                        "original_max_position_embeddings": 4096,
                        "truncate": False,
                    },
                ),
            ),
        },
        tables=("softmax",),
    ),
    Family(
        key="qwen3_next",
        title="Qwen3-Next",
        page="modern/linear-attention.md",
        tiny=dict(model_type="qwen3_next", **SMALL, **LINEAR, **MOE,
                  num_hidden_layers=4, shared_expert_intermediate_size=32),
        mechanisms={
            "output gate": Change(edit=open_output_gate(SMALL["head_dim"]),
                                  layers=FULL),
            "a quarter of a head turned": Change(
                config=dict(partial_rotary_factor=1.0), layers=FULL),
            "short convolution": Change(edit=identity_conv, layers=LINEAR_LAYERS),
            "decay": Change(edit=fill("*linear_attn.A_log", -30.0),
                            layers=LINEAR_LAYERS),
        },
        published={
            "Qwen3-Next 80B-A3B": (
                "Qwen/Qwen3-Next-80B-A3B-Instruct/config.json",
                dict(
                    model_type="qwen3_next",
                    hidden_size=2048,
                    num_hidden_layers=48,
                    num_attention_heads=16,
                    num_key_value_heads=2,
                    head_dim=256,
                    max_position_embeddings=262144,
                    rope_theta=10000000.0,
                    partial_rotary_factor=0.25,
                    full_attention_interval=4,
                    rms_norm_eps=1e-6,
                    hidden_act="silu",
                    linear_num_key_heads=16,
                    linear_num_value_heads=32,
                    linear_key_head_dim=128,
                    linear_value_head_dim=128,
                    linear_conv_kernel_dim=4,
                ),
            ),
        },
        init=ONE_PLUS_W_NORMS,
        tables=("softmax", "hybrid"),
    ),
    Family(
        key="llama4",
        title="Llama 4",
        page="modern/llama4-smollm3-gemma4.md",
        tiny=dict(  # chunks of 5; temperature tuning from position 3 on
            model_type="llama4_text", **SMALL, num_hidden_layers=4,
            attention_chunk_size=WINDOW, floor_scale=4, attn_scale=0.5,
            num_local_experts=2, intermediate_size_mlp=32,
            rope_parameters=dict(LLAMA31_ROPE, rope_theta=500000.0,
                                 original_max_position_embeddings=16),
        ),
        mechanisms={
            "chunks": Change(config=dict(attention_chunk_size=64),
                             layers=("chunked_attention",)),
            "layers without positions": Change(
                edit=set_attribute("*layers.3.self_attn", use_rope=1), layers=(3,)),
            "temperature tuning": Change(config=dict(attn_temperature_tuning=False),
                                         layers=(3,)),
            "QK-norm without weights": Change(config=dict(use_qk_norm=False),
                                              layers=("chunked_attention",)),
            "llama3 angles": Change(config=dict(rope_parameters=dict(
                rope_type="default", rope_theta=500000.0)),
                layers=("chunked_attention",)),
        },
        published={
            "Llama 4 Scout": (
                "meta-llama/Llama-4-Scout-17B-16E/config.json (text_config)",
                dict(
                    model_type="llama4",
                    text_config=dict(
                        model_type="llama4_text",
                        hidden_size=5120,
                        num_hidden_layers=48,
                        num_attention_heads=40,
                        num_key_value_heads=8,
                        head_dim=128,
                        max_position_embeddings=262144,
                        rope_theta=500000.0,
                        rope_scaling={
                            "factor": 8.0,
                            "high_freq_factor": 4.0,
                            "low_freq_factor": 1.0,
                            "original_max_position_embeddings": 8192,
                            "rope_type": "llama3",
                        },
                        attention_chunk_size=8192,
                        no_rope_layers=[1, 1, 1, 0] * 12,
                        use_qk_norm=True,
                        attn_temperature_tuning=4,  # an int in the file, read as "on"
                        floor_scale=8192,
                        attn_scale=0.1,
                        rms_norm_eps=1e-05,
                        attention_bias=False,
                    ),
                ),
            ),
        },
        tables=("softmax",),
    ),
    Family(
        key="smollm3",
        title="SmolLM3",
        page="modern/llama4-smollm3-gemma4.md",
        tiny=dict(model_type="smollm3", **SMALL, num_hidden_layers=4, pad_token_id=0),
        mechanisms={  # as published: no window; every fourth layer without positions
            "layers without positions": Change(
                edit=set_attribute("*layers.3.self_attn", use_rope=1), layers=(3,)),
        },
        published={
            "SmolLM3 3B": (
                "HuggingFaceTB/SmolLM3-3B/config.json",
                dict(
                    model_type="smollm3",
                    hidden_size=2048,
                    num_hidden_layers=36,
                    num_attention_heads=16,
                    num_key_value_heads=4,
                    max_position_embeddings=65536,
                    rope_theta=5000000.0,
                    no_rope_layer_interval=4,
                    no_rope_layers=[1, 1, 1, 0] * 9,
                    use_sliding_window=False,
                    sliding_window=None,
                    rms_norm_eps=1e-06,
                    attention_bias=False,
                ),
            ),
        },
        tables=("softmax",),
    ),
    Family(
        key="gemma4",
        title="Gemma 4 (31B's kind)",
        page="modern/llama4-smollm3-gemma4.md",
        tiny=dict(  # full layers: keys as values, one key/value head twice as wide
            model_type="gemma4_text", **SMALL, num_hidden_layers=3,
            sliding_window=WINDOW,
            global_head_dim=32, attention_k_eq_v=True, num_global_key_value_heads=1,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            hidden_size_per_layer_input=0,
        ),
        mechanisms={
            "window": Change(config=dict(sliding_window=64), layers=SLIDING),
            "keys as values": Change(edit=own_values("*layers.2.self_attn", 32),
                                     layers=(2,)),
            "proportional angles": Change(
                config=dict(rope_parameters=dict(
                    full_attention=dict(rope_type="default", rope_theta=1000000.0),
                    sliding_attention=dict(rope_type="default", rope_theta=10000.0),
                )),
                layers=FULL),
            "value norm": Change(edit=replace("*self_attn.v_norm")),
        },
        published={
            "Gemma 4 31B": (
                "google/gemma-4-31B-it/config.json (text_config), as copied by others",
                dict(
                    model_type="gemma4",
                    text_config=dict(
                        model_type="gemma4_text",
                        hidden_size=5376,
                        num_hidden_layers=60,
                        num_attention_heads=32,
                        num_key_value_heads=16,
                        num_global_key_value_heads=4,
                        head_dim=256,
                        global_head_dim=512,
                        attention_k_eq_v=True,
                        num_kv_shared_layers=0,
                        sliding_window=1024,
                        max_position_embeddings=262144,
                        layer_types=(
                            ["sliding_attention"] * 5 + ["full_attention"]) * 10,
                        rope_parameters=GEMMA4_ROPE,
                        rms_norm_eps=1e-06,
                        attention_bias=False,
                    ),
                ),
            ),
        },
        tables=("softmax",),
    ),
    Family(
        key="gemma4_e2b",
        title="Gemma 4 (E2B's kind)",
        page="modern/llama4-smollm3-gemma4.md",
        tiny=dict(  # the last three layers reuse the keys and values of layers 1 and 2
            model_type="gemma4_text", **SMALL, num_hidden_layers=6,
            sliding_window=WINDOW,
            global_head_dim=32, num_kv_shared_layers=3, hidden_size_per_layer_input=8,
            vocab_size_per_layer_input=VOCAB,
            layer_types=["sliding_attention", "sliding_attention",
                         "full_attention"] * 2,
        ),
        mechanisms={
            "window": Change(config=dict(sliding_window=64), layers=SLIDING),
            "shared keys and values": Change(  # the sources' keys move the readers
                edit=fill("*layers.[12].self_attn.k_proj.weight", 0.01),
                layers=(3, 4, 5)),
        },
        published={
            "Gemma 4 E2B": (
                "google/gemma-4-E2B-it/config.json (text_config), as copied by others",
                dict(
                    model_type="gemma4",
                    text_config=dict(
                        model_type="gemma4_text",
                        hidden_size=1536,
                        num_hidden_layers=35,
                        num_attention_heads=8,
                        num_key_value_heads=1,
                        num_global_key_value_heads=None,
                        head_dim=256,
                        global_head_dim=512,
                        attention_k_eq_v=False,
                        num_kv_shared_layers=20,
                        sliding_window=512,
                        max_position_embeddings=131072,
                        layer_types=(
                            ["sliding_attention"] * 4 + ["full_attention"]) * 7,
                        rope_parameters=GEMMA4_ROPE,
                        rms_norm_eps=1e-06,
                        attention_bias=False,
                    ),
                ),
            ),
        },
        tables=("softmax",),
    ),
    Family(
        key="qwen3_5",
        title="Qwen3.5",
        page="modern/linear-attention.md",
        tiny=dict(model_type="qwen3_5_text", **SMALL, **LINEAR, num_hidden_layers=4),
        mechanisms={
            "output gate": Change(edit=open_output_gate(SMALL["head_dim"]),
                                  layers=FULL),
            "short convolution": Change(edit=identity_conv, layers=LINEAR_LAYERS),
            "decay": Change(edit=fill("*linear_attn.A_log", -30.0),
                            layers=LINEAR_LAYERS),
        },
        published={
            "Qwen3.5 9B": (
                "Qwen/Qwen3.5-9B/config.json (text_config)",
                dict(
                    model_type="qwen3_5",
                    text_config=dict(
                        model_type="qwen3_5_text",
                        hidden_size=4096,
                        num_hidden_layers=32,
                        num_attention_heads=16,
                        num_key_value_heads=4,
                        head_dim=256,
                        max_position_embeddings=262144,
                        full_attention_interval=4,
                        layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 8,
                        rms_norm_eps=1e-6,
                        hidden_act="silu",
                        linear_num_key_heads=16,
                        linear_num_value_heads=32,
                        linear_key_head_dim=128,
                        linear_value_head_dim=128,
                        linear_conv_kernel_dim=4,
                        rope_parameters=dict(
                            rope_type="default", rope_theta=10000000,
                            partial_rotary_factor=0.25, mrope_interleaved=True,
                            mrope_section=[11, 11, 10],
                        ),
                    ),
                ),
            ),
        },
        init=ONE_PLUS_W_NORMS,
        tables=("hybrid",),
    ),
    Family(
        key="kimi_linear",
        title="Kimi Linear",
        page="modern/linear-attention.md",
        tiny=dict(  # KDA, latent, KDA: as Kimi Linear mixes them
            model_type="kimi_linear", hidden_size=32, num_attention_heads=4,
            num_key_value_heads=4, num_hidden_layers=3, intermediate_size=64,
            vocab_size=VOCAB, linear_num_heads=4, linear_head_dim=8, kv_lora_rank=16,
            qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, **MOE,
            model_max_length=64, pad_token_id=None, bos_token_id=None,
            eos_token_id=None,
            layer_types=["linear_attention", "full_attention", "linear_attention"],
        ),
        mechanisms={
            "short convolution": Change(edit=identity_conv, layers=LINEAR_LAYERS),
            "decay": Change(edit=fill("*A_log", -30.0), layers=LINEAR_LAYERS),
        },
        published={
            "Kimi Linear 48B-A3B": (
                "moonshotai/Kimi-Linear-48B-A3B-Instruct/config.json",
                dict(
                    model_type="kimi_linear",
                    hidden_size=2304,
                    num_hidden_layers=27,
                    num_attention_heads=32,
                    num_key_value_heads=32,
                    kv_lora_rank=512,
                    q_lora_rank=None,
                    qk_nope_head_dim=128,
                    qk_rope_head_dim=64,
                    v_head_dim=128,
                    mla_use_nope=True,
                    model_max_length=1048576,
                    rms_norm_eps=1e-5,
                    hidden_act="silu",
                    linear_attn_config=dict(
                        full_attn_layers=[4, 8, 12, 16, 20, 24, 27],
                        kda_layers=[1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19,
                                    21, 22, 23, 25, 26],
                        head_dim=128,
                        num_heads=32,
                        short_conv_kernel_size=4,
                    ),
                ),
            ),
        },
        tables=("hybrid",),
    ),
    Family(
        key="deepseek_v3",
        title="DeepSeek-V3",
        page="modern/latent-attention.md",
        tiny=dict(model_type="deepseek_v3", **LATENT, num_hidden_layers=2,
                  q_lora_rank=24, rope_parameters=DEEPSEEK_YARN),
        mechanisms={
            "YaRN angles and mscale": Change(config=dict(rope_parameters=dict(
                rope_type="default", rope_theta=10000.0))),
        },
        variants={"no query bottleneck": Change(config=dict(q_lora_rank=None))},
        published={
            "DeepSeek-V3": (
                "deepseek-ai/DeepSeek-V3/config.json",
                dict(
                    model_type="deepseek_v3",
                    hidden_size=7168,
                    num_hidden_layers=61,
                    num_attention_heads=128,
                    num_key_value_heads=128,
                    q_lora_rank=1536,
                    kv_lora_rank=512,
                    qk_nope_head_dim=128,
                    qk_rope_head_dim=64,
                    v_head_dim=128,
                    max_position_embeddings=163840,
                    rope_theta=10000,
                    rope_scaling={
                        "beta_fast": 32,
                        "beta_slow": 1,
                        "factor": 40,
                        "mscale": 1.0,
                        "mscale_all_dim": 1.0,
                        "original_max_position_embeddings": 4096,
                        "type": "yarn",
                    },
                    rms_norm_eps=1e-06,
                    attention_bias=False,
                ),
            ),
        },
        tables=("latent",),
    ),
    Family(
        key="deepseek_v32",
        title="DeepSeek-V3.2",
        page="modern/sparse-attention.md",
        tiny=dict(  # the indexer keeps 4 of 12 tokens; 16 heads: no ReLU ties at 0
            model_type="deepseek_v32", **LATENT, num_hidden_layers=2, q_lora_rank=24,
            index_n_heads=16, index_head_dim=8, index_topk=4,
            rope_parameters=DEEPSEEK_YARN,
        ),
        mechanisms={"top-k": Change(config=dict(index_topk=64))},
        variants={  # every index score 0: the choice is torch.topk's tie-breaking
            "every index score tied at 0": Change(
                edit=fill("*indexer.weights_proj.weight", 0.0), ties=True),
        },
        published={
            "DeepSeek-V3.2": (
                "deepseek-ai/DeepSeek-V3.2/config.json",
                dict(
                    model_type="deepseek_v32",
                    hidden_size=7168,
                    num_hidden_layers=61,
                    num_attention_heads=128,
                    q_lora_rank=1536,
                    kv_lora_rank=512,
                    qk_nope_head_dim=128,
                    qk_rope_head_dim=64,
                    v_head_dim=128,
                    index_n_heads=64,
                    index_head_dim=128,
                    index_topk=2048,
                    max_position_embeddings=163840,
                ),
            ),
        },
        tables=("latent",),
    ),
    Family(
        key="glm5",
        title="GLM-5",
        page="modern/sparse-attention.md",
        tiny=dict(  # layer 1 reuses layer 0's top-k; 16 indexer heads: no ReLU ties
            model_type="glm_moe_dsa", **SMALL_2026, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=4, n_routed_experts=2,
            num_experts_per_tok=1, moe_intermediate_size=16, first_k_dense_replace=3,
            q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
            v_head_dim=8, index_topk=4, index_head_dim=16, index_n_heads=16,
            indexer_types=["full", "shared", "full"],
        ),
        mechanisms={
            "top-k": Change(config=dict(index_topk=64), layers=(0, 2)),
            "shared top-k": Change(patch=switches.glm_dense_shared_layers, layers=(1,)),
            "indexer's neighbour pairs": Change(patch=switches.glm_indexer_halves,
                                                layers=(0, 2)),
        },
        published={
            "GLM-5.3": (
                "zai-org/GLM-5.3/config.json, as copied by others "
                "(TorchMoE/MoE-Infinity tests/fixtures/glm_5_3/config.json)",
                dict(
                    model_type="glm_moe_dsa", hidden_size=6144, num_hidden_layers=78,
                    num_attention_heads=64, num_key_value_heads=64, q_lora_rank=2048,
                    kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64,
                    v_head_dim=256, head_dim=192, index_topk=2048, index_n_heads=32,
                    index_head_dim=128, index_topk_freq=4, index_skip_topk_offset=3,
                    index_topk_pattern=None, indexer_rope_interleave=True,
                    indexer_types=["full"] * 3
                    + ["shared", "shared", "shared", "full"] * 18 + ["shared"] * 3,
                    max_position_embeddings=1048576, rms_norm_eps=1e-5,
                    rope_interleave=True,
                    rope_parameters={"rope_theta": 8000000, "rope_type": "default"},
                    attention_bias=False, attention_dropout=0.0,
                ),
            ),
        },
    ),
    Family(
        key="minimax_m3",
        title="MiniMax-M3",
        page="modern/sparse-attention.md",
        tiny=dict(  # blocks of 3 keys, the top 2 and the local one
            model_type="minimax_m3_vl_text", **SMALL_2026, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, num_local_experts=2,
            num_experts_per_tok=1, dense_intermediate_size=32,
            shared_intermediate_size=16, head_dim=16, index_head_dim=16,
            index_n_heads=2,
            index_block_size=3, index_topk_blocks=2, index_local_blocks=1,
            layer_types=["full_attention", "minimax_m3_sparse", "minimax_m3_sparse"],
            rope_parameters=M3_ROPE,
        ),
        mechanisms={
            "top blocks": Change(config=dict(index_topk_blocks=64), layers=(1, 2)),
            "local block": Change(config=dict(index_local_blocks=0), layers=(1, 2)),
            "half of each head turned": Change(
                config=dict(rope_parameters={**M3_ROPE, "partial_rotary_factor": 1.0})),
        },
        # transformers counts key blocks from the batch's first slot and lets padding
        # keys score (modeling_minimax_m3_vl.py:511 says so in a TODO)
        padded_rows="prompt alone",
        published={
            "MiniMax-M3": (
                "MiniMaxAI/MiniMax-M3/config.json, as copied by others (its "
                "text_config as a test copies it from nvidia/MiniMax-M3-NVFP4; its "
                "sparse_attention_config as ports' tests copy it)",
                dict(
                    model_type="minimax_m3_vl", text_config=dict(
                        model_type="minimax_m3", hidden_size=6144, num_hidden_layers=60,
                        num_attention_heads=64, num_key_value_heads=4, head_dim=128,
                        max_position_embeddings=1048576, rms_norm_eps=1e-6,
                        use_gemma_norm=True, rope_theta=5000000, rotary_dim=64,
                        partial_rotary_factor=0.5, use_qk_norm=True,
                        sparse_attention_config=dict(
                            use_sparse_attention=True, sparse_index_dim=128,
                            sparse_num_index_heads=4, sparse_topk_blocks=16,
                            sparse_block_size=128, sparse_score_type="max",
                            sparse_init_block=0, sparse_local_block=1,
                            sparse_attention_freq=[0, 0, 0] + [1] * 57),
                    ),
                ),
            ),
        },
    ),
    Family(
        key="mistral4",
        title="Mistral 4",
        page="modern/latent-attention.md",
        tiny=dict(  # query scaling grows every 4 positions
            model_type="mistral4", **SMALL_2026, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, n_routed_experts=2,
            num_experts_per_tok=1, moe_intermediate_size=16, q_lora_rank=24,
            kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
            rope_parameters=MISTRAL4_ROPE,
        ),
        mechanisms={
            "position-dependent query scaling": Change(config=dict(
                rope_parameters={**MISTRAL4_ROPE, "llama_4_scaling_beta": 0.0})),
            "neighbour pairs": Change(config=dict(rope_interleave=False)),
        },
        model_class="Mistral4ForCausalLM",  # transformers' Auto classes have none
        positions="from first real token",  # the query scale reads position_ids
        published={
            "Mistral Small 4": (
                "mistralai/Mistral-Small-4-119B-2603/config.json (text_config), as "
                "copied by others (its YaRN and llama_4_scaling_beta as a converter "
                "writes them for it); transformers' Mistral4Config defaults name this "
                "checkpoint",
                dict(
                    model_type="mistral3", text_config=dict(
                        model_type="mistral4", hidden_size=4096, num_hidden_layers=36,
                        num_attention_heads=32, num_key_value_heads=32, head_dim=128,
                        q_lora_rank=1024, kv_lora_rank=256, qk_nope_head_dim=64,
                        qk_rope_head_dim=64, v_head_dim=128,
                        max_position_embeddings=1048576, rms_norm_eps=1e-6,
                        rope_interleave=True,
                        rope_parameters=dict(
                            type="yarn", rope_type="yarn", rope_theta=10000.0,
                            factor=128.0, original_max_position_embeddings=8192,
                            beta_fast=32.0, beta_slow=1.0, mscale=1.0,
                            mscale_all_dim=1.0, llama_4_scaling_beta=0.1),
                    ),
                ),
            ),
        },
    ),
    Family(
        key="mimo_v2_flash",
        title="MiMo-V2-Flash",
        page="modern/open-families.md",
        tiny=dict(  # a full layer, then a sliding one with twice the key/value heads
            model_type="mimo_v2_flash", **SMALL_2026, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, n_routed_experts=2,
            num_experts_per_tok=1, moe_intermediate_size=16, head_dim=12, v_head_dim=8,
            sliding_window=4, attention_value_scale=0.707,
            layer_types=["full_attention", "sliding_attention"],
            rope_parameters=MIMO_ROPE,
        ),
        mechanisms={
            "window": Change(config=dict(sliding_window=64), layers=SLIDING),
            "sinks": Change(edit=fill("*self_attn.sinks", -1e4), layers=SLIDING),
            "value scale": Change(config=dict(attention_value_scale=1.0)),
            "a third of each head turned": Change(config=dict(rope_parameters={
                kind: {**params, "partial_rotary_factor": 1.0}
                for kind, params in MIMO_ROPE.items()})),
            "twice the key/value heads": Change(edit=switches.tie_kv_pairs(1),
                                                layers=SLIDING),
        },
        published={
            "MiMo-V2-Flash": (
                "XiaomiMiMo/MiMo-V2-Flash/config.json, as copied by others (a port's "
                "mimo_v2_flash_hub_config test)",
                dict(
                    model_type="mimo_v2_flash", hidden_size=4096, num_hidden_layers=48,
                    num_attention_heads=64, num_key_value_heads=4, head_dim=192,
                    v_head_dim=128, swa_num_attention_heads=64,
                    swa_num_key_value_heads=8,
                    swa_head_dim=192, swa_v_head_dim=128, partial_rotary_factor=0.334,
                    rope_theta=5000000, swa_rope_theta=10000, sliding_window=128,
                    sliding_window_size=128,
                    hybrid_layer_pattern=[int(not (i == 0 or (i + 1) % 6 == 0))
                                          for i in range(48)],
                    add_swa_attention_sink_bias=True,
                    add_full_attention_sink_bias=False,
                    attention_value_scale=0.707, max_position_embeddings=262144,
                ),
            ),
        },
    ),
    Family(
        key="laguna",
        title="Laguna",
        page="modern/open-families.md",
        tiny=dict(  # four heads, then six; a gate per head
            model_type="laguna", **SMALL_2026, num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2, num_experts=2, num_experts_per_tok=1,
            moe_intermediate_size=16, shared_expert_intermediate_size=16, head_dim=8,
            sliding_window=4, layer_types=["full_attention", "sliding_attention"],
            num_attention_heads_per_layer=[4, 6], gating=True,
            rope_parameters=LAGUNA_ROPE,
        ),
        mechanisms={
            "softplus gate": Change(patch=switches.softplus_gate_open),
            "a head count per layer": Change(edit=switches.drop_heads_beyond(1, 4),
                                             layers=(1,)),
            "window": Change(config=dict(sliding_window=64), layers=SLIDING),
            "half of each head turned": Change(config=dict(rope_parameters={
                **LAGUNA_ROPE, "full_attention": {**LAGUNA_ROPE["full_attention"],
                                                  "partial_rotary_factor": 1.0}}),
                layers=FULL),
            "YaRN attention factor": Change(config=dict(rope_parameters={
                **LAGUNA_ROPE, "full_attention": {**LAGUNA_ROPE["full_attention"],
                                                  "attention_factor": 1.0}}),
                layers=FULL),
        },
        variants={  # the other gating of Laguna's config: one gate per number
            "a gate per element": Change(config=dict(gating="per-element")),
        },
        published={
            "Laguna XS.2.1": (
                "poolside/Laguna-XS-2.1/config.json, as copied by others (a loader's "
                "tests, trimmed to 8 of its 40 layers)",
                dict(
                    model_type="laguna", hidden_size=2048, num_hidden_layers=8,
                    num_attention_heads=48,
                    num_attention_heads_per_layer=[48, 64, 64, 64, 48, 64, 64, 64],
                    num_key_value_heads=8, head_dim=128, max_position_embeddings=262144,
                    rms_norm_eps=1e-6, sliding_window=512, gating="per-head",
                    layer_types=["full_attention"] + ["sliding_attention"] * 3
                    + ["full_attention"] + ["sliding_attention"] * 3,
                    rope_parameters={
                        "full_attention": dict(
                            rope_theta=500000.0, rope_type="yarn", factor=32.0,
                            original_max_position_embeddings=8192, beta_slow=1.0,
                            beta_fast=64.0, attention_factor=1.3465735902799727,
                            partial_rotary_factor=0.5),
                        "sliding_attention": dict(
                            rope_type="default", rope_theta=10000.0,
                            partial_rotary_factor=1.0)},
                ),
            ),
        },
    ),
    Family(
        key="deepseek_v4",
        title="DeepSeek-V4",
        page="modern/compressed-attention.md",
        tiny=dict(  # a sliding, a CSA and an HCA layer: window 6, entries of 4 and 8
            model_type="deepseek_v4", vocab_size=VOCAB, hidden_size=64,
            num_hidden_layers=3, num_attention_heads=4, head_dim=32,
            partial_rotary_factor=0.25, q_lora_rank=32, o_groups=2, o_lora_rank=16,
            sliding_window=6,
            layer_types=["sliding_attention", "compressed_sparse_attention",
                         "heavily_compressed_attention"],
            compress_rates={"compressed_sparse_attention": 4,
                            "heavily_compressed_attention": 8},
            index_n_heads=8, index_head_dim=16, index_topk=2, n_routed_experts=2,
            num_experts_per_tok=1, moe_intermediate_size=32, hc_mult=2,
            max_position_embeddings=64,
            rope_parameters={"rope_type": "yarn", "factor": 4.0,
                             "original_max_position_embeddings": 16},
        ),
        mechanisms={
            "window": Change(config=dict(sliding_window=64)),
            "compressed entries (CSA)": Change(
                patch=lambda m: switches.without_entries(m, CSA_KIND),
                layers=(CSA_KIND,)),
            "compressed entries (HCA)": Change(
                patch=lambda m: switches.without_entries(m, HCA_KIND),
                layers=(HCA_KIND,)),
            "compression rate (CSA)": Change(
                patch=lambda m: switches.halved_rate(m, CSA_KIND), layers=(CSA_KIND,)),
            "compression rate (HCA)": Change(
                patch=lambda m: switches.halved_rate(m, HCA_KIND), layers=(HCA_KIND,)),
            "overlapping windows": Change(patch=switches.no_overlap,
                                          layers=(CSA_KIND,)),
            "top-k": Change(config=dict(index_topk=64), layers=(CSA_KIND,)),
            "sinks": Change(patch=switches.no_sinks),
            "the output turned back": Change(patch=switches.no_unrotation),
            "YaRN table of compressed layers": Change(
                config=dict(rope_parameters={"rope_type": "default"}),
                layers=(CSA_KIND, HCA_KIND)),
        },
        # transformers' compressors pool every slot, padding included, in windows
        # counted from the row's first slot (modeling_deepseek_v4.py:418, 534, 650)
        padded_rows="prompt alone",
        published={
            "DeepSeek-V4-Flash": (
                "deepseek-ai/DeepSeek-V4-Flash/config.json, as copied by others",
                dict(
                    model_type="deepseek_v4", hidden_size=4096, num_hidden_layers=43,
                    num_attention_heads=64, num_key_value_heads=1, head_dim=512,
                    q_lora_rank=1024, qk_rope_head_dim=64, o_groups=8, o_lora_rank=1024,
                    sliding_window=128, compress_ratios=[0, 0] + [4, 128] * 20 + [4, 0],
                    index_n_heads=64, index_head_dim=128, index_topk=512,
                    rope_theta=10000, compress_rope_theta=160000, rope_scaling=V4_YARN,
                    max_position_embeddings=1048576, rms_norm_eps=1e-06,
                    attention_bias=False,
                ),
            ),
            "DeepSeek-V4-Pro": (
                "deepseek-ai/DeepSeek-V4-Pro/config.json, as copied by others",
                dict(
                    model_type="deepseek_v4", hidden_size=7168, num_hidden_layers=61,
                    num_attention_heads=128, num_key_value_heads=1, head_dim=512,
                    q_lora_rank=1536, qk_rope_head_dim=64, o_groups=16,
                    o_lora_rank=1024,
                    sliding_window=128,
                    compress_ratios=[128, 128] + [4, 128] * 29 + [4, 0],
                    index_n_heads=64, index_head_dim=128, index_topk=1024,
                    rope_theta=10000, compress_rope_theta=160000, rope_scaling=V4_YARN,
                    max_position_embeddings=1048576, rms_norm_eps=1e-06,
                    attention_bias=False,
                ),
            ),
        },
    ),
    Family(
        key="nemotron_h",
        title="Nemotron-H",
        page="modern/mamba2.md",
        tiny=dict(  # Mamba-2, attention, an MLP block (no token mixer), Mamba-2
            model_type="nemotron_h", **HYBRID_SMALL,
            layers_block_type=["linear_attention", "full_attention", "mlp",
                               "linear_attention"],
            head_dim=16, mamba_num_heads=8, mamba_head_dim=8, ssm_state_size=16,
            n_groups=2, conv_kernel=4, chunk_size=8, mlp_hidden_act="relu2",
        ),
        mechanisms=_mamba2(LINEAR_LAYERS),
        init=SLOW_DECAY,
        published={
            "Nemotron 3 Nano (as a test fixture copies it)": (
                "a Nemotron 3 Nano-shaped config.json, as copied by others "
                "(NVIDIA-NeMo/Megatron-Bridge, tests/unit_tests/models/nemotronh/"
                "test_nemotron_h_bridge.py: a test fixture, not necessarily the file)",
                dict(
                    model_type="nemotron_h", hidden_size=2688, num_hidden_layers=52,
                    hybrid_override_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*"
                    "EMEMEMEM*EMEMEMEME",
                    num_attention_heads=32, num_key_value_heads=2,
                    attention_head_dim=128, mamba_num_heads=64, mamba_head_dim=64,
                    n_groups=8, ssm_state_size=128,
                    conv_kernel=4, chunk_size=128, expand=2, use_conv_bias=True,
                    mamba_proj_bias=False, use_bias=False, mamba_hidden_act="silu",
                    layer_norm_epsilon=1e-5, max_position_embeddings=8192,
                ),
            ),
        },
    ),
    Family(
        key="granite4",
        title="Granite 4.0 hybrid",
        page="modern/mamba2.md",
        tiny=dict(model_type="granitemoehybrid", **HYBRID_SMALL, **MAMBA_SIZES,
                  num_hidden_layers=3, layer_types=["mamba", "attention", "mamba"],
                  mamba_d_head=16, num_local_experts=0, attention_multiplier=0.3,
                  position_embedding_type="rope"),
        mechanisms={
            **_mamba2(LINEAR_LAYERS),
            "attention_multiplier": Change(
                patch=switches.patched(switches.plain_attention_scale), layers=FULL),
            "rotary": Change(patch=switches.patched(switches.no_rotary), layers=FULL),
        },
        init=SLOW_DECAY,
    ),
    Family(
        key="falcon_h1",
        title="Falcon-H1",
        page="modern/mamba2.md",
        tiny=dict(  # both mixers side by side in every layer
            model_type="falcon_h1", **HYBRID_SMALL, **MAMBA_SIZES, num_hidden_layers=2,
            head_dim=8, mamba_d_ssm=64, mamba_d_head=8, mamba_rms_norm=True,
            key_multiplier=0.7, ssm_multipliers=[0.8, 1.2, 0.9, 1.1, 1.3],
            ssm_in_multiplier=1.1,
        ),
        mechanisms={
            **_mamba2(("mamba",)),
            "muP vector": Change(patch=switches.patched(switches.no_mup_vector),
                                 layers=("mamba",)),
            "ssm_in_multiplier": Change(
                patch=switches.patched(switches.no_ssm_in_multiplier),
                layers=("mamba",)),
            "key_multiplier": Change(patch=switches.patched(switches.no_key_multiplier),
                                     layers=("self_attn",)),
        },
        init=SLOW_DECAY,
        published={
            "Falcon-H1 0.5B": (
                "tiiuae/Falcon-H1-0.5B config.json, as copied by others "
                "(NVIDIA-NeMo/Megatron-Bridge, tests/unit_tests/models/falcon_h1/"
                "test_falcon_h1_bridge.py, FALCON_H1_500M_CONFIG)",
                dict(
                    model_type="falcon_h1", hidden_size=1024, num_hidden_layers=36,
                    num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                    key_multiplier=0.39062499999999994, attention_in_multiplier=1.0,
                    attention_out_multiplier=0.9375, mamba_chunk_size=128,
                    mamba_conv_bias=True, mamba_d_conv=4, mamba_d_head=64,
                    mamba_d_state=128, mamba_expand=2, mamba_n_groups=1,
                    mamba_n_heads=24,
                    mamba_norm_before_gate=False, mamba_proj_bias=False,
                    mamba_rms_norm=False, max_position_embeddings=16384,
                    projectors_bias=False, rms_norm_eps=1e-5, rope_theta=1e11,
                    ssm_in_multiplier=1.25,
                    ssm_multipliers=[0.3535533905932738, 0.25, 0.3535533905932738, 0.5,
                                     0.3535533905932738],
                    ssm_out_multiplier=0.23570226039551587,
                ),
            ),
        },
    ),
    Family(
        key="bamba",
        title="Bamba",
        page="modern/mamba2.md",
        tiny=dict(model_type="bamba", **HYBRID_SMALL, **MAMBA_SIZES,
                  num_hidden_layers=3, attn_layer_indices=[1], mamba_d_head=16),
        mechanisms={
            **_mamba2(LINEAR_LAYERS),
            "half of each head turned": Change(
                patch=switches.patched(switches.full_rotary), layers=FULL),
        },
        init=SLOW_DECAY,
        positions="slots, passed",  # decoding, its model puts every new token at 0
    ),
    Family(
        key="olmo_hybrid",
        title="OLMo-Hybrid",
        page="modern/mamba2.md",
        tiny=dict(model_type="olmo_hybrid", **HYBRID_SMALL, num_hidden_layers=4,
                  linear_num_key_heads=2, linear_num_value_heads=4,
                  linear_key_head_dim=8, linear_value_head_dim=16),
        mechanisms={
            "state": Change(patch=switches.patched(switches.no_state),
                            layers=LINEAR_LAYERS),
            "decay": Change(patch=switches.patched(switches.no_decay),
                            layers=LINEAR_LAYERS),
            "short convolution": Change(patch=switches.patched(switches.no_conv),
                                        layers=LINEAR_LAYERS),
            "gate": Change(patch=switches.patched(switches.no_gdn_gate),
                           layers=LINEAR_LAYERS),
            "groups of keys": Change(patch=switches.patched(switches.no_key_groups),
                                     layers=LINEAR_LAYERS),
            "doubled beta": Change(patch=switches.patched(switches.beta_once),
                                   layers=LINEAR_LAYERS),
            "QK-norm across heads": Change(
                patch=switches.patched(switches.qk_norm_per_head), layers=FULL),
            "rotary": Change(patch=switches.patched(switches.no_rotary), layers=FULL),
        },
        init=SLOW_DECAY,
    ),
]

FAMILIES = {family.key: family for family in _FAMILIES}


def published(table: str) -> dict:
    """Model name -> (source, config.json fields), of the families in ``table``
    (``"softmax"``, ``"latent"`` or ``"hybrid"``), in the table's order."""
    return {
        name: entry
        for family in _FAMILIES if table in family.tables
        for name, entry in family.published.items()
    }


def published_model(name: str) -> tuple[str, dict]:
    """(source, config.json fields) of the published model ``name``, any family."""
    for family in _FAMILIES:
        if name in family.published:
            return family.published[name]
    raise KeyError(f"no family publishes {name!r}")


# The views the pages read, derived from the table: nothing is typed twice
PUBLISHED = published("softmax")
LATENT_PUBLISHED = published("latent")
HYBRIDS = published("hybrid")
DEEPSEEK_V3 = published_model("DeepSeek-V3")
DEEPSEEK_V32 = published_model("DeepSeek-V3.2")
