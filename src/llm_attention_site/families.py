# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The attention settings of the 2026 open families, as published, and what follows.

``PUBLISHED`` holds, for one model of each family, the fields of its ``config.json``
that its attention reads, copied from the file named beside it (on the Hugging Face
Hub; the values are the published ones, the field names those of the file). Gemma 4's
were read from copies of Google's files that others published in their own
repositories (several, which agree), not from Google's files themselves: the source
says so.
``family_row`` reads each through ``hf_config.modern_attention_options``, layer by
layer, the way ``ModernAttention.from_hf_config`` does, and derives what the combined
page's table shows: nothing in it is typed by hand. ``latent_row`` does the same for
the latent-attention families (DeepSeek-V3, and V3.2 with its indexer's keys). Not a
model module.
"""

from __future__ import annotations

import math

from llm_attention.hf_config import (
    config_dict,
    kv_source_layer,
    layer_type,
    modern_attention_options,
)

ATTENTION_KINDS = ("full_attention", "sliding_attention", "chunked_attention")

LLAMA31_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}

# name -> (source, the config.json fields attention reads)
PUBLISHED = {
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
}

GEMMA4_ROPE = {  # Gemma 4's rotary: each kind of layer its own
    "full_attention": {
        "partial_rotary_factor": 0.25,
        "rope_theta": 1000000.0,
        "rope_type": "proportional",
    },
    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
}

PUBLISHED.update({
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
                layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 10,
                rope_parameters=GEMMA4_ROPE,
                rms_norm_eps=1e-06,
                attention_bias=False,
            ),
        ),
    ),
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
                layer_types=(["sliding_attention"] * 4 + ["full_attention"]) * 7,
                rope_parameters=GEMMA4_ROPE,
                rms_norm_eps=1e-06,
                attention_bias=False,
            ),
        ),
    ),
})

BYTES_PER_NUMBER = 2  # bfloat16, as most of these checkpoints are published

# Latent attention (latent.py): the fields of DeepSeek-V3's config.json it reads
DEEPSEEK_V3 = (
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
)


# DeepSeek sparse attention: the fields of DeepSeek-V3.2's config.json that the cache
# reads (the latent and rotary key of latent attention, and the indexer's key)
DEEPSEEK_V32 = (
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
)
LATENT_PUBLISHED = {"DeepSeek-V3": DEEPSEEK_V3, "DeepSeek-V3.2": DEEPSEEK_V32}


def latent_row(name: str) -> dict:
    """What one token leaves in the cache of a latent-attention model: per layer, the
    latent (``kv_lora_rank``) and the rotary key shared by every head
    (``qk_rope_head_dim``); with DeepSeek sparse attention, the indexer's key too
    (``index_head_dim``), so that later tokens can score this one."""
    source, values = LATENT_PUBLISHED[name]
    latent = values["kv_lora_rank"] + values["qk_rope_head_dim"]  # numbers per layer
    indexer = values.get("index_head_dim", 0)  # numbers per layer (V3.2 only)
    layers = values["num_hidden_layers"]
    return dict(
        name=name, source=source, layers=layers,
        num_heads=values["num_attention_heads"],
        latent_numbers=latent, indexer_numbers=indexer,
        top_k=values.get("index_topk"),
        bytes_per_token=(latent + indexer) * layers * BYTES_PER_NUMBER,
    )


# The hybrids (linear_attention.py): the fields of their config.json that their layers
# read, linear and full. Qwen3.5's file wraps them in text_config (as Gemma 3's does).
HYBRIDS = {
    "Qwen3-Next 80B-A3B": PUBLISHED["Qwen3-Next 80B-A3B"],
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
}


def hybrid_memory(name: str) -> tuple[int, int, int, int]:
    """What one sequence keeps in a hybrid of ``HYBRIDS``: ``(full layers, bytes of
    their caches per token, linear layers, bytes of each one's state)``, weighed with
    the layers' own caches (``make_cache(1).nbytes``, built on the ``meta`` device),
    bfloat16 but for the linear layers' state, which is float32."""
    import torch

    from llm_attention.hf_layers import layer_from_hf

    config = HYBRIDS[name][1]
    count = config_dict(config)["num_hidden_layers"]
    kinds = [layer_type(config_dict(config), i) for i in range(count)]
    with torch.device("meta"):  # shapes only: nothing allocated
        full = layer_from_hf(config, kinds.index("full_attention"), context_length=1)
        linear = layer_from_hf(config, kinds.index("linear_attention"))
        per_token = full.to(torch.bfloat16).make_cache(1).nbytes  # room for one token
        state = linear.to(torch.bfloat16).make_cache(1).nbytes
    full_count = kinds.count("full_attention")
    return full_count, per_token, kinds.count("linear_attention"), state


def ideas(options: dict) -> list[str]:
    """The options of a layer that differ from plain grouped-query attention."""
    found = []
    turns = not options.get("nope")  # a layer without positions has no angles
    rope_type = turns and (options.get("rope_scaling") or {}).get("rope_type")
    partial = options.get("partial_rotary_factor", 1.0) if turns else 1.0
    if rope_type == "proportional":  # a share of the pairs, spread over the head
        found.append(f"proportional angles on {partial:g} of the pairs")
    elif rope_type:
        found.append(f"{rope_type} angles")
    if partial < 1 and rope_type != "proportional":
        found.append(f"{partial:g} of a head turned")
    if options.get("qk_norm"):
        found.append(
            "(1 + w) QK-norm" if options.get("norm_unit_offset") else "QK-norm"
        )
    scale = options.get("scale")
    if scale == 1.0:
        found.append("score scale 1")
    elif scale and not math.isclose(scale, options["head_dim"] ** -0.5):
        found.append("own score scale")  # not 1 / sqrt(d_h), whatever the field says
    if options.get("softcap"):
        found.append(f"soft cap {options['softcap']:g}")
    if options.get("sinks"):
        found.append("sinks")
    if options.get("output_gate"):
        found.append("output gate")
    if options.get("qkv_bias"):
        found.append("biases")
    if options.get("chunk_size"):
        found.append(f"chunks of {options['chunk_size']:,}")
    if options.get("nope"):
        found.append("layers without positions")
    if options.get("temperature_tuning"):
        found.append("temperature tuning")
    if options.get("qk_norm") and options.get("qk_norm_weight") is False:
        found[found.index("QK-norm")] = "QK-norm without weights"
    if options.get("value_norm"):
        found.append("value norm")
    if options.get("values_from_keys"):
        found.append("keys as values")
    if options.get("kv_shared"):
        found.append("shared keys and values")
    return found


def family_row(name: str) -> dict:
    """One model's attention, read layer by layer from its published config.

    The cache per token sums each layer that owns one: a key and a value per key/value
    head (a layer that reuses an earlier layer's keys and values owns none). A local
    layer (a window, or chunks) stops growing at its span, so past it only the full
    layers that own a cache add to it."""
    source, config = PUBLISHED[name]
    values = config_dict(config)
    num_layers = values["num_hidden_layers"]
    kinds = [layer_type(values, i) for i in range(num_layers)]
    attention = [i for i, kind in enumerate(kinds) if kind in ATTENTION_KINDS]
    layers = {i: modern_attention_options(config, i) for i in attention}
    def span_of(i: int) -> int | None:  # the window or the chunk of a local layer
        return layers[i].get("window") or layers[i].get("chunk_size")

    local = [i for i in attention if span_of(i)]
    owners = [i for i in attention if kv_source_layer(values, i) is None]

    def cache_bytes(i: int) -> int:  # K and V of one layer, one token
        return 2 * layers[i]["num_kv_heads"] * layers[i]["head_dim"] * BYTES_PER_NUMBER

    first = layers[attention[0]]
    span = next((span_of(i) for i in local), None)
    shapes = sorted({(o["num_kv_heads"], o["head_dim"]) for o in layers.values()})
    extra = [
        f"full layers {kv} x {d}" for kv, d in shapes
        if (kv, d) != (first["num_kv_heads"], first["head_dim"])
    ]  # other key/value heads on some layers (Gemma 4)
    return dict(
        name=name,
        source=source,
        layers=num_layers,
        attention_layers=len(attention),
        windowed_layers=len(local),
        window=span,
        chunked=any(layers[i].get("chunk_size") for i in local),
        sharing_layers=len(attention) - len(owners),
        num_heads=first["num_heads"],
        num_kv_heads=first["num_kv_heads"],
        head_dim=first["head_dim"],
        rope_types=sorted(
            {
                "none" if o.get("nope") else
                (o["rope_scaling"] or {"rope_type": "default"})["rope_type"]
                for o in layers.values()
            }
        ),
        ideas=sorted({idea for o in layers.values() for idea in ideas(o)} | set(extra)),
        bytes_per_token=sum(cache_bytes(i) for i in owners),
        bytes_per_token_beyond_window=sum(
            cache_bytes(i) for i in owners if i not in local
        ),
        bytes_per_token_unshared=sum(cache_bytes(i) for i in attention),
    )


def stretch_figure(curves: dict, narrow: bool = False):
    """How much each pair's speed is divided by, against its wavelength before the
    stretch: ``curves`` maps a label to ``(wavelengths, divided_by, training_length)``,
    tensors ``(d_rot / 2,)`` and an int."""
    import matplotlib.pyplot as plt

    from . import figures  # noqa: F401  (its ink, swapped in the dark variant)

    colours = ("#1f77b4", "#e8710a", "#2ca02c")
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, ax = plt.subplots(figsize=(4.2, 4.0) if narrow else (7.0, 3.2))
        for (label, (wavelength, divided_by, length)), colour in zip(
            curves.items(), colours
        ):
            ax.plot(
                wavelength,
                divided_by,
                marker="o",
                markersize=3,
                color=colour,
                label=label,
            )
            ax.axvline(length, color=colour, linestyle="--", linewidth=1)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="wavelength before the stretch (positions)",
            ylabel="speed divided by",
            title="Which pairs are stretched, and by how much",
        )
        ticks = [1, 2, 4, 8, 16, 32]
        ax.set_yticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        if narrow:  # below the plot: the phone's plot has no empty corner wide enough
            ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.22))
        else:
            ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
    return fig


