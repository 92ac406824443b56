# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""What DeepSeek Sparse Attention costs and saves, counted for one layer at
DeepSeek-V3.2's published sizes, and the figure of those counts.

``DEEPSEEK_V32`` holds the fields of DeepSeek-V3.2's config that its attention reads,
under the names of the Hugging Face ``config.json``. The sizes are those DeepSeek
publishes in ``inference/config_671B_v3.2.json`` of
github.com/deepseek-ai/DeepSeek-V3.2-Exp (``dim``, ``n_heads``, ``q_lora_rank``,
``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``,
``index_n_heads``, ``index_head_dim``, ``index_topk``), its rotary settings those of
``ModelArgs`` in ``inference/model.py`` of the same repository (YaRN, factor 40 over
4,096 positions). Every size is also the default of transformers'
``DeepseekV32Config``, whose documentation names the checkpoint
``deepseek-ai/DeepSeek-V3.2-Exp`` (a test compares them). DeepSeek-V3.2 is the same
architecture, trained further.

Counts are multiply-adds (a flop is two) of what sets dense and sparse apart: each
(query, key) pair's scores and mixing, and the indexer's whole work. A pair costs what
the mode it runs in costs. Latent attention reads a prompt the plain way (DeepSeek's
"MHA mode": keys and values rebuilt per head, a pair over ``d_n + d_r`` and ``d_v``) and
generates the absorbed way (its "MQA mode": a pair over the latent, ``d_c + d_r`` and
``d_c``); DeepSeek runs sparse attention in the absorbed mode, every latent shared by
the heads of a query (DeepSeek-V3.2-Exp's report, section 1 and appendix A). So the
dense prefill is counted plain, the dense decoding step and the attention over the
top-k absorbed. Left out: the attention's own projections, the same dense or sparse
(rebuilding a key and folding a query cost the same, ``H d_c (d_n + d_v)``), and every
norm. The indexer's projections are counted, one multiply-add per weight and token.
Not a model module: it needs matplotlib for the figure.
"""

from __future__ import annotations

from .families import DEEPSEEK_V3 as _PUBLISHED_V3
from .families import DEEPSEEK_V32 as _PUBLISHED_V32

# DeepSeek-V3.2's sizes as its inference code ships them: the fields of its config.json
# that the family table reads, and those the layer's rotary angles and norms need.
DEEPSEEK_V32 = (
    "github.com/deepseek-ai/DeepSeek-V3.2-Exp: inference/config_671B_v3.2.json",
    dict(
        _PUBLISHED_V32[1],
        num_key_value_heads=128,
        rope_theta=10000,
        rope_scaling=_PUBLISHED_V3[1]["rope_scaling"],  # DeepSeek-V3's YaRN, the same
        rms_norm_eps=1e-06,
        attention_bias=False,
    ),
)


def per_key(sizes: dict) -> dict:
    """Multiply-adds for one query meeting one key, per token, and numbers read per key.

    ``absorbed``: every head's score over the cached row (``d_c + d_r``) and its share
    of the mixed latent (``d_c``); ``plain``: every head's score over its rebuilt key
    (``d_n + d_r``) and its value (``d_v``); ``indexer``: every indexer head's dot
    product with the key (``d_I``) and its weight; ``indexer_per_token``: the
    indexer's projections of one token (its query from the bottleneck, its key, its
    head weights). Numbers read: the cached row, or the indexer key.
    """
    heads, d_c = sizes["num_attention_heads"], sizes["kv_lora_rank"]
    d_r, d_n = sizes["qk_rope_head_dim"], sizes["qk_nope_head_dim"]
    d_v, d_in = sizes["v_head_dim"], sizes["hidden_size"]
    index_heads, d_index = sizes["index_n_heads"], sizes["index_head_dim"]
    return dict(
        absorbed=heads * ((d_c + d_r) + d_c),
        plain=heads * ((d_n + d_r) + d_v),
        indexer=index_heads * (d_index + 1),
        indexer_per_token=(sizes["q_lora_rank"] * index_heads * d_index
                           + d_in * d_index + d_in * index_heads),
        latent_row=d_c + d_r,
        index_key=d_index,
    )


def pairs(num_tokens: int, top_k: int | None = None) -> int:
    """(query, key) pairs of a causal prefill of ``num_tokens`` tokens: every key up to
    the query's own, or at most ``top_k`` of them."""
    if top_k is None or top_k >= num_tokens:
        return num_tokens * (num_tokens + 1) // 2
    return top_k * (top_k + 1) // 2 + (num_tokens - top_k) * top_k


