# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""DeepSeek-V4's attention: one shared key-value head over a sliding window and, in most
layers, compressed entries that each stand for many earlier tokens.

Shapes: ``B`` batch, ``T`` new tokens, ``T_w`` window keys, ``E`` compressed entries,
``d_in`` input width, ``d_out`` output width, ``H = num_heads``, ``d = head_dim``,
``d_q = q_lora_rank``, ``d_r`` the dimensions that turn, ``g = o_groups``,
``d_g = o_lora_rank``, ``W = window``, ``m = compress_rate``, ``k = index_topk``.

    Q   = RMSNorm_h( W_query_up( RMSNorm(X W_query_down) ) )   (B, H, T, d): per head,
          no weight; the last d_r dimensions turned at the query's position
    KV  = RoPE( RMSNorm(X W_kv) )       (B, T, d): one head, both the key and the value
    keys = the last W tokens' KV (window) and the ready compressed entries C_w
    O_h = softmax over keys and the head's sink s_h of (Q_h . key / sqrt(d)) mixing keys
    O_h = its last d_r dimensions turned back by the query's angle
    out = W_out( concat_g( O_group_g W_out_groups_g ) )   g groups of H / g heads, each
          to d_g numbers, then mixed to d_out

Why turn the output back: the values are the keys, so they carry the keys' rotation;
turning the mix by minus the query's angle leaves each key's share turned by the
distance to the query alone.

