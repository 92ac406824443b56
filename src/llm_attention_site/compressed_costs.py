# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""What one decoding step costs DeepSeek-V4 against DeepSeek-V3.2 at a long context:
the cache each holds, and the attention's multiply-adds for one new token, counted from
the published configs.

``PUBLISHED_V4`` holds the fields of DeepSeek-V4-Flash's and DeepSeek-V4-Pro's
``config.json`` that their attention reads, under the file's names, in the shape of
``families.PUBLISHED`` (name -> (source, fields)). The Hub was not reachable: the values
were read from copies of DeepSeek's files that others published in their own
repositories (two whole copies of Flash's and one of Pro's; excerpts of Pro's in others
agree), and checked against
transformers 5.23's ``DeepseekV4Config`` (its defaults are Flash's sizes; its docstrings
give Pro's heads, groups, rank and width). Its default ``layer_types``, which its
docstring calls V4-Pro's, is one layer off Pro's ``compress_ratios``: HCA, HCA, HCA,
CSA, ... (32 HCA and 29 CSA at 61 layers) against Pro's HCA, HCA, CSA, ... (31 and 30);
the table keeps Pro's file. The source line says so. DeepSeek-V3.2's side is
``sparse_costs.DEEPSEEK_V32``.

**The cache**, numbers held per layer after ``T`` tokens (``layer_cache``), by part
(``rotary``, ``other``, ``indexer``, ``unpooled``):

- V3.2, every layer: ``T (d_c + d_r + d_I)``: the latent (``other``), the rotary key
  and the indexer's key of every token.
- V4, every layer: the window, ``W`` tokens of ``d`` (one shared key-value head).
  Compressed layers add ``floor(T / m)`` entries of ``d``, CSA layers as many indexer
  entries of ``d_I``, and both the tokens not yet pooled (what transformers'
  ``DeepseekV4HCACache``/``CSACache`` keep: the ``c`` and ``z`` of the open window's
  ``T mod m`` tokens and, in CSA, the closed window's first halves).

**The work of one new token**, multiply-adds per layer (``layer_step``), in three parts:

- ``keys``: attending over what the token reads: ``H (d + d)`` per key in V4 (a score
  over the shared head, its share of the mix), the absorbed ``H ((d_c + d_r) + d_c)``
  in V3.2. V4 reads its window's ``min(W, T)`` keys and its entries (HCA all ``floor(T
  / m)``, CSA the indexer's ``min(k, floor(T / m))``); V3.2 its ``min(k, T)`` tokens.