def cache_figure(bars: dict, narrow: bool = False):
    """What one token leaves in one layer's cache: ``bars`` maps a label to the numbers
    cached, drawn to one linear scale so that the sizes compare by eye."""
    import matplotlib.pyplot as plt

    from . import figures  # noqa: F401  (its ink, swapped in the dark variant)

    colours = ("#e8710a", "#1f77b4", "#2ca02c")
    labels, sizes = list(bars), list(bars.values())
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, ax = plt.subplots(figsize=(3.7, 2.8) if narrow else (7.0, 2.4))
        ax.barh(range(len(sizes)), sizes, color=colours[: len(sizes)])
        for i, size in enumerate(sizes):
            ax.annotate(f"{size:,}", (size, i), xytext=(4, 0),
                        textcoords="offset points", va="center")
        ax.set_yticks(range(len(labels)), labels=labels)
        ax.invert_yaxis()  # the first label on top
        ax.set_xlim(0, max(sizes) * (1.3 if narrow else 1.18))
        step = 20_000 if narrow else 10_000
        ticks = range(0, int(max(sizes)) + 1, step)
        ax.set_xticks(ticks, labels=[f"{t:,}" for t in ticks])
        ax.set_xlabel("numbers cached per token, per layer")
        ax.spines[["top", "right"]].set_visible(False)
        fig.patch.set_alpha(0)
        fig.tight_layout()
    return fig