Three kinds of layer (``layer_type``, the config's names):

- ``sliding_attention``: the window alone.
- ``heavily_compressed_attention`` (HCA): plus one entry per ``m`` tokens (128 in the
  release), every ready entry attended.
- ``compressed_sparse_attention`` (CSA): plus one entry per ``m`` tokens (4 in the
  release) over overlapping windows, of which a lightning indexer picks the ``k``
  each query reads.

``compressor.py`` pools the entries and runs the indexer. Sliding layers turn by the
plain table (``rope_theta``), compressed layers by their own (``compress_rope_theta``,
YaRN-scaled in the release), as transformers reads the config.

``CompressedCache`` holds the window (its last ``W - 1`` tokens' KV), the entries, and
the tokens not yet pooled. Rows may be padded on the left: positions, windows and
entries are each row's own, so a padded row computes what its prompt alone computes.
Transformers 5.23 does not: its compressors and indexer pool every slot of a row,
padding included, in windows counted from the row's first slot
(``modeling_deepseek_v4.py`` 418, 534, 650), an entry is ready by ``position_ids``
(448, 589), and only the window's part of the mask hides padding. A left-padded row
then differs from its prompt alone in the compressed layers (its sliding layers agree),
whether ``position_ids`` count slots or, as ``generate`` makes them, real tokens.

Three forms, one result: the explicit one (``fast_path=False``); the fused kernel
(``fast_path=True``: ``scaled_dot_product_attention`` with each sink written as one more
key, of zero value, that every query meets at the sink's logit); and, for CSA,
``gathered=True``: each query's ``k`` chosen entries copied out and attended with its
window, not all entries behind a mask.

``from_hf_config`` reads a DeepSeek-V4 config; ``from_hf_state_dict`` renames
transformers' ``DeepseekV4Attention`` weights.

Builds on ``attention_variants.py``, ``checks.py``, ``compressor.py``,
``grouped_query.py``, ``hf_config.py``, ``lightning_indexer.py`` and
``rope_scaling.py`` of this package (and what they build on), imported relatively:
copy them with this file, under any package name (its API page offers the set as one
download). MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention_variants import variant_attention_explicit
from .checks import check_dropout, check_flag, check_inputs, check_size
from .compressor import CompressedIndexer, Compressor, rotary_angles, rotate_pairs
from .grouped_query import attention_mask
from .hf_config import COMPRESSED_KINDS, compressed_attention_options, rename_weights
from .lightning_indexer import top_k_keys
from .rope_scaling import rope_frequencies

HF_NAMES = {  # transformers' DeepseekV4Attention name -> ours
    "q_a_proj": "W_query_down", "q_a_norm": "query_norm", "q_b_proj": "W_query_up",
    "kv_proj": "W_kv", "kv_norm": "kv_norm", "o_a_proj": "W_out_groups",
    "o_b_proj": "out_proj", "sinks": "sinks",
    "compressor.kv_proj": "compressor.W_kv",
    "compressor.gate_proj": "compressor.W_gate",
    "compressor.kv_norm": "compressor.norm",
    "compressor.position_bias": "compressor.position_bias",
    "compressor.indexer.kv_proj": "indexer.compressor.W_kv",
    "compressor.indexer.gate_proj": "indexer.compressor.W_gate",
    "compressor.indexer.kv_norm": "indexer.compressor.norm",
    "compressor.indexer.position_bias": "indexer.compressor.position_bias",
    "compressor.indexer.q_b_proj": "indexer.W_query",
    "compressor.indexer.scorer.weights_proj": "indexer.W_head_weights",
}
BARE = ("sinks", "compressor.position_bias", "compressor.indexer.position_bias")


def from_hf_state_dict(state_dict: dict, prefix: str = "") -> dict:
    """Rename one ``DeepseekV4Attention`` layer's weights (its compressor's and
    indexer's included) to ``CompressedAttention``'s; ``prefix`` picks the layer out of
    a whole model's state dict, e.g. ``"model.layers.2.self_attn."``."""
    return rename_weights(state_dict, prefix, HF_NAMES, "a DeepSeek-V4 attention layer",
                          bare=BARE)


# --8<-- [start:cache]
class CompressedCache:
    """What one ``CompressedAttention`` layer keeps between calls.

    ``window`` ``(B, <= W - 1, d)``: the last tokens' KV, turned; ``pools``: the
    ``compressor.PoolState`` of the entries (and of the indexer's, in CSA), each with
    its entries and the tokens not yet pooled; ``length``: tokens seen (the slot of the
    next one); ``offset`` ``(B,)``: each row's padding before its first real token.
    """

    def __init__(self, batch_size: int, *, device=None) -> None:
        check_size("batch_size", batch_size)
        self.batch_size = batch_size
        self.window = None  # (B, <= W - 1, d) once a call stored it
        self.pools: dict = {}  # "compressor", "indexer" -> PoolState
        self.offset = torch.zeros(batch_size, dtype=torch.long, device=device)  # (B,)
        self.length = 0

    @property
    def nbytes(self) -> int:
        """Bytes held: the window, the entries and the tokens not yet pooled."""
        held = 0 if self.window is None else self.window.nbytes
        return held + sum(pool.nbytes for pool in self.pools.values())

    def reset(self) -> None:
        """Forget every token, to start a new sequence."""
        self.window, self.pools, self.length = None, {}, 0
        self.offset.zero_()
# --8<-- [end:cache]


# --8<-- [start:class]
class CompressedAttention(nn.Module):
    r"""DeepSeek-V4's attention layer, of any of its three kinds.

    $$o_{t,h} = R_{-t}\Big(\sum_{j} \frac{e^{a_{t,h,j}}}{e^{s_h} + \sum_{j'}
        e^{a_{t,h,j'}}}\, \mathrm{kv}_j\Big), \qquad a_{t,h,j} = \frac{q_{t,h} \cdot
        \mathrm{kv}_j}{\sqrt{d}}$$

    over the keys ``j`` query ``t`` may read: the window's and the ready compressed
    entries (in CSA, the ``k`` its indexer picks); $s_h$ is head $h$'s sink and $R_{-t}$
    turns the last ``d_r`` dimensions back by the query's angle.

    Args:
        d_in: width of each input token vector.
        d_out: width of the output.
        context_length: the most positions, cached ones included.
        dropout: probability of dropping an attention weight while training.
        num_heads: ``H``; ``o_groups`` must divide it.
        head_dim: ``d``, the width of a head and of the shared key-value head.
        q_lora_rank: ``d_q``, the queries' bottleneck.
        o_groups: ``g``, the groups of heads of the output projection.
        o_lora_rank: ``d_g``, each group's width after its projection.
        window: ``W``, the window's tokens (the query's own included).
        layer_type: ``"sliding_attention"``, ``"compressed_sparse_attention"`` or
            ``"heavily_compressed_attention"``.
        compress_rate: ``m``; None for a sliding layer.
        rope_head_dim: ``d_r``, even, at most ``head_dim`` (and ``index_head_dim``).
        rope_base: the rotary base of this kind of layer.
        rope_scaling: None, or a dict with ``rope_type`` and its parameters, as
            ``rope_scaling.rope_frequencies`` takes them (``yarn`` in the release).
        index_n_heads: ``H_I``, the indexer's heads (CSA only).
        index_head_dim: ``d_I``, their width and its entries' (CSA only).
        index_topk: ``k``, the entries each query reads (CSA only).
        norm_eps: the epsilon of every RMSNorm.
        fast_path: attend through ``scaled_dot_product_attention`` (same result).
        gathered: CSA only: attend over each query's ``k`` entries copied out, not all
            entries behind a mask (same result).

    Shapes:
        ``forward(x, padding_mask=None, *, cache=None)``: ``x`` ``(B, T, d_in)``,
        ``padding_mask`` ``(B, T)`` bool (True = real token; padding only before a
        row's first real token), output ``(B, T, d_out)``. With a ``CompressedCache``,
        ``x`` holds the new tokens only.
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float,
        num_heads: int, *, head_dim: int, q_lora_rank: int, o_groups: int,
        o_lora_rank: int, window: int,
        layer_type: str = "sliding_attention",
        compress_rate: int | None = None,
        rope_head_dim: int,
        rope_base: float = 10000.0,
        rope_scaling: dict | None = None,
        index_n_heads: int | None = None,
        index_head_dim: int | None = None,
        index_topk: int | None = None,
        norm_eps: float = 1e-6,
        fast_path: bool = False,
        gathered: bool = False,
    ) -> None:
        sizes = dict(d_in=d_in, d_out=d_out, context_length=context_length,
                     num_heads=num_heads, head_dim=head_dim, q_lora_rank=q_lora_rank,
                     o_groups=o_groups, o_lora_rank=o_lora_rank, window=window,
                     rope_head_dim=rope_head_dim)
        for name, value in sizes.items():
            check_size(name, value)
        check_dropout(dropout)
        for name, flag in (("fast_path", fast_path), ("gathered", gathered)):
            check_flag(name, flag)
        indexer = dict(index_n_heads=index_n_heads, index_head_dim=index_head_dim,
                       index_topk=index_topk)
        check_kind(layer_type, compress_rate, indexer, gathered)
        if num_heads % o_groups:
            raise ValueError(f"o_groups must divide num_heads, got "
                             f"o_groups={o_groups}, num_heads={num_heads}")
        widest = min(head_dim, index_head_dim or head_dim)
        if rope_head_dim % 2 or rope_head_dim > widest:
            raise ValueError(f"rope_head_dim must be even and at most {widest} "
                             f"(head_dim, index_head_dim), got {rope_head_dim}")
        if isinstance(norm_eps, bool) or not isinstance(norm_eps, (int, float)) or (
                not norm_eps > 0):
            raise ValueError(f"norm_eps must be a positive float, got {norm_eps!r}")
        if rope_scaling is not None and not isinstance(rope_scaling, dict):
            raise TypeError(f"rope_scaling must be None or a dict with a 'rope_type' "
                            f"and its parameters, got {rope_scaling!r}")
        inv_freq, factor = rope_frequencies(rope_head_dim, rope_base,
                                            **(rope_scaling or {}))  # (d_r / 2,)
        if factor != 1.0:
            raise ValueError(f"rope_scaling must leave the tables unscaled, as "
                             f"DeepSeek-V4 does (attention_factor=1.0), got attention "
                             f"factor {factor}")
        super().__init__()
        self.context_length, self.num_heads = context_length, num_heads
        self.head_dim, self.layer_type, self.window = head_dim, layer_type, window
        self.compress_rate, self.index_topk = compress_rate, index_topk
        self.fast_path, self.gathered = fast_path, gathered  # may be switched later
        self.scale = head_dim**-0.5
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (d_r / 2,)
        self.W_query_down = nn.Linear(d_in, q_lora_rank, bias=False)  # (d_q, d_in)
        self.query_norm = nn.RMSNorm(q_lora_rank, eps=norm_eps)
        self.W_query_up = nn.Linear(q_lora_rank, num_heads * head_dim, bias=False)
        self.head_norm = nn.RMSNorm(head_dim, eps=norm_eps, elementwise_affine=False)
        self.W_kv = nn.Linear(d_in, head_dim, bias=False)  # one head: key and value
        self.kv_norm = nn.RMSNorm(head_dim, eps=norm_eps)
        self.o_groups = o_groups
        self.W_out_groups = nn.Linear(  # g blocks of (d_g, H d / g), one per group
            num_heads * head_dim // o_groups, o_groups * o_lora_rank, bias=False)
        self.out_proj = nn.Linear(o_groups * o_lora_rank, d_out, bias=False)
        self.sinks = nn.Parameter(torch.zeros(num_heads))  # (H,): s_h
        self.compressor = self.indexer = None
        sparse = layer_type == "compressed_sparse_attention"
        if compress_rate is not None:
            self.compressor = Compressor(d_in, head_dim, compress_rate, overlap=sparse,
                                         norm_eps=norm_eps)
        if sparse:
            self.indexer = CompressedIndexer(d_in, q_lora_rank, index_n_heads,
                                             index_head_dim, compress_rate,
                                             norm_eps=norm_eps)
        self.dropout = nn.Dropout(dropout)

    @classmethod
    def from_hf_config(cls, config, layer_idx: int = 0, **overrides):
        """The attention of layer ``layer_idx`` of a DeepSeek-V4 config (transformers
        object or ``config.json`` dict); ``overrides`` replace options."""
        return cls(**{**compressed_attention_options(config, layer_idx), **overrides})

    def make_cache(self, batch_size: int) -> CompressedCache:
        """An empty ``CompressedCache`` for this layer."""
        return CompressedCache(batch_size, device=self.W_kv.weight.device)

    # --8<-- [start:forward]
    def forward(self, x, padding_mask=None, *, cache=None):
        """Attend over ``x`` ``(B, T, d_in)``; return ``(B, T, d_out)``."""
        b, num_tokens, start = self.check_call(x, padding_mask, cache)
        offset = left_padding(padding_mask, None if cache is None else cache.offset,
                              start, b, x.device)  # (B,): padding before each prompt
        slots = start + torch.arange(num_tokens, device=x.device)  # (T,)
        own = slots - offset[:, None]  # (B, T): each row's own positions
        cos, sin = rotary_angles(own.clamp(min=0), self.inv_freq)  # (B, T, d_r / 2)

        query_latent = self.query_norm(self.W_query_down(x))  # (B, T, d_q)
        queries = self.W_query_up(query_latent).view(b, num_tokens, -1, self.head_dim)
        queries = self.head_norm(queries)  # (B, T, H, d): each head to unit RMS
        queries = rotate_pairs(queries, cos[:, :, None], sin[:, :, None])
        queries = queries.transpose(1, 2)  # (B, H, T, d)
        kv = rotate_pairs(self.kv_norm(self.W_kv(x)), cos, sin)  # (B, T, d)

        window, mask_bool = self.window_keys(kv, cache, start, offset)
        entries, pools, selected = window[:, :0], {}, None  # a sliding layer has none
        if self.compressor is not None:
            entries, hidden, selected, pools = self.entries(
                x, query_latent, own, cos, sin, cache)  # (B, E, d), (B, T, E)
            mask_bool = torch.cat((mask_bool, hidden.unsqueeze(1)), dim=-1)
        # mask_bool (B, 1, T, T_w + E): the window's keys, then the entries
        context_vec = self.attend(queries, window, entries, mask_bool, selected)
        context_vec = rotate_pairs(  # (B, T, H, d): turned back by the query's angle
            context_vec.transpose(1, 2), cos[:, :, None], -sin[:, :, None])
        if cache is not None:  # only now: a call that raised left the cache as it was
            cache.window = window[:, max(window.shape[1] - self.window + 1, 0):]
            cache.pools, cache.offset, cache.length = pools, offset, start + num_tokens
        return self.project_out(context_vec)  # (B, T, d_out)
    # --8<-- [end:forward]

    def check_call(self, x, padding_mask, cache) -> tuple[int, int, int]:
        """Raise a clear error for bad input; return ``(B, T, start)``."""
        check_flag("fast_path", self.fast_path)
        check_flag("gathered", self.gathered)
        weight = self.W_kv.weight
        check_inputs(x, padding_mask, weight.shape[1], self.context_length, weight)
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        if cache is not None and not isinstance(cache, CompressedCache):
            raise TypeError(f"cache must be a CompressedCache or None, got "
                            f"{type(cache).__name__}")
        if cache is not None and cache.batch_size != b:
            raise ValueError(f"the cache holds {cache.batch_size} rows but x has {b}")
        start = 0 if cache is None else cache.length  # slot of the first new token
        if start + num_tokens > self.context_length:
            raise ValueError(f"positions {start}..{start + num_tokens - 1} go beyond "
                             f"context_length={self.context_length}")
        return b, num_tokens, start

    # --8<-- [start:window]
    def window_keys(self, kv, cache, start: int, offset):
        """The held and new keys ``(B, T_w, d)`` and which each query may not read
        ``(B, 1, T, T_w)``: the future, ``W`` or more tokens back, padding."""
        held = kv[:, :0] if cache is None or cache.window is None else cache.window
        keys = torch.cat((held, kv), dim=1)  # (B, T_w, d)
        first = start - held.shape[1]  # slot of the first key
        slots = first + torch.arange(keys.shape[1], device=kv.device)  # (T_w,)
        mask_bool = attention_mask(
            start, kv.shape[1], first, keys.shape[1], window=self.window,
            key_padding=slots[None] >= offset[:, None], device=kv.device,
        )  # (B, 1, T, T_w); True = hidden
        return keys, mask_bool
    # --8<-- [end:window]

    # --8<-- [start:entries]
    def entries(self, x, query_latent, own, cos, sin, cache):
        """Every entry made so far ``(B, E, d)``; which each query may not read ``(B, T,
        E)``: those not yet ready and, in CSA, those its indexer did not pick; the
        picks ``(B, T, k)`` (None outside CSA); the pools' new states."""
        held = {} if cache is None else cache.pools
        own_first = own[:, 0]  # (B,): own position of the first new token
        entries, _, pool = self.compressor.pool(
            x, own_first, self.inv_freq, held.get("compressor"))  # (B, E, d)
        pools = {"compressor": pool}
        place = torch.arange(entries.shape[1], device=x.device)  # (E,): entry w
        hidden = (place + 1) * self.compress_rate > own[..., None] + 1  # (B, T, E)
        if self.indexer is None:
            return entries, hidden, None, pools
        with torch.no_grad():  # the choice is not differentiable
            keys, _, pools["indexer"] = self.indexer.compressor.pool(
                x, own_first, self.inv_freq, held.get("indexer"))  # (B, E, d_I)
            if not entries.shape[1]:
                return entries, hidden, None, pools
            index_scores = self.indexer.scores(x, query_latent, keys, cos, sin)
            selected = top_k_keys(index_scores, hidden.unsqueeze(1),
                                  self.index_topk)  # (B, T, k): may include hidden
        chosen = torch.zeros_like(hidden).scatter_(-1, selected, True)  # (B, T, E)
        return entries, hidden | ~chosen, selected, pools
    # --8<-- [end:entries]

    def attend(self, queries, window, entries, mask_bool, selected):
        """``(B, H, T, d)`` in the form the layer is set to, over the window ``(B, T_w,
        d)`` and the entries ``(B, E, d)``."""
        if self.gathered and selected is not None:  # reads the picked entries alone
            return self.attend_gathered(queries, window, entries, mask_bool, selected)
        keys = torch.cat((window, entries), dim=1)  # (B, T_w + E, d): a copy of both
        if self.fast_path:
            return attend_fast(queries, keys, mask_bool, self.sinks, self.scale,
                               self.dropout.p if self.training else 0.0)
        return variant_attention_explicit(  # the keys are the values
            queries, keys.unsqueeze(1), keys.unsqueeze(1), mask_bool, self.dropout,
            scale=self.scale, sinks=self.sinks,
        )  # (B, H, T, d)

    # --8<-- [start:gathered]
    def attend_gathered(self, queries, window, entries, mask_bool, selected):
        """Each query against its window ``(B, T_w, d)`` and its ``k`` picked entries,
        copied out of ``entries`` ``(B, E, d)`` by ``selected`` ``(B, T, k)``: ``(B,
        H, T, d)``. Only the picked entries are read, not all ``E``."""
        b, _, num_tokens, d = queries.shape
        num_window, k = window.shape[1], selected.shape[-1]  # T_w, k
        index = selected.reshape(b, num_tokens * k, 1).expand(-1, -1, d)  # (B, T k, d)
        picked = entries.gather(1, index)  # (B, T k, d): copies k rows a query
        picked = picked.view(b, num_tokens, k, d)  # (B, T, k, d)
        mask_bool = mask_bool.expand(b, -1, -1, -1)  # (B, 1, T, T_w + E)
        late = mask_bool[:, 0, :, num_window:].gather(-1, selected)  # (B, T, k)
        hidden = torch.cat((mask_bool[..., :num_window], late.unsqueeze(1)), dim=-1)
        scores = torch.cat((
            queries @ window.unsqueeze(1).transpose(-2, -1),  # (B, H, T, T_w)
            torch.einsum("bhtd,btkd->bhtk", queries, picked),  # (B, H, T, k)
        ), dim=-1) * self.scale  # (B, H, T, T_w + k)
        scores = scores.masked_fill(hidden, -torch.inf)
        sink = self.sinks.view(1, -1, 1, 1).expand(b, -1, num_tokens, 1)  # (B,H,T,1)
        weights = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :-1]
        weights = self.dropout(weights.masked_fill(hidden, 0.0))  # (B, H, T, T_w+k)
        mixed = weights[..., :num_window] @ window.unsqueeze(1)  # (B, H, T, d)
        return mixed + torch.einsum("bhtk,btkd->bhtd", weights[..., num_window:],
                                    picked)  # (B, H, T, d)
    # --8<-- [end:gathered]

    def project_out(self, context_vec: torch.Tensor) -> torch.Tensor:
        """``(B, T, H, d)`` -> ``g`` groups of ``H / g`` heads, each through its block
        of ``W_out_groups`` to ``d_g`` numbers, then ``out_proj``: ``(B, T, d_out)``."""
        b, num_tokens = context_vec.shape[:2]
        grouped = context_vec.reshape(b, num_tokens, self.o_groups, -1)  # (B,T,g,Hd/g)
        blocks = self.W_out_groups.weight.view(self.o_groups, -1, grouped.shape[-1])
        mixed = torch.einsum("btgi,goi->btgo", grouped, blocks)  # (B, T, g, d_g)
        return self.out_proj(mixed.reshape(b, num_tokens, -1))  # (B, T, d_out)

    def extra_repr(self) -> str:
        kind = {"sliding_attention": "sliding", "compressed_sparse_attention": "CSA",
                "heavily_compressed_attention": "HCA"}[self.layer_type]
        rate = "" if self.compress_rate is None else f", rate={self.compress_rate}"
        topk = "" if self.index_topk is None else f", index_topk={self.index_topk}"
        return (f"{kind}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"window={self.window}{rate}{topk}, fast_path={self.fast_path}"
                + (", gathered=True" if self.gathered else ""))


# --8<-- [end:class]


# --8<-- [start:fast]
def attend_fast(queries, keys, mask_bool, sinks, scale, dropout_p):
    """``scaled_dot_product_attention`` with sinks: each head's sink becomes one more
    key of zero value, met by every query at the sink's logit (a last query coordinate
    ``s_h / scale`` against a last key coordinate 1). ``queries`` ``(B, H, T, d)``,
    ``keys`` ``(B, T_k, d)`` (the values too), ``mask_bool`` ``(B, 1, T, T_k)``."""
    b, num_heads, num_tokens, d = queries.shape
    column = (sinks / scale).to(queries.dtype).view(1, -1, 1, 1)  # (1, H, 1, 1)
    queries = torch.cat((queries, column.expand(b, -1, num_tokens, 1)), dim=-1)
    sink_key = keys.new_zeros(b, 1, d + 1)  # (B, 1, d + 1)
    sink_key[..., -1] = 1.0
    keyed = torch.cat((F.pad(keys, (0, 1)), sink_key), dim=1)  # (B, T_k + 1, d + 1)
    values = F.pad(keys, (0, 0, 0, 1))  # (B, T_k + 1, d): the sink's value is zero
    allowed = F.pad(~mask_bool, (0, 1), value=True)  # (B, 1, T, T_k + 1)
    return F.scaled_dot_product_attention(
        queries, keyed.unsqueeze(1), values.unsqueeze(1), attn_mask=allowed,
        dropout_p=dropout_p, scale=scale, enable_gqa=True,
    )  # (B, H, T, d)
# --8<-- [end:fast]


def check_kind(layer_type, compress_rate, indexer: dict, gathered: bool) -> None:
    """The options each kind of layer takes, and only those."""
    if layer_type not in COMPRESSED_KINDS:
        raise ValueError(f"layer_type must be one of {', '.join(COMPRESSED_KINDS)}, "
                         f"got {layer_type!r}")
    sliding = layer_type == "sliding_attention"
    sparse = layer_type == "compressed_sparse_attention"
    if sliding and compress_rate is not None:
        raise ValueError(f"compress_rate must be None for a sliding layer, got "
                         f"{compress_rate!r}")
    if not sliding:
        check_size("compress_rate", compress_rate)
    for name, value in indexer.items():
        if sparse:
            check_size(name, value)
        elif value is not None:
            raise ValueError(f"{name} belongs to compressed sparse attention only, "
                             f"got {value!r} for {layer_type!r}")
    if gathered and not sparse:
        raise ValueError(f"gathered=True needs compressed_sparse_attention (it gathers "
                         f"the indexer's picks), got {layer_type!r}")


def left_padding(padding_mask, offset, start: int, batch: int, device) -> torch.Tensor:
    """Each row's padding before its first real token ``(B,)``, after this call. Raises
    ``ValueError`` unless every row's padding comes before its first real token."""
    if offset is None:
        offset = torch.zeros(batch, dtype=torch.long, device=device)  # (B,)
    if padding_mask is None:
        return offset
    leading = (padding_mask.cumsum(dim=1) == 0).sum(dim=1)  # (B,) padding first
    late = padding_mask.sum(dim=1) != padding_mask.shape[1] - leading  # a gap later
    late |= (leading > 0) & (offset < start)  # padding after a row's real tokens
    if bool(late.any()):
        rows = late.nonzero().flatten().tolist()
        raise ValueError(
            f"padding_mask must pad on the left only (False before a row's first real "
            f"token, True after), got padding after real tokens in rows {rows}"
        )
    return offset + leading
