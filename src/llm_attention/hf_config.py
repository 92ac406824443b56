# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Read a Hugging Face model config into ``ModernAttention``'s options, for one layer.

``modern_attention_options(config, layer_idx)`` takes a transformers config object or
the dict of a checkpoint's ``config.json`` (old or new field names: ``rope_theta`` and
``rope_scaling``, or ``rope_parameters``) and returns the keyword arguments of
``ModernAttention`` for that layer:

===============  =============================================================
family           what differs from Llama
===============  =============================================================
``llama``        ``rope_scaling`` of type ``llama3`` from Llama 3.1 on
``mistral``      a sliding window on every layer
``qwen2``        biases on the query, key and value projections only
``qwen3``        QK-norm; a window on layers from ``max_window_layers`` if enabled
``gemma2``       score scale, soft cap, windowed and full layers alternating
``gemma3_text``  ``(1 + w)`` QK-norm, five windowed layers per full one, each kind
                 with its own rotary base
``gpt_oss``      sinks, biases, YaRN, windowed and full layers alternating
``qwen3_next``   an output gate, ``(1 + w)`` QK-norm, a quarter of each head turned;
                 three of four layers are linear attention, which this is not
``llama4_text``  three chunked layers with a weightless QK-norm and neighbour-paired
                 rotary, then one full layer without positions, its queries
                 temperature-tuned (``llama4``: its ``text_config``)
``smollm3``      every fourth layer without positions
``gemma4_text``  score scale 1, QK-norm and a weightless norm on values, windowed
                 and full layers (five to one in 31B, four to one in E2B; the
                 last layer full); full layers with wider heads,
                 proportional rotary on a quarter of each head and (some sizes)
                 keys as values; the last layers reuse earlier layers' keys and
                 values (``gemma4``: its ``text_config``)
``qwen3_5_text`` as ``qwen3_next`` (its multimodal rotary angles are plain ones for
                 text: the three position components of a text token are equal)
``mimo_v2_flash`` windowed layers with sinks and twice the key/value heads, full
                 layers (the first and every sixth); values narrower than queries
                 and keys, scaled; a third of each head turned, each kind with its
                 own rotary base
``laguna``       its own head count on each layer, QK-norm, a softplus gate per
                 head (or per element), windowed and full layers with their own
                 rotary sets (half of each full head turned)
``minimax_m3_vl_text``  the full layers of MiniMax-M3: ``(1 + w)`` QK-norm, half
                 of each head turned (``minimax_m3_vl``: its ``text_config``)
``nemotron_h``   no positions, no biases; Mamba-2 and MLP-only blocks between
``granitemoehybrid``  score scale ``attention_multiplier``; rotary only when
                 ``position_embedding_type`` is ``"rope"``; Mamba-2 layers between
``falcon_h1``    keys times ``key_multiplier`` (a score scale); a Mamba-2 layer beside
                 the attention of every layer
``bamba``        rotary on half of each head; Mamba-2 layers between
``olmo_hybrid``  QK-norm over all heads together; no rotary when its ``rope_theta``
                 is null; Gated DeltaNet layers between
===============  =============================================================

``kv_source_layer(config, layer_idx)`` names the earlier layer whose keys and values a
Gemma 4 sharing layer reads (None for a layer with its own).

``latent_attention_options(config, layer_idx)`` does the same for ``LatentAttention``
(``latent.py``) from a DeepSeek-V3 config (``deepseek_v3``), the full layers of Kimi
Linear (``kimi_linear``: latent attention without rotary positions) or Mistral 4
(``mistral4``: queries temperature-tuned by position; Mistral Small 4's ``mistral3``
config through its ``text_config``), and ``sparse_latent_attention_options`` for
``SparseLatentAttention`` (``sparse_latent.py``) from a DeepSeek-V3.2 config
(``deepseek_v32``: the same latent attention, plus the indexer's sizes) or a GLM-5
config (``glm_moe_dsa``: an indexer that pairs neighbours, and layers that reuse an
earlier layer's choice; ``topk_source_layer`` names that layer).

``block_sparse_attention_options(config, layer_idx)`` gives the options of
``BlockSparseAttention`` (``block_sparse.py``) for MiniMax-M3's sparse layers
(``minimax_m3_sparse``).

``compressed_attention_options(config, layer_idx)`` gives the options of
``CompressedAttention`` (``compressed_attention.py``) from a DeepSeek-V4 config
(``deepseek_v4``): sliding, compressed sparse or heavily compressed layers.

``linear_attention_options(config, layer_idx)`` gives the options of
``GatedDeltaNet`` (``qwen3_next``, ``qwen3_5_text``, ``olmo_hybrid``) or
``KimiDeltaAttention`` (``kimi_linear``), in ``linear_attention.py``, for a
linear-attention layer; ``mamba2_options(config, layer_idx)`` those of ``Mamba2``
(``mamba2.py``) for a Mamba-2 layer of ``nemotron_h``, ``granitemoehybrid``,
``falcon_h1`` or ``bamba``.

``mixer_names(config, layer_idx)`` names the token mixers of a decoder layer as
transformers' attributes name them (``"self_attn"``, ``"linear_attn"``, ``"mamba"``,
``"mixer"``): Falcon-H1 has two side by side, ``{"mamba": ..., "self_attn": ...}``;
a Nemotron-H MLP or MoE block has none.

A Qwen3.5 ``config.json`` (``model_type`` ``qwen3_5``) is read through its
``text_config``, as Gemma 3's is.

Anything else (another family, another rope type, bidirectional attention, a layer
that is not attention) raises a ``ValueError`` that names it: never a layer that
silently computes something else.

``rename_weights`` gives a transformers layer's weights our names; the
``from_hf_state_dict`` of ``modern.py`` and ``latent.py`` use it.

Needs only the standard library. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import math

HYBRID_FAMILIES = (  # softmax attention between Mamba-2 or Gated DeltaNet layers
    "nemotron_h", "granitemoehybrid", "falcon_h1", "bamba", "olmo_hybrid",
)
FAMILIES = (
    "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "gpt_oss",
    "qwen3_next", "qwen3_5_text", "llama4_text", "smollm3", "gemma4_text",
    "mimo_v2_flash", "laguna", "minimax_m3_vl_text",
    *HYBRID_FAMILIES,
)
LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")
# older config.json names of the kinds (transformers' _LEGACY_LAYER_TYPE_REMAP), and
# Nemotron-H's pattern letters
LEGACY_LAYER_TYPES = {"mamba": "linear_attention", "attention": "full_attention"}
NEMOTRON_PATTERN = {"M": "linear_attention", "*": "full_attention", "-": "mlp",
                    "E": "moe"}
# multimodal configs whose text model is a family here: model_type -> the text's
TEXT_CONFIGS = {
    "gemma3": "gemma3_text", "llama4": "llama4_text", "gemma4": "gemma4_text",
    "qwen3_5": "qwen3_5_text", "minimax_m3_vl": "minimax_m3_vl_text",
}
# Families whose transformers config sets one rotary set per layer kind when the config
# gives none, and reads no top-level rope_theta: their defaults.
KIND_ROPE_DEFAULTS = {
    "mimo_v2_flash": {
        "full_attention": {"rope_theta": 5_000_000.0, "partial_rotary_factor": 0.334},
        "sliding_attention": {"rope_theta": 10_000.0, "partial_rotary_factor": 0.334},
    },
    "laguna": {
        "full_attention": {"rope_theta": 500_000.0, "partial_rotary_factor": 0.5},
        "sliding_attention": {"rope_theta": 10_000.0, "partial_rotary_factor": 1.0},
    },
}
DEFAULT_THETA = {"minimax_m3_vl_text": 5_000_000.0}  # a config class's default_theta


def rename_weights(
    state_dict: dict, prefix: str, names: dict, layer_kind: str, bare: tuple = ()
) -> dict:
    """One transformers layer's weights under our names, for ``load_state_dict``.

    ``names`` maps each of its submodules to ours (``"q_proj" -> "W_query"``; a
    nested one is named with its dots, ``"forget_gate.f_a_proj"``); ``bare`` lists
    parameters held outside any linear layer (gpt-oss's ``sinks``, Kimi's
    ``"forget_gate.A_log"``). ``prefix`` picks the layer out of a whole model's state
    dict; keys that do not start with it are skipped; any other key is refused by
    name.
    """
    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict, got {type(state_dict).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    renamed = {}
    for key, tensor in state_dict.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):]
        if name in bare:
            renamed[names[name]] = tensor
            continue
        layer, _, param = name.rpartition(".")  # a submodule may be nested: "a.b"
        if layer not in names or param not in ("weight", "bias"):
            raise ValueError(
                f"state_dict key {key!r} is not a weight of {layer_kind}; "
                f"expected {prefix}<{'|'.join(names)}>.<weight|bias>"
            )
        renamed[f"{names[layer]}.{param}"] = tensor
    if not renamed:
        raise ValueError(f"state_dict has no key starting with prefix {prefix!r}")
    return renamed