- ``indexer``: each indexer score, ``H_I (d_I + 1)``, over every entry (V4's CSA) or
  every token (V3.2).
- ``projections``: one multiply-add per weight of the attention's projections, the
  indexer's and the compressors' (V3.2 absorbed: its up-projection folded into the
  query and out of the mix).

Left out: norms, softmaxes, rotations, the pooling's gated sums (``2 d`` or ``4 d`` per
token), the top-k selection, and everything outside attention (the experts, the
hyper-connections). Counts are of numbers and multiply-adds, every number the same width
on both sides (``BYTES_PER_NUMBER``, two bytes, for the cache's bytes): not a time.
``STORED_WIDTHS`` is a what-if with the narrower numbers of DeepSeek's serving formats,
as others describe them (see there).

``headline`` sets V4-Pro and V4-Flash against V3.2 at one context, as DeepSeek-V4's
report does at 1M tokens (V4-Pro: 27% of V3.2's single-token FLOPs and 10% of its KV
cache; V4-Flash: 10% and 7%). Not a model module: the site's own.
"""

from __future__ import annotations

from llm_attention.hf_config import compressed_attention_options, config_dict

from .families import FAMILIES
from .family_rows import BYTES_PER_NUMBER
from .sparse_costs import DEEPSEEK_V32, per_key

ONE_MILLION = 2**20  # max_position_embeddings of both V4 models: 1,048,576 tokens
REPORT = {  # DeepSeek-V4's report, at 1M tokens, as fractions of DeepSeek-V3.2's
    "DeepSeek-V4-Pro": dict(flops=0.27, cache=0.10),
    "DeepSeek-V4-Flash": dict(flops=0.10, cache=0.07),
}

# A what-if, not read from the report here: bytes per number of each cache part in the
# formats others describe for DeepSeek's serving (V3.2: FlashMLA's FP8 latent beside a
# BF16 rotary key, FP8 indexer keys; V4: BF16 rotary dimensions, FP8 for the rest, FP4
# indexer keys). The scales that come with 8- and 4-bit numbers are left out.
STORED_WIDTHS = {
    "DeepSeek-V3.2": dict(rotary=2, other=1, indexer=1),
    "DeepSeek-V4-Pro": dict(rotary=2, other=1, indexer=0.5),
    "DeepSeek-V4-Flash": dict(rotary=2, other=1, indexer=0.5),
}

# name -> (source, the config.json fields DeepSeek-V4's attention reads).
# compress_ratios lists one rate per layer (0: sliding, 4: CSA, 128: HCA) and one more
# for the multi-token prediction layer, which transformers does not build.
PUBLISHED_V4 = FAMILIES["deepseek_v4"].published  # the family table's


def layer_cache(options: dict, num_tokens: int) -> dict:
    """Numbers one V4 layer holds after ``num_tokens`` tokens, by part: ``rotary`` and
    ``other`` (the turned ``d_r`` and the other ``d - d_r`` numbers of the window's keys
    and of the entries), ``indexer`` (its entries) and ``unpooled``. ``options`` are
    ``CompressedAttention``'s (``hf_config.compressed_attention_options``)."""
    d, d_r = options["head_dim"], options["rope_head_dim"]
    rows = min(options["window"], num_tokens)  # the window's keys
    held = dict(indexer=0, unpooled=0)
    rate = options.get("compress_rate")
    if rate is not None:
        count, open_window = num_tokens // rate, num_tokens % rate
        rows += count  # the entries
        if options["layer_type"] == "heavily_compressed_attention":
            held["unpooled"] = open_window * 2 * d  # c and z of the open window
        else:
            d_index = options["index_head_dim"]
            held["indexer"] = count * d_index
            closed = rate if count else 0  # the closed window's first halves, c and z
            held["unpooled"] = (open_window * 4 + closed * 2) * (d + d_index)
    return dict(rotary=rows * d_r, other=rows * (d - d_r), **held)


def layer_step(options: dict, num_tokens: int) -> dict:
    """Multiply-adds of one V4 layer for one new token with ``num_tokens`` held."""
    d, heads, d_in = options["head_dim"], options["num_heads"], options["d_in"]
    d_q, groups = options["q_lora_rank"], options["o_groups"]
    read = min(options["window"], num_tokens)  # the window's keys
    projections = (d_in * d_q + d_q * heads * d  # the queries
                   + d_in * d  # the shared key-value head
                   + heads * d * options["o_lora_rank"]  # each group to d_g
                   + groups * options["o_lora_rank"] * options["d_out"])
    rate, indexer = options.get("compress_rate"), 0
    if rate is not None:
        count = num_tokens // rate
        sparse = options["layer_type"] == "compressed_sparse_attention"
        width = 2 * d if sparse else d
        projections += 2 * d_in * width  # the compressor's c and z
        read += min(options["index_topk"], count) if sparse else count
        if sparse:
            index_heads, d_index = options["index_n_heads"], options["index_head_dim"]
            indexer = count * index_heads * (d_index + 1)
            projections += (d_q * index_heads * d_index + d_in * index_heads
                            + 2 * d_in * 2 * d_index)
    return dict(keys=read * heads * 2 * d, indexer=indexer, projections=projections)


def v4_costs(values: dict, num_tokens: int) -> dict:
    """A V4 config's cache (numbers, all layers, by part) and step (multiply-adds, all
    layers, by part) with ``num_tokens`` held."""
    cache, step = {}, {}
    layers = config_dict(values)["num_hidden_layers"]
    for index in range(layers):
        options = compressed_attention_options(values, index)
        for total, part in ((cache, layer_cache(options, num_tokens)),
                            (step, layer_step(options, num_tokens))):
            for key, value in part.items():
                total[key] = total.get(key, 0) + value
    return dict(cache=cache, step=step)


def v32_costs(values: dict, num_tokens: int) -> dict:
    """DeepSeek-V3.2's cache and step, counted the same way (absorbed attention over the
    indexer's top-k, the indexer over every token)."""
    cost, layers = per_key(values), values["num_hidden_layers"]
    heads, d_in, d_q = values["num_attention_heads"], values["hidden_size"], (
        values["q_lora_rank"])
    d_c, d_r = values["kv_lora_rank"], values["qk_rope_head_dim"]
    d_n, d_v = values["qk_nope_head_dim"], values["v_head_dim"]
    projections = (d_in * d_q + d_q * heads * (d_n + d_r) + d_in * (d_c + d_r)
                   + heads * d_n * d_c + heads * d_v * d_c  # folded in and out
                   + heads * d_v * d_in + cost["indexer_per_token"])
    kept = min(values["index_topk"], num_tokens)
    cache = dict(rotary=num_tokens * d_r, other=num_tokens * d_c,
                 indexer=num_tokens * cost["index_key"])
    step = dict(keys=kept * cost["absorbed"], indexer=num_tokens * cost["indexer"],
                projections=projections)
    return dict(cache={k: v * layers for k, v in cache.items()},
                step={k: v * layers for k, v in step.items()})


def cache_bytes(cache: dict, widths: dict | None = None) -> float:
    """Bytes of a cache counted by part, ``widths`` bytes per number of each part
    (``BYTES_PER_NUMBER`` for a part it does not name)."""
    widths = widths or {}
    return sum(count * widths.get(part, BYTES_PER_NUMBER)
               for part, count in cache.items())


def headline(num_tokens: int = ONE_MILLION, widths: dict | None = None) -> dict:
    """Per model: cache bytes per token, attention FLOP of one new token (two per
    multiply-add) with and without the projections, and each as a fraction of V3.2's.
    ``widths``: model name -> bytes per number of each cache part (``cache_bytes``); by
    default every number takes ``BYTES_PER_NUMBER``."""
    base = v32_costs(DEEPSEEK_V32[1], num_tokens)
    rows, widths = {}, widths or {}
    for name, (source, values) in {"DeepSeek-V3.2": DEEPSEEK_V32,
                                   **PUBLISHED_V4}.items():
        costs = base if name == "DeepSeek-V3.2" else v4_costs(values, num_tokens)
        step = costs["step"]
        rows[name] = dict(
            source=source,
            cache_bytes_per_token=cache_bytes(costs["cache"], widths.get(name))
            / num_tokens,
            flop=2 * sum(step.values()),
            flop_over_context=2 * (step["keys"] + step["indexer"]),
        )
    for row in rows.values():
        v32 = rows["DeepSeek-V3.2"]
        for key in ("cache_bytes_per_token", "flop", "flop_over_context"):
            row[f"{key}_vs_v32"] = row[key] / v32[key]
    return rows