def layer_costs(sizes: dict, num_tokens: int) -> dict:
    """One layer's multiply-adds (prefill of ``num_tokens`` tokens; decoding one token
    with ``num_tokens`` held) and the cache numbers a decoding step reads, dense and
    sparse; the sparse ones split into the indexer's part and the attention's.

    Dense prefill pairs are plain, every other pair absorbed (see the module's
    docstring); ``masked`` is the dense prefill with the indexer run beside it, the
    sparse result at no saving (DeepSeek's "masked MHA mode" for short prompts).
    """
    cost, k = per_key(sizes), sizes["index_topk"]
    kept = min(k, num_tokens)
    prefill = dict(
        dense=pairs(num_tokens) * cost["plain"],
        indexer=(pairs(num_tokens) * cost["indexer"]
                 + num_tokens * cost["indexer_per_token"]),
        sparse_attention=pairs(num_tokens, k) * cost["absorbed"],
    )
    prefill["masked"] = prefill["dense"] + prefill["indexer"]
    decode = dict(
        dense=num_tokens * cost["absorbed"],
        indexer=num_tokens * cost["indexer"] + cost["indexer_per_token"],
        sparse_attention=kept * cost["absorbed"],
    )
    read = dict(
        dense=num_tokens * cost["latent_row"],
        indexer=num_tokens * cost["index_key"],
        sparse_attention=kept * cost["latent_row"],
    )
    for counts in (prefill, decode, read):
        counts["sparse"] = counts["indexer"] + counts["sparse_attention"]
    return dict(prefill=prefill, decode=decode, read=read)


# Lines of the figure: (key, label, colour, line style)
LINES = (
    ("dense", "dense latent attention", "#e8710a", "-"),
    ("sparse", "sparse: indexer + top-k attention", "#1f77b4", "-"),
    ("indexer", "its indexer", "#1f77b4", "--"),
    ("sparse_attention", "its attention over k", "#2ca02c", ":"),
)


def cost_figure(sizes: dict, lengths, narrow: bool = False):
    """Multiply-adds of one layer against the length, log-log: a whole prefill, and one
    decoding step; dense, sparse, and the sparse layer's two parts."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, NullLocator

    from . import figures  # noqa: F401  (its ink, swapped in the dark variant)

    rows = [layer_costs(sizes, n) for n in lengths]
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        if narrow:
            fig, axes = plt.subplots(2, 1, figsize=(4.6, 7.4))
        else:
            fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        panels = (("prefill", "Prefill of T tokens (dense: plain)"),
                  ("decode", "Decoding one token, T held (dense: absorbed)"))
        for ax, (phase, title) in zip(axes, panels):
            for key, label, colour, style in LINES:
                ax.plot(lengths, [2 * r[phase][key] for r in rows], color=colour,
                        linestyle=style, marker="o", markersize=3, label=label)
            ax.set(xscale="log", yscale="log", xlabel="T (tokens)",
                   ylabel="FLOP per layer (log)", title=title)
            ticks = [n for n in lengths if n >= 1024 and (n & (n - 1)) == 0][::2]
            ax.set_xticks(ticks, labels=[f"{n // 1024}K" for n in ticks])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(alpha=0.3)
        if narrow:
            axes[1].legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.22),
                           ncol=1)
        else:
            axes[0].legend(fontsize=8, loc="upper left")
        fig.suptitle(
            f"One layer at DeepSeek-V3.2's sizes: k = {sizes['index_topk']:,}",
            fontsize=9,
        )
        fig.patch.set_alpha(0)
        fig.tight_layout()
    return fig
