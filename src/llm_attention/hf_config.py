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
===============  =============================================================

``latent_attention_options(config, layer_idx)`` does the same for ``LatentAttention``
(``latent.py``) from a DeepSeek-V3 config (``deepseek_v3``).

Anything else (another family, another rope type, bidirectional attention, a layer
that is not attention) raises a ``ValueError`` that names it: never a layer that
silently computes something else.

``rename_weights`` gives a transformers layer's weights our names; the
``from_hf_state_dict`` of ``modern.py`` and ``latent.py`` use it.

Needs only the standard library. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

FAMILIES = (
    "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "gpt_oss",
    "qwen3_next",
)
LAYER_TYPES = ("full_attention", "sliding_attention")


def rename_weights(
    state_dict: dict, prefix: str, names: dict, layer_kind: str, bare: tuple = ()
) -> dict:
    """One transformers layer's weights under our names, for ``load_state_dict``.

    ``names`` maps each of its submodules to ours (``"q_proj" -> "W_query"``);
    ``bare`` lists parameters the layer holds itself, not in a submodule (gpt-oss's
    ``sinks``). ``prefix`` picks the layer out of a whole model's state dict; keys
    that do not start with it are skipped; any other key is refused by name.
    """
    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict, got {type(state_dict).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    renamed = {}
    for key, tensor in state_dict.items():
        if not key.startswith(prefix):
            continue
        layer, _, param = key[len(prefix):].partition(".")
        if layer in bare and not param:
            renamed[names[layer]] = tensor
            continue
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
    part of a Gemma 3 multimodal config."""
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
    if values.get("model_type") == "gemma3" and isinstance(text, dict):
        values = {**text, "model_type": "gemma3_text"}
    return values


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
    if values.get("layer_types"):
        return values["layer_types"][layer_idx]
    position = layer_idx + 1
    if family in ("gemma2", "gpt_oss"):  # windowed, full, windowed, ...
        return "sliding_attention" if position % 2 else "full_attention"
    if family == "gemma3_text":  # five windowed, then one full
        pattern = values.get("sliding_window_pattern", 6)
        return "sliding_attention" if position % pattern else "full_attention"
    if family == "qwen3_next":  # three linear-attention layers, then one full
        interval = values.get("full_attention_interval", 4)
        return "linear_attention" if position % interval else "full_attention"
    if family == "mistral":
        return "sliding_attention" if values.get("sliding_window") else "full_attention"
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
        base = values.get("rope_theta")
    if base is None:
        raise ValueError(f"the config of {family!r} gives no rope_theta")
    partial = params.pop("partial_rotary_factor", None)
    if partial is None:
        partial = values.get("partial_rotary_factor") or 1.0
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
    if values.get("use_bidirectional_attention"):
        raise ValueError(
            "use_bidirectional_attention=True is not implemented (causal only)"
        )
    kind = layer_type(values, layer_idx)
    if kind not in LAYER_TYPES:
        raise ValueError(
            f"layer {layer_idx} of {family!r} is a {kind!r} layer, not softmax "
            f"attention; its attention layers are those of type 'full_attention'"
        )
    heads = values["num_attention_heads"]
    width = values["hidden_size"]
    bias = bool(values.get("attention_bias", False))
    options = dict(
        d_in=width, d_out=width, context_length=values["max_position_embeddings"],
        dropout=float(values.get("attention_dropout", 0.0) or 0.0),
        num_heads=heads, num_kv_heads=values.get("num_key_value_heads") or heads,
        head_dim=values.get("head_dim") or width // heads,
        qkv_bias=bias, out_bias=bias, **rope_options(values, kind),
    )
    if kind == "sliding_attention":
        options["window"] = values["sliding_window"]
    if family == "mistral":
        options.update(qkv_bias=False, out_bias=False)
    if family == "qwen2":  # biases on q, k, v only
        options.update(qkv_bias=True, out_bias=False)
    if family in ("qwen3", "gemma3_text", "qwen3_next"):
        options.update(qk_norm=True, norm_eps=values.get("rms_norm_eps", 1e-6))
        options["norm_unit_offset"] = family != "qwen3"
    if family in ("gemma2", "gemma3_text"):
        options["scale"] = values["query_pre_attn_scalar"] ** -0.5
    if family == "gemma2":  # Gemma 3 keeps the setting but transformers ignores it
        options["softcap"] = values.get("attn_logit_softcapping")
    if family == "gpt_oss":
        options["sinks"] = True
    if family == "qwen3_next":
        options["output_gate"] = True
    return options
# --8<-- [end:options]


LATENT_FAMILIES = ("deepseek_v3",)


# --8<-- [start:latent]
def latent_attention_options(config: object, layer_idx: int = 0) -> dict:
    """The keyword arguments of ``LatentAttention`` for layer ``layer_idx`` (every
    layer of DeepSeek-V3 has latent attention; its feed-forward parts differ)."""
    values = config_dict(config)
    family = values.get("model_type")
    if family not in LATENT_FAMILIES:
        raise ValueError(
            f"model_type {family!r} has no latent attention here; expected one of "
            f"{', '.join(LATENT_FAMILIES)}"
        )
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
        norm_eps=values.get("rms_norm_eps", 1e-6), **rope,
    )
# --8<-- [end:latent]