def config_dict(config: object) -> dict:
    """A plain dict of ``config`` (a dict, or an object with ``to_dict``); the text
    part of a Gemma 3, Llama 4, Gemma 4, Qwen3.5, MiniMax-M3 or Mistral Small 4
    multimodal config."""
    if isinstance(config, dict):
        values = dict(config)
    elif callable(getattr(config, "to_dict", None)):
        values = config.to_dict()
    else:
        raise TypeError(
            "config must be a transformers config or the dict of a config.json, "
            f"got {type(config).__name__}"
        )
    text = values.get("text_config")
    family = values.get("model_type")
    if family in TEXT_CONFIGS and isinstance(text, dict):
        values = {**text, "model_type": TEXT_CONFIGS[family]}
    elif family == "mistral3" and isinstance(text, dict) and (
        text.get("model_type") == "mistral4"
    ):  # Mistral Small 4: a Mistral 3 multimodal wrapper around a Mistral 4 text model
        values = dict(text)
    return values


def uses_rope(values: dict, layer_idx: int) -> bool:
    """Whether layer ``layer_idx`` of Llama 4 or SmolLM3 turns its queries and keys:
    ``no_rope_layers[i]`` is 1 for a layer with rotary positions (the name says the
    opposite), or every ``no_rope_layer_interval``-th layer goes without."""
    flags = values.get("no_rope_layers")
    if flags:
        return bool(flags[layer_idx])
    return (layer_idx + 1) % values.get("no_rope_layer_interval", 4) != 0


def layer_type(values: dict, layer_idx: int) -> str:
    """``"full_attention"``, ``"sliding_attention"`` or another kind of layer, from
    ``layer_types`` or, in older configs, from each family's pattern."""
    family, num_layers = values["model_type"], values.get("num_hidden_layers")
    if isinstance(layer_idx, bool) or not isinstance(layer_idx, int) or layer_idx < 0:
        raise ValueError(f"layer_idx must be an int >= 0, got {layer_idx!r}")
    if num_layers is not None and layer_idx >= num_layers:
        raise ValueError(
            f"layer_idx={layer_idx} is beyond the config's {num_layers} layers"
        )
    if family == "deepseek_v4" and not values.get("layer_types"):
        return deepseek_v4_layer_types(values)[layer_idx]
    kinds = values.get("layer_types") or values.get("layers_block_type")
    if family == "nemotron_h" and not kinds and values.get("hybrid_override_pattern"):
        kinds = [NEMOTRON_PATTERN[c] for c in values["hybrid_override_pattern"]]
    if kinds:
        if layer_idx >= len(kinds):
            raise ValueError(
                f"layer_idx={layer_idx} is beyond the config's {len(kinds)} layers"
            )
        if family == "gemma4_text" and layer_idx == len(kinds) - 1:
            return "full_attention"  # transformers makes Gemma 4's last layer full
        if family in HYBRID_FAMILIES:  # their config.json may say "mamba", "attention"
            return LEGACY_LAYER_TYPES.get(kinds[layer_idx], kinds[layer_idx])
        return kinds[layer_idx]
    position = layer_idx + 1
    if family == "falcon_h1":  # attention and Mamba-2 side by side in every layer
        return "hybrid"
    if family == "bamba":  # attention where attn_layer_indices says, else Mamba-2
        attention = layer_idx in (values.get("attn_layer_indices") or ())
        return "full_attention" if attention else "linear_attention"
    if family == "olmo_hybrid":  # transformers' default: every fourth layer full
        last = num_layers is not None and position == num_layers
        return "full_attention" if position % 4 == 0 or (
            last and num_layers < 4) else "linear_attention"
    if family == "llama4_text":  # the layers with positions are the chunked ones
        return "chunked_attention" if uses_rope(values, layer_idx) else "full_attention"
    if family == "smollm3":  # a window, if any, on the layers without positions
        windowed = values.get("use_sliding_window") and values.get("sliding_window")
        if windowed and not uses_rope(values, layer_idx):
            return "sliding_attention"
        return "full_attention"
    if family == "gemma4_text":  # five windowed, then one full; the last one full
        if position == num_layers or position % 6 == 0:
            return "full_attention"
        return "sliding_attention"
    if family in ("gemma2", "gpt_oss"):  # windowed, full, windowed, ...
        return "sliding_attention" if position % 2 else "full_attention"
    if family == "gemma3_text":  # five windowed, then one full
        pattern = values.get("sliding_window_pattern", 6)
        return "sliding_attention" if position % pattern else "full_attention"
    if family in ("qwen3_next", "qwen3_5_text"):  # three linear layers, one full
        interval = values.get("full_attention_interval", 4)
        return "linear_attention" if position % interval else "full_attention"
    if family == "kimi_linear":  # config.json: 1-based lists of each kind's layers
        lists = values.get("linear_attn_config") or {}
        if position in lists.get("full_attn_layers", ()):
            return "full_attention"
        if position in lists.get("kda_layers", ()):
            return "linear_attention"
        return "full_attention" if layer_idx and layer_idx % 4 == 0 else (
            "linear_attention")  # transformers' default pattern
    if family == "mistral":
        return "sliding_attention" if values.get("sliding_window") else "full_attention"
    if family == "mimo_v2_flash":  # the first layer and every sixth full
        return "full_attention" if layer_idx == 0 or position % 6 == 0 else (
            "sliding_attention")
    if family == "minimax_m3_vl_text":  # config.json: a flag per layer, 1 = sparse
        flags = (values.get("sparse_attention_config") or {}).get(
            "sparse_attention_freq")
        if flags:
            return "minimax_m3_sparse" if flags[layer_idx] else "full_attention"
    if family in ("qwen2", "qwen3") and values.get("use_sliding_window") and (
        values.get("sliding_window") is not None
    ):  # transformers' defaults: no size, no window; windows from layer 28 on
        windowed = layer_idx >= values.get("max_window_layers", 28)
        return "sliding_attention" if windowed else "full_attention"
    return "full_attention"


