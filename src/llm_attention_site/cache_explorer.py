# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The cache at any length: what each published model of the family table keeps for a
batch of sequences of ``T`` tokens, by kind of part, and the explorer that draws it.

A model's cache is a short list of ``Term``s, read layer by layer from its published
config (``families.py``) through the same ``hf_config`` readers that build its layers.
A term is one kind of part summed over the layers that hold it alike, and holds

    bytes(T) = per * floor(min(T, span) / every) + open * (T mod every)
               + (closed if T >= every) + fixed

bytes per sequence; a batch of ``B`` sequences holds ``B`` times as much. The kinds
(``KINDS``):

- ``full``: a key and a value per key/value head of every token (``d_h`` and ``d_v``
  numbers each), in each layer that keeps its own (a Gemma 4 layer that reuses an
  earlier layer's keeps none);
- ``windowed``, ``chunked``: the same, up to the layer's span (``span``): counted at
  the whole span once ``T`` reaches it, as ``family_rows`` counts it and as the
  layers' rolling and chunk caches hold it. DeepSeek-V4's window of ``d`` numbers a
  token (one shared key-value head) in every layer is ``windowed`` too;
- ``latent``: latent attention's latent and rotary key (``d_c + d_r``) per token;
- ``indexer``: an indexer's key per token (DeepSeek-V3.2; GLM-5's layers that run
  their indexer, not those that reuse an earlier one's choice; MiniMax-M3's sparse
  layers) or per compressed entry (DeepSeek-V4's CSA layers);
- ``entries``: DeepSeek-V4's compressed entries, one of ``d`` numbers every ``m``
  tokens (``every``);
- ``unpooled``: the tokens DeepSeek-V4's compressors hold until their window closes
  (``open`` per token of the open window, ``closed`` once a window has closed), as
  ``compressed_costs.layer_cache`` counts them;
- ``state``: a linear layer's state and its short convolution's window (Gated
  DeltaNet, Kimi Delta Attention, Mamba-2): the same at any length (``fixed``),
  weighed with the layer's own cache, built on the ``meta`` device.

Numbers are two bytes (``family_rows.BYTES_PER_NUMBER``, bfloat16) but the linear
layers' state, which our layers and transformers' keep in float32.

``cache_bytes(name, T, B)`` is the one count the page's table, its tests and the
explorer's script (``docs/assets/javascripts/cache-explorer.js``, which reads the
terms ``cache_explorer`` writes into the figure) compute. ``human`` writes bytes as
both the page and the script do. Not a model module: the site's own.
"""

from __future__ import annotations

import functools
import html
import json
import textwrap
from dataclasses import asdict, dataclass

from llm_attention.hf_config import (
    COMPRESSED_FAMILIES,
    LATENT_FAMILIES,
    SPARSE_LATENT_FAMILIES,
    block_sparse_attention_options,
    compressed_attention_options,
    config_dict,
    kv_source_layer,
    mixer_names,
    modern_attention_options,
    topk_source_layer,
)

from .families import FAMILIES
from .family_rows import BYTES_PER_NUMBER

# kind -> what the legend calls it, in the order the bars stack
KINDS = {
    "full": "full layers",
    "windowed": "windowed layers",
    "chunked": "chunked layers",
    "latent": "latents",
    "entries": "compressed entries",
    "indexer": "indexer keys",
    "unpooled": "not yet pooled",
    "state": "linear state (fixed)",
}
# The published models left out, and why
LEFT_OUT = {
    "Laguna XS.2.1": "its copied config holds 8 of its 40 layers",
    "Nemotron 3 Nano (as a test fixture copies it)":
        "a test fixture's config, not necessarily the model's",
}
# What the explorer shows first: DeepSeek-V4 beside the models of its time, at 1M
DEFAULT_MODELS = ("DeepSeek-V4-Pro", "DeepSeek-V4-Flash", "DeepSeek-V3.2",
                  "Qwen3.5 9B", "Llama 4 Scout", "Gemma 4 31B")
LENGTHS = tuple(2**k for k in range(10, 21))  # the slider's stops: 1K to 1M tokens
BATCHES = tuple(2**k for k in range(0, 8))  # 1 to 128 sequences
NBSP = "\u00a0"
UNITS = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))


@dataclass(frozen=True)
class Term:
    """One kind of part of a cache, over the layers that hold it alike: see the
    module's docstring for ``bytes(T)``. ``span`` None: no cap."""

    kind: str
    per: int = 0
    span: int | None = None
    every: int = 1
    open: int = 0
    closed: int = 0
    fixed: int = 0

    def bytes_at(self, length: int) -> int:
        """Bytes this part holds for one sequence of ``length`` tokens."""
        held = length if self.span is None else min(length, self.span)
        return (self.per * (held // self.every) + self.open * (length % self.every)
                + (self.closed if length >= self.every else 0) + self.fixed)


def _softmax_terms(config, layer_idx: int, o: dict | None = None) -> list[Term]:
    """A softmax layer (``ModernAttention``'s options ``o``, by default read from
    ``config``): its keys and values, up to its window or chunk; none where it reuses
    an earlier layer's."""
    if kv_source_layer(config, layer_idx) is not None:
        return []
    o = o or modern_attention_options(config, layer_idx)
    widths = o["head_dim"] + o.get("value_head_dim", o["head_dim"])  # d_h + d_v
    per = o["num_kv_heads"] * widths * BYTES_PER_NUMBER
    if o.get("window"):
        return [Term("windowed", per, span=o["window"])]
    if o.get("chunk_size"):
        return [Term("chunked", per, span=o["chunk_size"])]
    return [Term("full", per)]


def _latent_terms(values: dict, layer_idx: int) -> list[Term]:
    """A latent layer: its latent and rotary key (the config's fields, as
    ``family_rows.latent_row`` reads them); with DeepSeek sparse attention, its
    indexer's key, unless the layer reuses an earlier layer's choice (GLM-5)."""
    terms = [Term("latent", (values["kv_lora_rank"] + values["qk_rope_head_dim"])
                  * BYTES_PER_NUMBER)]
    sparse = values["model_type"] in SPARSE_LATENT_FAMILIES
    if sparse and topk_source_layer(values, layer_idx) is None:
        terms.append(Term("indexer", values["index_head_dim"] * BYTES_PER_NUMBER))
    return terms


def _compressed_terms(config, layer_idx: int) -> list[Term]:
    """A DeepSeek-V4 layer, part by part as ``compressed_costs.layer_cache`` counts
    it: the window, then the entries, the indexer's entries and the tokens not yet
    pooled of a compressed layer."""
    o = compressed_attention_options(config, layer_idx)
    d, rate = o["head_dim"], o.get("compress_rate")
    terms = [Term("windowed", d * BYTES_PER_NUMBER, span=o["window"])]
    if rate is None:
        return terms
    terms.append(Term("entries", d * BYTES_PER_NUMBER, every=rate))
    if o["layer_type"] == "heavily_compressed_attention":  # c and z of the open window
        return terms + [Term("unpooled", every=rate, open=2 * d * BYTES_PER_NUMBER)]
    width = (d + o["index_head_dim"]) * BYTES_PER_NUMBER  # both pools' c or z
    return terms + [
        Term("indexer", o["index_head_dim"] * BYTES_PER_NUMBER, every=rate),
        # c and z of both series of the open window; the closed window's first halves
        Term("unpooled", every=rate, open=4 * width, closed=2 * rate * width),
    ]


def _state_bytes(config, layer_idx: int, mixer: str) -> int:
    """Bytes of a linear layer's cache for one sequence, built on the ``meta``
    device (shapes only: nothing allocated)."""
    import torch

    from llm_attention.hf_layers import layer_from_hf

    with torch.device("meta"):
        layer = layer_from_hf(config, layer_idx, mixer=mixer).to(torch.bfloat16)
        return layer.make_cache(1).nbytes


def layer_terms(config, layer_idx: int) -> list[Term]:
    """The parts of decoder layer ``layer_idx``'s cache, each of its token mixers'."""
    values = config_dict(config)
    family = values["model_type"]
    if family == "gpt2":  # one key and one value of n_embd numbers a token
        return [Term("full", 2 * values["n_embd"] * BYTES_PER_NUMBER)]
    terms = []
    for mixer, kind in mixer_names(values, layer_idx).items():
        if kind == "linear_attention":
            terms.append(Term("state", fixed=_state_bytes(config, layer_idx, mixer)))
        elif family in COMPRESSED_FAMILIES:
            terms += _compressed_terms(values, layer_idx)
        elif family in LATENT_FAMILIES + SPARSE_LATENT_FAMILIES:
            terms += _latent_terms(values, layer_idx)
        elif kind == "minimax_m3_sparse":
            o = block_sparse_attention_options(values, layer_idx)
            terms += _softmax_terms(values, layer_idx, o)  # and beside them:
            terms.append(Term("indexer", o["index_head_dim"] * BYTES_PER_NUMBER))
        else:
            terms += _softmax_terms(values, layer_idx)
    return terms


def model_terms(config) -> list[Term]:
    """The parts of a whole model's cache: its layers' terms, those alike but for
    their bytes summed, in ``KINDS`` order."""
    values = config_dict(config)
    count = values.get("num_hidden_layers") or values["n_layer"]
    summed: dict[tuple, Term] = {}
    for index in range(count):
        for term in layer_terms(config, index):
            key = (term.kind, term.span, term.every)
            old = summed.get(key, Term(*key[:1], span=term.span, every=term.every))
            summed[key] = Term(term.kind, old.per + term.per, term.span, term.every,
                               old.open + term.open, old.closed + term.closed,
                               old.fixed + term.fixed)
    order = list(KINDS)
    return sorted(summed.values(), key=lambda t: (order.index(t.kind), t.span or 0,
                                                  t.every))


def context_of(config) -> int:
    """The positions a config names (``max_position_embeddings``, or its older
    names)."""
    values = config_dict(config)
    for name in ("max_position_embeddings", "model_max_length", "n_positions"):
        if values.get(name):
            return values[name]
    raise ValueError(f"the config names no context length: {sorted(values)}")


@functools.cache
def cost_models() -> dict:
    """Model name -> ``dict(family, source, context, terms)``, for every published
    model of the family table but those of ``LEFT_OUT``, in the table's order."""
    models = {}
    for family in FAMILIES.values():
        for name, (source, config) in family.published.items():
            if name in LEFT_OUT or name in models:
                continue
            models[name] = dict(family=family.title, source=source,
                                context=context_of(config),
                                terms=tuple(model_terms(config)))
    return models


def cache_bytes(name: str, length: int, batch: int = 1) -> dict:
    """Bytes the model ``name`` keeps for ``batch`` sequences of ``length`` tokens,
    by kind (only the kinds it has), in ``KINDS`` order."""
    models = cost_models()
    if name not in models:
        raise ValueError(f"name must be one of the models {list(models)}, got {name!r}")
    for what, value in (("length", length), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{what} must be an int >= 1, got {value!r}")
    found: dict[str, int] = {}
    for term in models[name]["terms"]:
        found[term.kind] = found.get(term.kind, 0) + term.bytes_at(length) * batch
    return found


def human(nbytes: int) -> str:
    """``nbytes`` in the largest binary unit that leaves at least 1, with 2 decimals
    under 10, 1 under 100, none from there; rounded half up, on whole hundredths,
    as the explorer's script rounds them (``Math.floor(x + 0.5)``)."""
    unit, size = next((u, s) for u, s in reversed(UNITS) if nbytes >= s or s == 1)
    value = nbytes / size
    decimals = 2 if value < 10 else 1 if value < 100 else 0
    scaled = int(value * 10**decimals + 0.5)  # floor(x + 0.5) for x >= 0, as the script
    whole, part = divmod(scaled, 10**decimals)
    return f"{whole}.{part:0{decimals}d} {unit}" if decimals else f"{whole} {unit}"


def tokens_label(length: int) -> str:
    """``1K`` for 1,024 tokens, ``1M`` for 1,048,576: the slider's names."""
    return f"{length // 2**20}M" if length >= 2**20 else f"{length // 2**10}K"


def setting(length: int, batch: int) -> str:
    """What the explorer says it shows: ``1,048,576 tokens (1M), batch of 1``."""
    return f"{length:,} tokens ({tokens_label(length)}), batch of {batch}"


def past_context(context: int) -> str:
    """The note on a model counted past the positions its config names."""
    return f"past the {context:,} positions its config names"


def ordered_models() -> list[str]:
    """The explorer's rows: ``DEFAULT_MODELS`` first, then the others in the family
    table's order."""
    return [*DEFAULT_MODELS, *(n for n in cost_models() if n not in DEFAULT_MODELS)]


def cache_table(names, length: int, batch: int = 1, width: int = 78) -> str:
    """A text table of ``names``' caches at ``length`` tokens and ``batch``: the
    total, then each kind, written as the explorer writes them, in lines of at most
    ``width`` characters."""
    lines = [f"{setting(length, batch)}:"]
    for name in names:
        found = cache_bytes(name, length, batch)
        parts = ", ".join(f"{KINDS[k]} {human(v)}".replace(" ", NBSP)
                          for k, v in found.items() if v)  # a part stays on one line
        head = f"{name:<19}{human(sum(found.values())):>9}: "
        filled = textwrap.fill(parts, width, initial_indent=head,
                               subsequent_indent=" " * len(head))
        lines.append(filled.replace(NBSP, " "))
    return "\n".join(lines)


def _row(name: str, length: int, batch: int, largest: int) -> str:
    """One model's row at ``length`` and ``batch``: its name, total, a bar of its
    parts (``largest`` bytes fill the bar) and each part's bytes."""
    model, found = cost_models()[name], cache_bytes(name, length, batch)
    total = sum(found.values())
    bar = "".join(
        f'<span class="cache-k-{k}" style="width: {100 * v / largest:.3f}%"></span>'
        for k, v in found.items() if v)
    parts = "".join(
        f'<span class="cache-part cache-k-{k}" data-kind="{k}">'
        f"{html.escape(KINDS[k])} {human(v)}</span>" for k, v in found.items() if v)
    note = past_context(model["context"]) if length > model["context"] else ""
    chosen = " data-default" if name in DEFAULT_MODELS else ""
    return (
        f'<li class="cache-row" data-model="{html.escape(name)}"{chosen}>'
        f'<span class="cache-name">{html.escape(name)}</span>'
        f'<span class="cache-total">{human(total)}</span>'
        f'<span class="cache-bar" aria-hidden="true">{bar}</span>'
        f'<span class="cache-parts">{parts}</span>'
        f'<span class="cache-note">{note}</span></li>'
    )


def cache_explorer(length: int = LENGTHS[-1], batch: int = 1, caption: str = "") -> str:
    """HTML for the explorer: a row per model (``ordered_models``), drawn at
    ``length`` tokens and ``batch``, and in its ``data-cache`` attribute every
    model's terms, the kinds, units, lengths and batches its script reads. Without
    the script every row shows, at that setting."""
    if length not in LENGTHS or batch not in BATCHES:
        raise ValueError(f"length must be one of {LENGTHS} and batch one of {BATCHES}, "
                         f"got {length} and {batch}")
    names = ordered_models()
    models = cost_models()
    largest = max(sum(cache_bytes(n, length, batch).values()) for n in names)
    data = dict(
        kinds=[[k, label] for k, label in KINDS.items()],
        units=[list(u) for u in UNITS],
        lengths=list(LENGTHS), labels=[tokens_label(n) for n in LENGTHS],
        batches=list(BATCHES), start=[LENGTHS.index(length), BATCHES.index(batch)],
        models=[dict(name=n, context=models[n]["context"], default=n in DEFAULT_MODELS,
                     terms=[asdict(t) for t in models[n]["terms"]]) for n in names],
    )
    payload = html.escape(json.dumps(data, separators=(",", ":")), quote=True)
    rows = "".join(_row(n, length, batch, largest) for n in names)
    return (
        f'<figure data-search-exclude class="explorer cache-explorer" '
        f'data-cache="{payload}"><p class="cache-setting">{setting(length, batch)}</p>'
        f'<ul class="cache-rows">{rows}</ul>'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )
