# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The attention settings of the 2026 open families, as published, and what follows.

``PUBLISHED`` holds, for one model of each family, the fields of its ``config.json``
that its attention reads, copied from the file named beside it (on the Hugging Face
Hub; the values are the published ones, the field names those of the file).
``family_rows`` reads each through ``hf_config.modern_attention_options``, layer by
layer, the way ``ModernAttention.from_hf_config`` does, and derives what the combined
page's table shows: nothing in it is typed by hand. Not a model module.
"""

from __future__ import annotations

import math

from llm_attention.hf_config import config_dict, layer_type, modern_attention_options

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
        ),
    ),
}

BYTES_PER_NUMBER = 2  # bfloat16, as the checkpoints are published

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


def ideas(options: dict) -> list[str]:
    """The options of a layer that differ from plain grouped-query attention."""
    found = []
    if options.get("rope_scaling"):
        found.append(f"{options['rope_scaling']['rope_type']} angles")
    if options.get("partial_rotary_factor", 1.0) < 1:
        found.append(f"{options['partial_rotary_factor']:g} of a head turned")
    if options.get("qk_norm"):
        found.append(
            "(1 + w) QK-norm" if options.get("norm_unit_offset") else "QK-norm"
        )
    scale = options.get("scale")
    if scale and not math.isclose(scale, options["head_dim"] ** -0.5):
        found.append("own score scale")  # not 1 / sqrt(d_h), whatever the field says
    if options.get("softcap"):
        found.append(f"soft cap {options['softcap']:g}")
    if options.get("sinks"):
        found.append("sinks")
    if options.get("output_gate"):
        found.append("output gate")
    if options.get("qkv_bias"):
        found.append("biases")
    return found


def family_row(name: str) -> dict:
    """One model's attention, read layer by layer from its published config."""
    source, config = PUBLISHED[name]
    values = config_dict(config)
    num_layers = values["num_hidden_layers"]
    kinds = [layer_type(values, i) for i in range(num_layers)]
    attention = [
        i
        for i, kind in enumerate(kinds)
        if kind in ("full_attention", "sliding_attention")
    ]
    layers = {i: modern_attention_options(config, i) for i in attention}
    windowed = [i for i in attention if layers[i].get("window")]
    first = layers[attention[0]]
    per_layer = (
        2 * first["num_kv_heads"] * first["head_dim"] * BYTES_PER_NUMBER
    )  # K and V
    assert all(
        2 * o["num_kv_heads"] * o["head_dim"] * BYTES_PER_NUMBER == per_layer
        for o in layers.values()
    )  # every attention layer caches the same width
    return dict(
        name=name,
        source=source,
        layers=num_layers,
        attention_layers=len(attention),
        windowed_layers=len(windowed),
        window=layers[windowed[0]]["window"] if windowed else None,
        num_heads=first["num_heads"],
        num_kv_heads=first["num_kv_heads"],
        head_dim=first["head_dim"],
        rope_types=sorted(
            {
                (o["rope_scaling"] or {"rope_type": "default"})["rope_type"]
                for o in layers.values()
            }
        ),
        ideas=sorted({idea for o in layers.values() for idea in ideas(o)}),
        bytes_per_token=per_layer * len(attention),  # every attention layer's K and V
        bytes_per_token_beyond_window=per_layer * (len(attention) - len(windowed)),
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