def rope_options(values: dict, kind: str) -> dict:
    """``rope_base``, ``rope_scaling`` and ``partial_rotary_factor`` of a layer kind."""
    family = values["model_type"]
    params = values.get("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get(kind), dict):
        params = params[kind]  # one set per layer kind (Gemma 3)
    if not params and family in KIND_ROPE_DEFAULTS:  # transformers' defaults
        params = KIND_ROPE_DEFAULTS[family][kind]
    if not params and family == "gemma4_text":  # transformers' defaults
        params = (
            {"rope_type": "default", "rope_theta": 10_000.0}
            if kind == "sliding_attention" else
            {"rope_type": "proportional", "partial_rotary_factor": 0.25,
             "rope_theta": 1_000_000.0}
        )
    if not params:  # a config.json: rope_theta, rope_scaling (and Gemma 3's local base)
        if family == "gemma3_text" and kind == "sliding_attention":
            params = {"rope_theta": values.get("rope_local_base_freq", 10000.0)}
        else:
            params = {**(values.get("rope_scaling") or {})}
            params["rope_theta"] = values.get("rope_theta")
    params = dict(params)
    base = params.pop("rope_theta", None)
    if base is None and family == "gemma3_text" and kind == "sliding_attention":
        base = values.get("rope_local_base_freq", 10000.0)
    if base is None:
        base = values.get("rope_theta", DEFAULT_THETA.get(family))
    if base is None:
        raise ValueError(f"the config of {family!r} gives no rope_theta")
    partial = params.pop("partial_rotary_factor", None)
    if partial is None and family in KIND_ROPE_DEFAULTS:  # the rotary class's default
        partial = 0.334 if family == "mimo_v2_flash" else 1.0
    if partial is None:
        partial = values.get("partial_rotary_factor") or 1.0
    if family == "qwen3_5_text":  # the three components are equal for text tokens
        params.pop("mrope_section", None)
        params.pop("mrope_interleaved", None)
    rope_type = params.pop("rope_type", None) or params.pop("type", None) or "default"
    params.pop("type", None)
    scaling = None if rope_type == "default" else {"rope_type": rope_type, **params}
    if rope_type == "default" and params:
        raise ValueError(
            "the default rope type takes no parameters, got "
            f"{', '.join(sorted(params))}"
        )
    return dict(
        rope_base=float(base), rope_scaling=scaling, partial_rotary_factor=partial
    )


# --8<-- [start:options]
def modern_attention_options(config: object, layer_idx: int = 0) -> dict:
    """The keyword arguments of ``ModernAttention`` for layer ``layer_idx``."""
    values = config_dict(config)
    family = values.get("model_type")
    if family not in FAMILIES:
        raise ValueError(
            f"model_type {family!r} is not implemented; expected one of "
            f"{', '.join(FAMILIES)}"
        )
    both_ways = values.get("use_bidirectional_attention")
    if both_ways and not (family == "gemma4_text" and both_ways == "vision"):
        raise ValueError(  # Gemma 4's "vision": images both ways, text causal
            f"use_bidirectional_attention={both_ways!r} is not implemented "
            "(causal only)"
        )
    kind = layer_type(values, layer_idx)
    if family == "falcon_h1" and kind == "hybrid":  # its attention is a full one
        kind = "full_attention"
    if kind not in LAYER_TYPES:
        raise ValueError(
            f"layer {layer_idx} of {family!r} is a {kind!r} layer, not softmax "
            f"attention; its attention layers are those of type 'full_attention'"
        )
    heads = values["num_attention_heads"]
    width = values["hidden_size"]
    bias = bool(values.get("attention_bias", False))
    hybrid = hybrid_attention_options(values) if family in HYBRID_FAMILIES else {}
    options = dict(
        d_in=width, d_out=width, context_length=values["max_position_embeddings"],
        dropout=float(values.get("attention_dropout", 0.0) or 0.0),
        num_heads=heads, num_kv_heads=values.get("num_key_value_heads") or heads,
        head_dim=values.get("head_dim") or width // heads, qkv_bias=bias,
        out_bias=bias, **({} if hybrid.get("nope") or "rope_base" in hybrid
                          else rope_options(values, kind)),
    )
    options.update(hybrid)
    if kind == "sliding_attention":
        options["window"] = values.get("sliding_window")
    if kind == "chunked_attention":
        if not values.get("attention_chunk_size"):
            raise ValueError(
                f"layer {layer_idx} of {family!r} is chunked but the config gives "
                "no attention_chunk_size"
            )
        options["chunk_size"] = values["attention_chunk_size"]
    if family in ("llama4_text", "smollm3"):  # every fourth layer: no positions
        options["nope"] = not uses_rope(values, layer_idx)
    if family == "llama4_text":
        options.update(llama4_options(values, options["nope"]))
    if family == "gemma4_text":
        options.update(gemma4_options(values, layer_idx, kind))
    if family == "mistral":
        options.update(qkv_bias=False, out_bias=False)
    if family == "qwen2":  # biases on q, k, v only
        options.update(qkv_bias=True, out_bias=False)
    if family in ("qwen3", "gemma3_text", "qwen3_next", "qwen3_5_text"):
        options.update(qk_norm=True, norm_eps=values.get("rms_norm_eps", 1e-6))
        options["norm_unit_offset"] = family != "qwen3"
    if family in ("gemma2", "gemma3_text"):
        options["scale"] = values["query_pre_attn_scalar"] ** -0.5
    if family == "gemma2":  # Gemma 3 keeps the setting but transformers ignores it
        options["softcap"] = values.get("attn_logit_softcapping")
    if family == "gpt_oss":
        options["sinks"] = True
    if family in ("qwen3_next", "qwen3_5_text"):
        options["output_gate"] = True
    if family == "mimo_v2_flash":
        options.update(mimo_options(values, layer_idx, kind))
    if family == "laguna":
        options.update(laguna_options(values, layer_idx))
    if family == "minimax_m3_vl_text":  # Gemma's (1 + w) QK-norm, no biases
        options.update(qk_norm=True, norm_unit_offset=True, qkv_bias=False,
                       out_bias=False, norm_eps=values.get("rms_norm_eps", 1e-6))
    if kind == "sliding_attention" and options["window"] is None:
        raise ValueError(f"layer {layer_idx} of {family!r} is a sliding layer but the "
                         "config gives no sliding_window")
    return options
# --8<-- [end:options]


def mimo_options(values: dict, layer_idx: int, kind: str) -> dict:
    """MiMo-V2-Flash's own, as transformers builds them: narrower values, scaled;
    sliding layers with twice the key/value heads and sinks. A ``config.json`` field
    transformers does not read (``hybrid_layer_pattern``, ``swa_*``, the rotary
    bases) is checked against what it builds, and refused when they differ."""
    sliding = kind == "sliding_attention"
    kv_heads = values.get("num_key_value_heads") or 4
    head_dim = values.get("head_dim") or 192
    value_head_dim = values.get("v_head_dim") or 128
    options = dict(
        head_dim=head_dim, value_head_dim=value_head_dim, sinks=sliding,
        num_kv_heads=kv_heads * 2 if sliding else kv_heads,
        value_scale=values.get("attention_value_scale", 0.707), out_bias=False,
    )
    if sliding and values.get("sliding_window_size") is not None:  # SGLang's count:
        options["window"] = values["sliding_window_size"] + 1  # and the query
    elif sliding and values.get("sliding_window") is None:
        options["window"] = 129  # MiMoV2FlashConfig's default
    num_layers = values.get("num_hidden_layers") or layer_idx + 1
    rope = {k: rope_options(values, k) for k in ("full_attention", "sliding_attention")}
    read_by_transformers = dict(
        hybrid_layer_pattern=[int(layer_type(values, i) == "sliding_attention")
                              for i in range(num_layers)],
        swa_num_key_value_heads=kv_heads * 2, swa_head_dim=head_dim,
        swa_v_head_dim=value_head_dim,
        swa_num_attention_heads=values.get("num_attention_heads"),
        add_full_attention_sink_bias=False, add_swa_attention_sink_bias=True,
        rope_theta=rope["full_attention"]["rope_base"],
        swa_rope_theta=rope["sliding_attention"]["rope_base"],
        partial_rotary_factor=rope[kind]["partial_rotary_factor"],
    )
    for name, built in read_by_transformers.items():
        if name in values and values[name] != built:
            raise ValueError(
                f"{name}={values[name]!r} differs from what transformers builds for "
                f"mimo_v2_flash ({built!r}), which does not read it: not implemented"
            )
    return options


def laguna_options(values: dict, layer_idx: int) -> dict:
    """Laguna's own: the layer's head count, a plain QK-norm, a softplus gate per head
    (``gating`` True or ``"per-head"``) or per element (anything else, as
    transformers reads it); biases on all four projections with ``attention_bias``."""
    per_layer = values.get("num_attention_heads_per_layer")
    gating = values.get("gating", True)
    return dict(
        num_heads=per_layer[layer_idx] if per_layer else values["num_attention_heads"],
        head_dim=values.get("head_dim") or 128, qk_norm=True,
        norm_eps=values.get("rms_norm_eps", 1e-6),
        softplus_gate="head" if gating is True or gating == "per-head" else "element",
    )


# ours <- (transformers' field, a config.json's legacy name, transformers' default)
MINIMAX_INDEX_FIELDS = {
    "index_n_heads": ("index_n_heads", "sparse_num_index_heads", 4),
    "index_head_dim": ("index_head_dim", "sparse_index_dim", 128),
    "block_size": ("index_block_size", "sparse_block_size", 128),
    "top_k": ("index_topk_blocks", "sparse_topk_blocks", 16),
    "local_blocks": ("index_local_blocks", "sparse_local_block", 1),
}


# --8<-- [start:block_sparse]
def block_sparse_attention_options(config: object, layer_idx: int = 0) -> dict:
    """The keyword arguments of ``BlockSparseAttention`` (``block_sparse.py``) for a
    sparse layer of MiniMax-M3: those of its full layers' ``ModernAttention`` and the
    indexer's sizes (transformers' ``index_*`` fields, or a ``config.json``'s
    ``sparse_attention_config``)."""
    values = config_dict(config)
    family = values.get("model_type")
    if family != "minimax_m3_vl_text":
        raise ValueError(
            f"model_type {family!r} has no block-sparse attention here; expected "
            "minimax_m3_vl_text (or minimax_m3_vl)"
        )
    kind = layer_type(values, layer_idx)
    if kind != "minimax_m3_sparse":
        raise ValueError(
            f"layer {layer_idx} of {family!r} is a {kind!r} layer, not block-sparse "
            "attention; its sparse layers are those of type 'minimax_m3_sparse'"
        )
    legacy = values.get("sparse_attention_config") or {}
    if legacy.get("sparse_score_type", "max") != "max":
        raise ValueError(f"sparse_score_type={legacy['sparse_score_type']!r} is not "
                         "implemented (max only)")
    if legacy.get("sparse_init_block"):  # transformers 5.23 never reads it
        raise ValueError(
            f"sparse_init_block={legacy['sparse_init_block']} is not implemented from "
            "a config: transformers 5.23 keeps no first blocks, so nothing checks it; "
            "BlockSparseAttention(init_blocks=...) builds it"
        )
    options = modern_attention_options({**values, "layer_types": None,
                                        "sparse_attention_config": None}, layer_idx)
    for ours, (field, old, default) in MINIMAX_INDEX_FIELDS.items():
        options[ours] = legacy.get(old, values.get(field, default))
    return options
# --8<-- [end:block_sparse]


def hybrid_attention_options(values: dict) -> dict:
    """The attention layers of the hybrid families, as transformers runs them."""
    family = values["model_type"]
    head_dim = values.get("head_dim") or (
        values["hidden_size"] // values["num_attention_heads"])
    if family == "nemotron_h":  # NemotronHAttention: no rotary, no bias, ever
        return dict(nope=True, qkv_bias=False, out_bias=False,
                    head_dim=values.get("head_dim") or 128)  # NemotronHConfig's default
    if family == "granitemoehybrid":  # the score scale replaces 1 / sqrt(d_h)
        return dict(scale=float(values.get("attention_multiplier", 1.0)),
                    nope=values.get("position_embedding_type") != "rope")
    if family == "falcon_h1":  # keys times key_multiplier: the same as a score scale
        return dict(scale=float(values.get("key_multiplier", 1.0)) * head_dim**-0.5)
    if family == "bamba":  # BambaConfig sets 0.5 whatever the config.json says
        params = values.get("rope_parameters") or {}
        return dict(partial_rotary_factor=params.get("partial_rotary_factor", 0.5))
    return dict(qk_norm=True, qk_norm_across_heads=True,  # olmo_hybrid
                norm_eps=values.get("rms_norm_eps", 1e-6), **olmo_hybrid_rope(values))


def olmo_hybrid_rope(values: dict) -> dict:
    """OLMo-Hybrid turns no positions when its ``rope_theta`` is null (inside
    ``rope_parameters`` or beside it); a config that names no ``rope_theta`` at all
    gets transformers' default, 10000, as ``PreTrainedConfig`` fills it in."""
    params = values.get("rope_parameters")
    if isinstance(params, dict) and "rope_theta" in params:
        theta = params["rope_theta"]
    else:
        theta = values.get("rope_theta", 10_000.0)  # a null one stays null
    if theta is None:
        return dict(nope=True)
    if not isinstance(params, dict) or "rope_theta" not in params:
        return dict(rope_base=float(theta), rope_scaling=None,
                    partial_rotary_factor=1.0)
    return {}  # the usual rope_options read it


def llama4_options(values: dict, nope: bool) -> dict:
    """Llama 4's own: rotary pairs of neighbours; on layers with positions a QK-norm
    without weights; on the others, temperature-tuned queries (transformers'
    defaults where the config is silent)."""
    options = dict(rope_interleave=True)
    if values.get("use_qk_norm", True) and not nope:
        options.update(qk_norm=True, qk_norm_weight=False,
                       norm_eps=values.get("rms_norm_eps", 1e-5))
    if values.get("attn_temperature_tuning", True) and nope:
        options["temperature_tuning"] = (
            values.get("floor_scale", 8192), values.get("attn_scale", 0.1)
        )
    return options


def gemma4_options(values: dict, layer_idx: int, kind: str) -> dict:
    """Gemma 4's own: score scale 1, QK-norm, a weightless norm on values; the full
    layers' wider heads (``global_head_dim``, 512 when not given) and, with
    ``attention_k_eq_v``, their own key/value heads and keys as values; the sharing
    layers' missing projections."""
    shared = kv_source_layer(values, layer_idx) is not None
    head_dim = values.get("head_dim") or 256
    kv_heads = values.get("num_key_value_heads") or values["num_attention_heads"]
    keys_as_values = bool(values.get("attention_k_eq_v")) and kind == "full_attention"
    per_layer = values.get("per_layer_config")
    if isinstance(per_layer, dict):  # a config object's: the layers' own sizes
        by_index = {int(key): sizes for key, sizes in per_layer.items()}  # "05" -> 5
        own = by_index.get(layer_idx, {})
        head_dim = own.get("head_dim", head_dim)
        kv_heads = own.get("num_key_value_heads", kv_heads)
    elif kind == "full_attention":  # a config.json's global_* fields
        head_dim = values.get("global_head_dim") or 512
        if keys_as_values and values.get("num_global_key_value_heads"):
            kv_heads = values["num_global_key_value_heads"]
    return dict(
        head_dim=head_dim, num_kv_heads=kv_heads, scale=1.0, qk_norm=True,
        norm_eps=values.get("rms_norm_eps", 1e-6), value_norm=not shared,
        values_from_keys=keys_as_values and not shared, kv_shared=shared,
    )


def kv_source_layer(config: object, layer_idx: int) -> int | None:
    """The earlier layer whose keys and values layer ``layer_idx`` reuses (Gemma 4's
    last ``num_kv_shared_layers``: the last layer of the same kind before them), or
    None for a layer with its own."""
    values = config_dict(config)
    kind = layer_type(values, layer_idx)  # also checks the index
    count = values.get("num_kv_shared_layers") or 0
    first_shared = values.get("num_hidden_layers", 0) - count
    if values.get("model_type") != "gemma4_text" or layer_idx < first_shared:
        return None
    for earlier in range(first_shared - 1, -1, -1):
        if layer_type(values, earlier) == kind:
            return earlier
    raise ValueError(
        f"layer {layer_idx} reuses the keys of an earlier {kind!r} layer, but none "
        f"of the first {first_shared} layers is of that kind"
    )


LATENT_FAMILIES = ("deepseek_v3", "kimi_linear", "mistral4")
# latent attention over the top-k tokens of an indexer
SPARSE_LATENT_FAMILIES = ("deepseek_v32", "glm_moe_dsa")


# --8<-- [start:latent]
def latent_attention_options(config: object, layer_idx: int = 0) -> dict:
    """The keyword arguments of ``LatentAttention`` for layer ``layer_idx`` (every
    layer of DeepSeek-V3 has latent attention; Kimi Linear's full layers have it
    without rotary positions)."""
    values = config_dict(config)
    family = values.get("model_type")
    if family in SPARSE_LATENT_FAMILIES:
        raise ValueError(
            f"model_type {family!r} attends over the tokens its indexer selects: use "
            "sparse_latent_attention_options (SparseLatentAttention), not dense "
            "latent attention"
        )
    if family not in LATENT_FAMILIES:
        raise ValueError(
            f"model_type {family!r} has no latent attention here; expected one of "
            f"{', '.join(LATENT_FAMILIES)}"
        )
    if family == "kimi_linear":
        return kimi_latent_options(values, layer_idx, layer_type(values, layer_idx))
    if family == "mistral4":
        return mistral4_latent_options(values, layer_idx)
    return _latent_options(values, layer_idx)


def sparse_latent_attention_options(config: object, layer_idx: int = 0) -> dict:
    """The keyword arguments of ``SparseLatentAttention`` for layer ``layer_idx`` of a
    DeepSeek-V3.2 config: those of ``LatentAttention`` and the indexer's sizes."""
    values = config_dict(config)
    family = values.get("model_type")
    if family not in SPARSE_LATENT_FAMILIES:
        raise ValueError(
            f"model_type {family!r} has no sparse latent attention here; expected "
            f"one of {', '.join(SPARSE_LATENT_FAMILIES)}"
        )
    glm = family == "glm_moe_dsa"
    if glm and values.get("indexer_rope_interleave") is False:
        raise ValueError(
            "indexer_rope_interleave=False is not what transformers runs for "
            "glm_moe_dsa (its indexer always pairs neighbours): not implemented"
        )
    return dict(
        _latent_options(values, layer_idx), index_n_heads=values["index_n_heads"],
        index_head_dim=values["index_head_dim"], index_topk=values["index_topk"],
        rope_interleave=True,  # transformers' DeepseekV32Attention and GLM-5's always
        # pair neighbours, whatever a config.json's rope_interleave says
        index_rope_interleave=glm,  # GLM-5's indexer pairs neighbours too
        shared_topk=glm and glm_indexer_types(values)[layer_idx] == "shared",
    )


def glm_indexer_types(values: dict) -> list[str]:
    """GLM-5's ``indexer_types``: ``"full"`` (the layer runs its indexer) or
    ``"shared"`` (it reuses the last earlier full layer's choice), given or derived as
    transformers derives them (``index_topk_pattern``, else ``index_topk_freq`` and
    ``index_skip_topk_offset``: by default every layer full)."""
    if values.get("indexer_types"):
        return list(values["indexer_types"])
    num_layers = values["num_hidden_layers"]
    pattern = values.get("index_topk_pattern")
    if pattern is not None:
        return [{"F": "full", "S": "shared"}[c] if isinstance(pattern, str) else c
                for c in pattern]
    freq = max(values.get("index_topk_freq", 1), 1)
    offset = values.get("index_skip_topk_offset", 2)
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared"
            for i in range(num_layers)]


def topk_source_layer(config: object, layer_idx: int) -> int | None:
    """The earlier layer whose indexer's choice layer ``layer_idx`` reuses (GLM-5's
    ``"shared"`` layers: the last ``"full"`` layer before it), or None for a layer
    that chooses its own (or has no indexer)."""
    values = config_dict(config)
    layer_type(values, layer_idx)  # checks the index
    if values.get("model_type") != "glm_moe_dsa":
        return None
    kinds = glm_indexer_types(values)
    if kinds[layer_idx] != "shared":
        return None
    for earlier in range(layer_idx - 1, -1, -1):
        if kinds[earlier] == "full":
            return earlier
    raise ValueError(
        f"layer {layer_idx} reuses the top-k of an earlier indexer layer, but no "
        "layer before it runs its indexer"
    )


def mistral4_latent_options(values: dict, layer_idx: int) -> dict:
    """Mistral 4: DeepSeek-V3's latent attention (YaRN on the rotary part, the scale
    corrected by ``mscale_all_dim``), with queries temperature-tuned by position as
    ``Mistral4Attention`` does: ``1 + beta ln(1 + floor(m / L))``, ``beta`` the
    rotary parameters' ``llama_4_scaling_beta``, ``L`` their
    ``original_max_position_embeddings``."""
    rope = dict(values.get("rope_parameters") or values.get("rope_scaling") or {})
    beta = rope.pop("llama_4_scaling_beta", None)
    rope.pop("max_position_embeddings", None)  # transformers reads the config's own
    partial = rope.pop("partial_rotary_factor", None)
    head = values["qk_nope_head_dim"] + values["qk_rope_head_dim"]
    if partial is not None and int(head * partial) != values["qk_rope_head_dim"]:
        raise ValueError(
            f"partial_rotary_factor={partial} must turn the qk_rope_head_dim="
            f"{values['qk_rope_head_dim']} of each {head}-wide head"
        )
    length = rope.get("original_max_position_embeddings")
    if beta is None or length is None:  # transformers' Mistral4Attention needs both
        raise ValueError(
            "a mistral4 config needs rope_parameters with llama_4_scaling_beta and "
            "original_max_position_embeddings (the query scale reads them)"
        )
    options = _latent_options(
        {**values, "rope_parameters": rope, "partial_rotary_factor": None}, layer_idx
    )
    if beta:  # beta 0: every scale is 1
        options["temperature_tuning"] = (length, beta, 0)
    return options


def _latent_options(values: dict, layer_idx: int) -> dict:
    layer_type(values, layer_idx)  # the index must name a layer
    rope = rope_options(values, "full_attention")
    if rope.pop("partial_rotary_factor") != 1.0:
        raise ValueError(
            "partial_rotary_factor is not implemented for latent attention"
        )
    width = values["hidden_size"]
    interleave = values.get("rope_interleave")
    return dict(
        d_in=width, d_out=width, context_length=values["max_position_embeddings"],
        dropout=float(values.get("attention_dropout", 0.0) or 0.0),
        num_heads=values["num_attention_heads"],
        kv_lora_rank=values["kv_lora_rank"], q_lora_rank=values.get("q_lora_rank"),
        qk_nope_head_dim=values["qk_nope_head_dim"],
        qk_rope_head_dim=values["qk_rope_head_dim"], v_head_dim=values["v_head_dim"],
        bias=bool(values.get("attention_bias", False)),
        rope_interleave=True if interleave is None else bool(interleave),
        # transformers builds the query's and the latent's norms with its RMSNorm's
        # default epsilon, whatever rms_norm_eps says (that one is the blocks')
        norm_eps=1e-6, **rope,
    )
# --8<-- [end:latent]


def kimi_latent_options(values: dict, layer_idx: int, kind: str) -> dict:
    """Kimi Linear's full layers as transformers runs them (``KimiLinearAttention``):
    latent attention whose ``d_r`` key part is shared but never turned, and norms
    with transformers' default epsilon (1e-6), not ``rms_norm_eps``."""
    if kind != "full_attention":
        raise ValueError(
            f"layer {layer_idx} of 'kimi_linear' is a {kind!r} layer, not latent "
            "attention; its latent layers are those of type 'full_attention'"
        )
    if values.get("mla_use_nope") is False:
        raise ValueError(
            "mla_use_nope=False (rotary latent attention) is not what transformers "
            "runs for kimi_linear, and is not implemented"
        )
    width = values["hidden_size"]
    context = values.get("max_position_embeddings") or values["model_max_length"]
    return dict(
        d_in=width, d_out=width, context_length=context,
        dropout=float(values.get("attention_dropout", 0.0) or 0.0),
        num_heads=values["num_attention_heads"],
        kv_lora_rank=values["kv_lora_rank"], q_lora_rank=values.get("q_lora_rank"),
        qk_nope_head_dim=values["qk_nope_head_dim"],
        qk_rope_head_dim=values["qk_rope_head_dim"], v_head_dim=values["v_head_dim"],
        bias=bool(values.get("attention_bias", False)), rotary=False, norm_eps=1e-6,
    )


LINEAR_FAMILIES = ("qwen3_next", "qwen3_5_text", "olmo_hybrid", "kimi_linear")
# Kimi Linear's config.json nests these; transformers' config object flattens them
KIMI_LINEAR_FIELDS = {"linear_num_heads": "num_heads", "linear_head_dim": "head_dim",
                      "linear_conv_kernel_dim": "short_conv_kernel_size"}


def _field(values: dict, name: str):
    if values.get(name) is None:
        raise ValueError(f"the config of {values['model_type']!r} gives no {name}")
    return values[name]


# --8<-- [start:linear]
def linear_attention_options(config: object, layer_idx: int = 0) -> dict:
    """The keyword arguments of ``GatedDeltaNet`` (Qwen3-Next, Qwen3.5, OLMo-Hybrid)
    or ``KimiDeltaAttention`` (Kimi Linear) for linear-attention layer
    ``layer_idx``."""
    values = config_dict(config)
    family = values.get("model_type")
    if family not in LINEAR_FAMILIES:
        raise ValueError(
            f"model_type {family!r} has no linear attention here; expected one of "
            f"{', '.join(LINEAR_FAMILIES)}"
        )
    kind = layer_type(values, layer_idx)
    if kind != "linear_attention":
        raise ValueError(
            f"layer {layer_idx} of {family!r} is a {kind!r} layer, not linear "
            "attention; its linear layers are those of type 'linear_attention'"
        )
    if values.get("hidden_act", "silu") != "silu":  # the short convolution's
        raise ValueError(f"hidden_act={values['hidden_act']!r} is not implemented "
                         "for the short convolution (silu only)")
    width = values["hidden_size"]
    options = dict(d_in=width, d_out=width, norm_eps=values.get("rms_norm_eps", 1e-6))
    if family == "olmo_hybrid":  # its output norm's epsilon is fixed at 1e-5
        options.update(norm_eps=1e-5, negative_eigenvalues=bool(
            values.get("linear_allow_neg_eigval", True)))
    if family != "kimi_linear":
        return dict(
            options, num_heads=_field(values, "linear_num_value_heads"),
            num_key_heads=_field(values, "linear_num_key_heads"),
            key_head_dim=_field(values, "linear_key_head_dim"),
            value_head_dim=_field(values, "linear_value_head_dim"),
            conv_kernel=values.get("linear_conv_kernel_dim", 4),
        )
    nested = values.get("linear_attn_config") or {}  # config.json's names
    known = {*KIMI_LINEAR_FIELDS.values(), "kda_layers", "full_attn_layers"}
    for name in sorted(set(nested) - known):  # gate_lower_bound, ...: refused
        raise ValueError(f"linear_attn_config[{name!r}] is not implemented")
    flat = {**values, **{ours: nested[theirs] for ours, theirs
                         in KIMI_LINEAR_FIELDS.items() if theirs in nested}}
    return dict(
        options, num_heads=_field(flat, "linear_num_heads"),
        head_dim=_field(flat, "linear_head_dim"),
        conv_kernel=flat.get("linear_conv_kernel_dim") or 4,
    )
# --8<-- [end:linear]


COMPRESSED_FAMILIES = ("deepseek_v4",)
COMPRESSED_KINDS = (
    "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
)
# config.json's compress_ratios: each layer's rate, read as transformers reads it
V4_RATIO_KINDS = {0: "sliding_attention", 4: "compressed_sparse_attention",
                  128: "heavily_compressed_attention"}
# transformers' DeepseekV4Config defaults, for the fields a config.json may leave out
V4_DEFAULTS = dict(
    head_dim=512, q_lora_rank=1024, o_groups=8, o_lora_rank=1024, sliding_window=128,
    index_n_heads=64, index_head_dim=128, index_topk=512, rms_norm_eps=1e-6,
    rope_theta=10000.0, compress_rope_theta=160000.0, max_position_embeddings=1048576,
    partial_rotary_factor=64 / 512,
)


def deepseek_v4_layer_types(values: dict) -> list:
    """DeepSeek-V4's layer kinds when a config gives no ``layer_types``: from
    ``compress_ratios`` (0, 4, 128 per layer; a config.json lists the multi-token
    prediction layer too), else transformers' default (two HCA, then CSA and HCA by
    turns)."""
    count = values["num_hidden_layers"]
    ratios = values.get("compress_ratios")
    if ratios is None:
        return (["heavily_compressed_attention"] * min(count, 2) + [
            "compressed_sparse_attention" if i % 2 else "heavily_compressed_attention"
            for i in range(max(count - 2, 0))])
    unknown = sorted({r for r in ratios[:count] if r not in V4_RATIO_KINDS})
    if unknown:
        raise ValueError(f"compress_ratios {unknown} are not implemented; expected "
                         f"{', '.join(map(str, V4_RATIO_KINDS))} per layer")
    return [V4_RATIO_KINDS[r] for r in ratios[:count]]


def deepseek_v4_rope(values: dict) -> dict:
    """``{"main": ..., "compress": ...}``: the rotary settings of sliding and of
    compressed layers, folded from a config.json's ``rope_theta``,
    ``compress_rope_theta`` and ``rope_scaling`` as transformers folds them (YaRN's
    attention factor held at 1.0), or a config object's as they are."""
    params = values.get("rope_parameters") or values.get("rope_scaling") or {}
    main, compress = params.get("main"), params.get("compress")
    if isinstance(main, dict) and isinstance(compress, dict):  # a config object's
        return {"main": main, "compress": compress}
    partial = values.get("partial_rotary_factor")
    if partial is None:
        rope_dim = values.get("qk_rope_head_dim")
        head_dim = values.get("head_dim") or V4_DEFAULTS["head_dim"]
        partial = (rope_dim / head_dim if rope_dim is not None
                   else V4_DEFAULTS["partial_rotary_factor"])
    main = {"rope_type": "default", "partial_rotary_factor": partial,
            "rope_theta": values.get("rope_theta") or V4_DEFAULTS["rope_theta"]}
    compress = {key: value for key, value in params.items()
                if key not in ("main", "compress", "rope_theta")}
    base = values.get("compress_rope_theta") or V4_DEFAULTS["compress_rope_theta"]
    compress.update(rope_theta=base, partial_rotary_factor=partial)
    kind = compress.pop("rope_type", None) or compress.pop("type", None) or "default"
    compress.pop("type", None)
    compress["rope_type"] = kind
    if kind == "yarn":
        compress.setdefault("attention_factor", 1.0)
    return {"main": main, "compress": compress}


# --8<-- [start:compressed]
def compressed_attention_options(config: object, layer_idx: int = 0) -> dict:
    """The keyword arguments of ``CompressedAttention`` for layer ``layer_idx`` of a
    DeepSeek-V4 config (a transformers object or a ``config.json`` dict)."""
    values = config_dict(config)
    family = values.get("model_type")
    if family not in COMPRESSED_FAMILIES:
        raise ValueError(f"model_type {family!r} has no compressed attention here; "
                         f"expected one of {', '.join(COMPRESSED_FAMILIES)}")
    kind = layer_type(values, layer_idx)
    if kind not in COMPRESSED_KINDS:
        raise ValueError(f"layer {layer_idx} of {family!r} is a {kind!r} layer; "
                         f"expected one of {', '.join(COMPRESSED_KINDS)}")
    for name, allowed in (("num_key_value_heads", (None, 1)),
                          ("attention_bias", (None, False))):
        if values.get(name) not in allowed:
            raise ValueError(
                f"{name}={values[name]!r} is not implemented: DeepSeek-V4's attention "
                "has one shared key-value head and no biases (transformers builds it "
                "so whatever the config says)")
    v = {**V4_DEFAULTS, **values}  # transformers' defaults for the fields not given
    if not v["sliding_window"]:
        raise ValueError("sliding_window must be a positive int: every DeepSeek-V4 "
                         f"layer attends over a window, got "
                         f"{values['sliding_window']!r}")
    rope = deepseek_v4_rope(values)
    label = "main" if kind == "sliding_attention" else "compress"
    options = rope_options({"model_type": family, "rope_parameters": rope}, label)
    partial = options.pop("partial_rotary_factor")
    rope_dim = int(v["head_dim"] * partial)  # truncated, as transformers does
    rates = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128,
             **(values.get("compress_rates") or {})}
    for short, long in (("compress_rate_csa", "compressed_sparse_attention"),
                        ("compress_rate_hca", "heavily_compressed_attention")):
        if values.get(short) is not None:  # older configs' names
            rates[long] = values[short]
    width = v["hidden_size"]
    options.update(
        d_in=width, d_out=width, context_length=v["max_position_embeddings"],
        dropout=float(v.get("attention_dropout", 0.0) or 0.0),
        num_heads=v["num_attention_heads"], head_dim=v["head_dim"],
        q_lora_rank=v["q_lora_rank"], o_groups=v["o_groups"],
        o_lora_rank=v["o_lora_rank"], window=v["sliding_window"], layer_type=kind,
        compress_rate=rates.get(kind), rope_head_dim=rope_dim,
        norm_eps=v["rms_norm_eps"],
    )
    if kind == "compressed_sparse_attention":
        options.update(index_n_heads=v["index_n_heads"],
                       index_head_dim=v["index_head_dim"], index_topk=v["index_topk"])
    return options
