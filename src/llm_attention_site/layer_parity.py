# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Every decoder layer of a tiny transformers model beside ``layer_from_hf``'s module.

A whole model gives each layer its real inputs, whatever the family: a forward hook on
the submodule each decoder layer calls (``self_attn``, or ``linear_attn`` in the hybrid
families) records that layer's input hidden states and its output, with the model's own
rotary tables, masks and caches applied. ``every_layer`` then builds our module for the
same layer with ``hf_layers.layer_from_hf`` (the submodule's weights loaded) and runs
it on the recorded input. A Gemma 4 layer that reuses an earlier layer's keys and
values (``hf_config.kv_source_layer``) gets them as the model gives them: our module
of that earlier layer runs with a ``kv_sharing.SharedKV`` as its cache, and the
sharing layer reads it; a GLM-5 layer that reuses an earlier layer's top-k
(``hf_config.topk_source_layer``) reads it from the ``kv_sharing.SharedTopK`` that
layer filled. Not a model module: it needs transformers.
"""

from __future__ import annotations

import os

import torch

from llm_attention.hf_config import kv_source_layer, topk_source_layer
from llm_attention.hf_layers import layer_from_hf, layer_kind
from llm_attention.kv_sharing import SharedKV, SharedTopK


def attention_submodule(decoder_layer) -> torch.nn.Module:
    """The module a decoder layer runs for its attention (or linear attention)."""
    for name in ("linear_attn", "self_attn"):
        module = getattr(decoder_layer, name, None)
        if module is not None:
            return module
    raise ValueError(f"{type(decoder_layer).__name__} has no self_attn or linear_attn")


def decoder_layers(model) -> torch.nn.ModuleList:
    """``model.model.layers`` (a ...ForCausalLM) or ``model.layers`` (a ...Model)."""
    inner = getattr(model, "model", model)
    inner = getattr(inner, "language_model", inner)  # multimodal wrappers
    return inner.layers


def record_layers(
    model, input_ids, attention_mask=None, position_ids=None
) -> list[dict]:
    """Run ``model`` once; per decoder layer, its attention submodule's input hidden
    states ``(B, T, d)`` and output ``(B, T, d)``. ``position_ids`` (optional) as
    ``generate`` passes them, counted from each row's first real token."""
    records = []
    handles = []

    def hook(module, args, kwargs, output):
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        out = output[0] if isinstance(output, tuple) else output
        records.append(dict(module=module, input=hidden.detach(), output=out.detach()))

    for layer in decoder_layers(model):
        sub = attention_submodule(layer)
        handles.append(sub.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            model(input_ids=input_ids, attention_mask=attention_mask,
                  position_ids=position_ids, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    return records


def every_layer(
    model, config, input_ids, attention_mask=None, position_ids=None, **overrides
) -> list[dict]:
    """Per decoder layer: its kind, our module's class, the largest |ours -
    transformers| over real tokens (``attention_mask`` 1), on the layer's real input,
    and the largest |transformers| there (for a relative tolerance)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    records = record_layers(model, input_ids, attention_mask, position_ids)
    real = (
        torch.ones(input_ids.shape, dtype=torch.bool)
        if attention_mask is None else attention_mask.bool()
    )
    padding = None if attention_mask is None else real
    source_of = {i: kv_source_layer(config, i) for i in range(len(records))}
    shared = {i: SharedKV() for i in set(source_of.values()) - {None}}  # by source
    topk_of = {i: topk_source_layer(config, i) for i in range(len(records))}
    picks = {i: SharedTopK() for i in set(topk_of.values()) - {None}}  # by source
    rows = []
    for index, record in enumerate(records):
        ours = layer_from_hf(config, index, record["module"].state_dict(), **overrides)
        ours = ours.to(record["input"].dtype)
        source = source_of[index]
        cache = shared.get(index if source is None else source)  # records, or reads
        topk = picks.get(index if topk_of[index] is None else topk_of[index])
        handoff = {} if topk is None else {"topk": topk}  # records, or reads
        with torch.no_grad():
            got = ours(record["input"], padding, cache=cache, **handoff)  # (B, T, d)
        difference = (got[real] - record["output"][real]).abs().max().item()
        rows.append(dict(
            layer=index, kind=layer_kind(config, index)[1],
            module=type(ours).__name__, max_difference=difference,
            max_reference=record["output"][real].abs().max().item(),
        ))
    return rows