# --8<-- [end:compressed]


MAMBA2_FAMILIES = ("nemotron_h", "granitemoehybrid", "falcon_h1", "bamba")


def _first(values: dict, names: tuple, default=None):
    """The value of the first of ``names`` the config gives (new names first, then
    the older ones transformers still reads), else ``default``."""
    for name in names:
        if values.get(name) is not None:
            return values[name]
    if default is None:
        raise ValueError(f"the config of {values['model_type']!r} gives no {names[0]}")
    return default


# --8<-- [start:mamba2]
def mamba2_options(config: object, layer_idx: int = 0) -> dict:
    """The keyword arguments of ``Mamba2`` for Mamba-2 layer ``layer_idx`` of a
    Nemotron-H, Granite 4.0 hybrid, Falcon-H1 or Bamba config, with transformers'
    defaults where the config is silent."""
    values = config_dict(config)
    family = values.get("model_type")
    if family not in MAMBA2_FAMILIES:
        raise ValueError(
            f"model_type {family!r} has no Mamba-2 layers here; expected one of "
            f"{', '.join(MAMBA2_FAMILIES)}"
        )
    kind = layer_type(values, layer_idx)
    if kind not in ("linear_attention", "hybrid"):
        raise ValueError(
            f"layer {layer_idx} of {family!r} is a {kind!r} layer, not Mamba-2; its "
            "Mamba-2 layers are those of type 'linear_attention'"
        )
    act = values.get("mamba_hidden_act" if family == "nemotron_h" else "hidden_act")
    if (act or "silu") != "silu":  # the short convolution's activation
        raise ValueError(f"activation {act!r} is not implemented for the short "
                         "convolution (silu only)")
    width = values["hidden_size"]
    if family == "nemotron_h":  # NemotronHMamba2Mixer ignores time_step_limit
        heads = _first(values, ("mamba_num_heads",))
        bias = bool(values.get("use_bias", False))
        return dict(
            d_in=width, d_out=width, num_heads=heads,
            head_dim=_first(values, ("mamba_head_dim",)),
            state_size=_first(values, ("ssm_state_size",)),
            num_groups=_first(values, ("n_groups", "mamba_n_groups"), 8),
            conv_kernel=_first(values, ("conv_kernel", "mamba_d_conv"), 4),
            chunk_size=_first(values, ("chunk_size", "mamba_chunk_size"), 128),
            time_step_limit=(_first(values, ("time_step_min", "mamba_dt_min"), 0.001),
                             math.inf),
            in_bias=bias, out_bias=bias,
            conv_bias=bool(_first(values, ("use_conv_bias", "mamba_conv_bias"), True)),
            norm_eps=values.get("layer_norm_epsilon", 1e-5),
        )
    heads = _first(values, ("mamba_n_heads",))
    inner = int(values.get("mamba_expand", 2) * width)  # I
    if family == "falcon_h1" and values.get("mamba_d_ssm") is not None:
        inner = values["mamba_d_ssm"]
    head_dim = values.get("mamba_d_head", "auto")
    head_dim = inner // heads if head_dim in (None, "auto") else head_dim
    limit = values.get("time_step_limit") or (0.0, math.inf)
    proj_bias = bool(values.get("mamba_proj_bias", False))
    options = dict(
        d_in=width, d_out=width, num_heads=heads, head_dim=head_dim,
        state_size=_first(values, ("mamba_d_state",)),
        num_groups=values.get("mamba_n_groups", 1),
        conv_kernel=values.get("mamba_d_conv", 4),
        chunk_size=values.get("mamba_chunk_size", 256),
        time_step_limit=tuple(float(v) for v in limit), in_bias=proj_bias,
        out_bias=proj_bias, conv_bias=bool(values.get("mamba_conv_bias", True)),
        norm_eps=values.get("rms_norm_eps",
                            1e-6 if family == "granitemoehybrid" else 1e-5),
    )
    if family == "falcon_h1":  # its own biases, norm switch and multipliers
        options.update(
            out_bias=bool(values.get("projectors_bias", False)),
            norm=bool(values.get("mamba_rms_norm", False)),
            norm_before_gate=bool(values.get("mamba_norm_before_gate", True)),
            in_multiplier=values.get("ssm_in_multiplier", 1.0),
            projection_multipliers=tuple(values.get("ssm_multipliers") or (1.0,) * 5),
        )
    return options
# --8<-- [end:mamba2]


def mixer_names(config: object, layer_idx: int) -> dict:
    """The token mixers of decoder layer ``layer_idx``, named as transformers names
    the attributes that hold them, each with its kind: ``{"self_attn":
    "full_attention"}``, ``{"linear_attn": "linear_attention"}``, ``{"mamba":
    "linear_attention", "self_attn": "full_attention"}`` (Falcon-H1), or ``{}`` for a
    block without one (Nemotron-H's ``"mlp"`` and ``"moe"`` blocks)."""
    values = config_dict(config)
    family, kind = values.get("model_type"), layer_type(values, layer_idx)
    if family == "falcon_h1":
        return {"mamba": "linear_attention", "self_attn": "full_attention"}
    if family == "nemotron_h":
        return {} if kind in ("mlp", "moe") else {"mixer": kind}
    if kind == "linear_attention" and family in ("granitemoehybrid", "bamba"):
        return {"mamba": kind}
    if kind == "linear_attention" and family != "kimi_linear":
        return {"linear_attn": kind}
    return {"self_attn": kind}
