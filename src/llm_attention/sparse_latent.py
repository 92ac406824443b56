# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""DeepSeek Sparse Attention (DeepSeek-V3.2): latent attention over the ``k`` tokens a
lightning indexer picks for each query, instead of over every earlier token.

Shapes: as ``latent.py`` (``B``, ``T``, ``T_k``, ``H``, ``d_c``, ``d_r``, ``d_n``,
``d_v``), plus ``d_I`` the indexer's key width and ``k = index_topk``.

    I = indexer scores                     (B, T, T_k)   lightning_indexer.py
    S_t = the k keys of largest I_{t, .} that query t may see
    head_h = softmax over s in S_t of (q_h . key_{h,s}) * scale, mixing values of S_t

Two forms give the same output:

- **masked** (``gathered=False``, the reference's): the usual latent attention over all
  ``T_k`` keys, with every key outside ``S_t`` hidden by the mask. It computes every
  score and throws most away: no arithmetic is saved, only the result is sparse.
- **gathered** (``gathered=True``): for each query, the ``k`` cached rows of ``S_t``
  are copied out and attended over in latent space (``absorb``'s algebra, whatever
  ``absorb`` says): ``k`` scores per query and head instead of ``T_k``.

Either way the indexer scores every (query, key) pair: the cost of a sequence still
grows with the square of its length, with a far smaller factor than attention's.

``SparseLatentCache`` holds the latent cache and the indexer's keys: ``d_c + d_r + d_I``
numbers per token and layer (512 + 64 + 128 in DeepSeek-V3.2).

GLM-5 runs the indexer on some layers only. A layer built with ``shared_topk=True`` has
none: it attends over the tokens the last earlier indexer layer chose, handed over by
a ``kv_sharing.SharedTopK`` passed as ``topk`` to both (the indexer layer records, the
sharing layer reads); its cache is a plain ``LatentCache``. Called without one, it
refuses. GLM-5's indexer also pairs neighbours in its rotary part
(``index_rope_interleave``).

``from_hf_config`` reads a DeepSeek-V3.2 or GLM-5 config; ``from_hf_state_dict``
renames the weights of transformers' ``DeepseekV32Attention`` or ``GlmMoeDsaAttention``
(its ``indexer`` included, where it has one).

Builds on ``latent.py``, ``lightning_indexer.py``, ``kv_sharing.py``, ``checks.py``,
``grouped_query.py`` and ``hf_config.py`` of this package (and what they build on),
imported relatively: copy them with this file, under any package name (its API page
offers the set as one download). MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch

from . import latent, lightning_indexer
from .checks import check_flag, check_inputs, check_size
from .grouped_query import attention_mask, held_padding
from .hf_config import rename_weights, sparse_latent_attention_options
from .kv_sharing import SharedTopK
from .latent import LatentAttention, LatentCache
from .lightning_indexer import LightningIndexer, top_k_keys


def from_hf_state_dict(state_dict: dict, prefix: str = "") -> dict:
    """Rename one ``DeepseekV32Attention`` layer's weights (its indexer's included) to
    ``SparseLatentAttention``'s; ``prefix`` as in ``latent.from_hf_state_dict``."""
    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict, got {type(state_dict).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    inner = prefix + "indexer."
    indexer = {key: v for key, v in state_dict.items() if key.startswith(inner)}
    rest = {key: v for key, v in state_dict.items() if not key.startswith(inner)}
    renamed = latent.from_hf_state_dict(rest, prefix)
    if not indexer:  # a GLM-5 layer that reuses an earlier layer's choice
        return renamed
    names = lightning_indexer.HF_NAMES
    for key, tensor in rename_weights(indexer, inner, names, "an indexer").items():
        renamed[f"indexer.{key}"] = tensor
    return renamed


# --8<-- [start:cache]
class SparseLatentCache:
    """A ``LatentCache`` (``.latent``) and, beside it, the indexer's key of every token
    (``.index_keys`` ``(B, T_max, d_I)``): the indexer scores every held token at each
    step, so its keys are kept too.

    ``append(latent, rope_key, index_key, padding_mask=None)`` takes ``(B, T_new,
    d_c)``, ``(B, T_new, d_r)``, ``(B, T_new, d_I)`` and an optional ``(B, T_new)``
    bool mask; it returns views ``(B, length, d_c + d_r)``, ``(B, length, d_I)`` and
    ``(B, length)``. ``length`` is the position of the next token.
    """

    def __init__(
        self,
        batch_size: int,
        kv_lora_rank: int,
        qk_rope_head_dim: int,
        index_head_dim: int,
        context_length: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        check_size("index_head_dim", index_head_dim)
        self.latent = LatentCache(
            batch_size, kv_lora_rank, qk_rope_head_dim, context_length,
            dtype=dtype, device=device,
        )
        self.index_keys = torch.zeros(
            batch_size, context_length, index_head_dim, dtype=dtype, device=device
        )  # (B, T_max, d_I)

    @property
    def length(self) -> int:
        return self.latent.length

    @property
    def context_length(self) -> int:
        return self.latent.context_length

    @property
    def has_padding(self) -> bool:
        """Whether a padding flag False was ever appended (``LatentCache``'s)."""
        return self.latent.has_padding

    @property
    def nbytes(self) -> int:
        """Bytes of the latents, rotary keys and indexer keys (flags not counted)."""
        return self.latent.nbytes + self.index_keys.nbytes

    def reset(self) -> None:
        """Forget every token, to start a new sequence; the storage is kept."""
        self.latent.reset()

    def append(self, latent, rope_key, index_key, padding_mask=None):
        """Store the new tokens; return ``(entries, index_keys, key_padding)``."""
        batch, _, width = self.index_keys.shape
        num_new = latent.shape[1] if isinstance(latent, torch.Tensor) else None
        if not isinstance(index_key, torch.Tensor) or tuple(index_key.shape) != (
            batch, num_new, width
        ):
            raise ValueError(
                f"index_key must be a tensor of shape (B={batch}, T_new={num_new}, "
                f"d_I={width}), got "
                f"{getattr(index_key, 'shape', type(index_key).__name__)}"
            )
        if index_key.dtype != self.index_keys.dtype:
            raise TypeError(
                f"index_key must be {self.index_keys.dtype} like the cache, got "
                f"{index_key.dtype}"
            )
        start = self.length
        entries, key_padding = self.latent.append(latent, rope_key, padding_mask)
        self.index_keys[:, start : self.length] = index_key  # (B, T_new, d_I)
        return entries, self.index_keys[:, : self.length], key_padding
# --8<-- [end:cache]


# --8<-- [start:class]
class SparseLatentAttention(LatentAttention):
    r"""Latent attention over the ``index_topk`` tokens a lightning indexer picks.

    $$\mathrm{head}_h(t) = \sum_{s \in S_t} \mathrm{softmax}_{s \in S_t}\big(
        s\,(q^n_h \cdot W^{uk}_h c_s + q^r_h \cdot k^r_s)\big)\, W^{uv}_h c_s,
        \qquad S_t = \operatorname{top-k}_{s \le t} I_{t,s}$$

    with $I_{t,s}$ the indexer's score (``lightning_indexer.LightningIndexer``) and
    everything else as in ``LatentAttention``.

    Args:
        d_in: width of each input token vector, as in ``LatentAttention``.
        d_out: width of the output.
        context_length: the most positions, cached ones included.
        dropout: probability of dropping an attention weight while training.
        num_heads: ``H``.
        q_lora_rank: ``d_q``; required: the indexer's queries start from the same
            normed bottleneck as the attention's.
        index_n_heads: ``H_I``, the indexer's heads.
        index_head_dim: ``d_I``, their width (at least ``qk_rope_head_dim``).
        index_topk: ``k``, the tokens each query attends to.
        gathered: attend over the ``k`` selected latents only (the gathered form)
            rather than over all with the rest masked (the reference's form); the
            same result. It copies ``k`` rows per query, ``T k (d_c + d_r)``
            numbers at once: made for decoding, where ``T`` is 1; split a long
            prompt into pieces through the cache.
        shared_topk: no indexer: attend over the tokens an earlier layer's
            indexer chose, read from the ``SharedTopK`` passed as ``topk`` (GLM-5's
            ``"shared"`` layers).
        index_rope_interleave: the indexer's rotary part pairs neighbours (GLM-5).
        **latent_options: the other options of ``LatentAttention``
            (``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``,
            ``v_head_dim``, ``rope_scaling``, ``absorb``, ``fast_path``, ...).

    Shapes:
        ``forward(x, padding_mask=None, *, cache=None)``: ``x`` ``(B, T, d_in)``,
        ``padding_mask`` ``(B, T)`` bool (True = real token), output
        ``(B, T, d_out)``. With a ``SparseLatentCache`` (a ``LatentCache`` for a
        ``shared_topk`` layer), ``x`` holds only the new tokens, at positions
        ``cache.length..``. ``topk``: a ``SharedTopK`` that an indexer layer fills
        and a ``shared_topk`` layer reads (required there).
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        *,
        q_lora_rank: int,
        index_n_heads: int,
        index_head_dim: int,
        index_topk: int,
        gathered: bool = False,
        shared_topk: bool = False,
        index_rope_interleave: bool = False,
        **latent_options: object,
    ) -> None:
        if q_lora_rank is None:
            raise ValueError(
                "q_lora_rank must be an int: the indexer's queries are made from the "
                "query bottleneck, got None"
            )
        check_size("index_topk", index_topk)
        for name, flag in (("gathered", gathered), ("shared_topk", shared_topk),
                           ("index_rope_interleave", index_rope_interleave)):
            check_flag(name, flag)
        if latent_options.get("temperature_tuning") is not None:
            raise ValueError(
                "temperature_tuning is not implemented for sparse latent attention"
            )
        super().__init__(
            d_in, d_out, context_length, dropout, num_heads, q_lora_rank=q_lora_rank,
            **latent_options,
        )
        check_size("index_head_dim", index_head_dim)
        if index_head_dim < self.qk_rope_head_dim:
            raise ValueError(
                f"index_head_dim must be at least qk_rope_head_dim="
                f"{self.qk_rope_head_dim} (the indexer turns that many of its "
                f"dimensions), got {index_head_dim}"
            )
        self.indexer = None if shared_topk else LightningIndexer(
            d_in, q_lora_rank, index_n_heads, index_head_dim, self.qk_rope_head_dim,
            rope_interleave=index_rope_interleave,
        )
        self.index_head_dim = index_head_dim  # d_I
        self.shared_topk = shared_topk
        self.index_topk = index_topk  # k
        self.gathered = gathered  # may be switched later

    @classmethod
    def from_hf_config(cls, config, layer_idx: int = 0, **overrides):
        """The attention of layer ``layer_idx`` of a DeepSeek-V3.2 or GLM-5 config
        (transformers object or ``config.json`` dict); a GLM-5 layer that reuses an
        earlier layer's choice comes with ``shared_topk=True``
        (``hf_config.topk_source_layer`` names that layer)."""
        return cls(**{**sparse_latent_attention_options(config, layer_idx),
                      **overrides})

    # --8<-- [start:forward]
    def forward(self, x, padding_mask=None, *, cache=None, topk=None):
        """Attend over ``x`` ``(B, T, d_in)``; return ``(B, T, d_out)``."""
        for name in ("absorb", "fast_path", "gathered"):
            check_flag(name, getattr(self, name))
        weight = self.W_kv_down.weight
        check_inputs(x, padding_mask, weight.shape[1], self.context_length, weight)
        start = self.check_handoff(cache, topk)  # position of the first new token
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        if start + num_tokens > self.context_length:
            raise ValueError(
                f"positions {start}..{start + num_tokens - 1} go beyond "
                f"context_length={self.context_length}"
            )
        d_c, d_n, d_r = self.kv_lora_rank, self.qk_nope_head_dim, self.qk_rope_head_dim
        query_latent = self.query_norm(self.W_query_down(x))  # (B, T, d_q), shared
        queries = self.W_query_up(query_latent).view(b, num_tokens, -1, d_n + d_r)
        queries = queries.transpose(1, 2)  # (B, H, T, d_n + d_r)
        q_nope, q_rope = queries.split([d_n, d_r], dim=-1)  # (B, H, T, d_n), d_r
        q_rope = self.turn(q_rope, start)  # (B, H, T, d_r)
        latent, rope_key = self.W_kv_down(x).split([d_c, d_r], dim=-1)  # d_c, d_r
        latent = self.latent_norm(latent)  # (B, T, d_c)
        rope_key = self.turn(rope_key.unsqueeze(1), start).squeeze(1)  # (B, T, d_r)
        cos, sin = self.rope.cos, self.rope.sin  # (T_max, d_r): the indexer's too
        index_keys = None
        if self.indexer is not None:
            with torch.no_grad():  # the selection is not differentiable
                index_keys = self.indexer.keys(x, cos, sin, start)  # (B, T, d_I)
        if isinstance(cache, SparseLatentCache):  # held and new tokens
            entries, index_keys, padding_mask = cache.append(
                latent, rope_key, index_keys, padding_mask
            )  # (B, T_k, d_c + d_r), (B, T_k, d_I), (B, T_k)
        elif cache is not None:  # a shared_topk layer's LatentCache
            entries, padding_mask = cache.append(latent, rope_key, padding_mask)
        else:
            entries = torch.cat((latent, rope_key), dim=-1)  # (B, T, d_c + d_r)
        padding_mask = held_padding(cache, padding_mask)  # None: no padding held
        num_keys = entries.shape[1]  # T_k
        mask_bool = attention_mask(
            start, num_tokens, start + num_tokens - num_keys, num_keys,
            key_padding=padding_mask, device=x.device,
        )  # (T, T_k) or (B, 1, T, T_k); True = hidden
        if self.indexer is None:  # the choice of an earlier layer (GLM-5)
            selected = topk.read(num_tokens, start, num_keys)  # (B, T, k)
        else:
            with torch.no_grad():
                index_scores = self.indexer.scores(
                    x, query_latent, index_keys, cos, sin, start
                )  # (B, T, T_k)
                selected = top_k_keys(index_scores, mask_bool, self.index_topk)
            if topk is not None:  # for the layers that reuse it
                topk.record(selected, start, num_keys)  # (B, T, k)
        if self.gathered:  # one new token, no padding: no chosen key is hidden
            plain = num_tokens == 1 and padding_mask is None
            context_vec = self.attend_gathered(
                q_nope, q_rope, entries, selected, None if plain else mask_bool
            )  # (B, H, T, d_v)
        else:
            mask_bool = mask_bool | ~chosen_keys(selected, num_keys)  # (B, 1, T, T_k)
            attend = self.attend_absorbed if self.absorb else self.attend_plain
            context_vec = attend(q_nope, q_rope, entries, mask_bool)  # (B, H, T, d_v)
        context_vec = context_vec.transpose(1, 2)  # (B, T, H, d_v)
        context_vec = context_vec.reshape(b, num_tokens, -1)  # (B, T, H d_v)
        return self.out_proj(context_vec)  # (B, T, d_out)
    # --8<-- [end:forward]

    # --8<-- [start:gathered]
    def attend_gathered(self, q_nope, q_rope, entries, selected, mask_bool):
        """Each query attends, in latent space, over its own ``k`` cached rows, copied
        out of ``entries`` ``(B, T_k, d_c + d_r)`` by ``selected`` ``(B, T, k)``:
        ``(B, H, T, d_v)``."""
        b, num_heads, num_tokens, _ = q_nope.shape
        k = selected.shape[-1]
        w_uk, w_uv = self.up_projections()  # (H, d_n, d_c), (H, d_v, d_c)
        q_latent = torch.einsum("bhtn,hnc->bhtc", q_nope, w_uk)  # (B, H, T, d_c)
        queries = torch.cat((q_latent, q_rope), dim=-1)  # (B, H, T, d_c + d_r)
        # One small multi-query problem per query: its H heads are the rows...
        rows = queries.transpose(1, 2)  # (B, T, H, d_c + d_r)
        rows = rows.reshape(b * num_tokens, 1, num_heads, -1)  # (B T, 1, H, d_c + d_r)
        # ... and its k selected cache rows the keys (values: their latents).
        width = entries.shape[-1]  # d_c + d_r
        index = selected.reshape(b, num_tokens * k, 1)  # (B, T k, 1)
        index = index.expand(-1, -1, width)  # (B, T k, d_c + d_r): a view
        keys = entries.gather(1, index)  # (B, T k, d_c + d_r): copies of the rows
        keys = keys.view(b * num_tokens, 1, k, width)  # (B T, 1, k, d_c + d_r)
        values = keys[..., : self.kv_lora_rank]  # (B T, 1, k, d_c): a view
        hidden = None  # mask_bool None: every chosen key may be attended
        if mask_bool is not None and mask_bool.dim() == 2:  # (T, T_k) -> (B, T, T_k)
            mask_bool = mask_bool.expand(b, -1, -1)
        if mask_bool is not None:  # chosen but in the future, or padding
            hidden = mask_bool.reshape(b, num_tokens, -1).gather(-1, selected)
            hidden = hidden.view(b * num_tokens, 1, 1, k)  # (B T, 1, 1, k)
        mixed = self.attend(rows, keys, values, hidden, folded=True)  # (B T,1,H,d_c)
        mixed = mixed.view(b, num_tokens, num_heads, -1).transpose(1, 2)  # (B,H,T,d_c)
        return torch.einsum("bhtc,hvc->bhtv", mixed, w_uv)  # (B, H, T, d_v)
    # --8<-- [end:gathered]

    def check_handoff(self, cache, topk) -> int:
        """Check the cache and the ``SharedTopK`` this layer was given; return the
        position of the first new token."""
        if topk is not None and not isinstance(topk, SharedTopK):
            raise TypeError(
                f"topk must be a SharedTopK or None, got {type(topk).__name__}"
            )
        if self.shared_topk and topk is None:
            raise TypeError(
                "a layer with shared_topk=True attends over the tokens an earlier "
                "layer's indexer chose: pass the SharedTopK (kv_sharing.py) that layer "
                "was called with as topk, after it ran on the same tokens"
            )
        kind = LatentCache if self.shared_topk else SparseLatentCache
        if cache is not None and not isinstance(cache, kind):
            raise TypeError(
                f"cache must be a {kind.__name__} or None, got {type(cache).__name__}"
            )
        return 0 if cache is None else cache.length

    def make_cache(self, batch_size: int) -> SparseLatentCache | LatentCache:
        """An empty ``SparseLatentCache`` for this layer (a ``LatentCache`` for a
        ``shared_topk`` layer, which keeps no indexer keys)."""
        weight = self.W_kv_down.weight
        if self.shared_topk:
            return super().make_cache(batch_size)
        return SparseLatentCache(
            batch_size, self.kv_lora_rank, self.qk_rope_head_dim,
            self.index_head_dim, self.context_length,
            dtype=weight.dtype, device=weight.device,
        )

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, index_topk={self.index_topk}, "
            f"gathered={self.gathered}"
            + (", shared_topk=True" if self.shared_topk else "")
        )


# --8<-- [end:class]


def chosen_keys(selected: torch.Tensor, num_keys: int) -> torch.Tensor:
    """``(B, 1, T, T_k)`` bool, True at the keys in ``selected`` ``(B, T, k)``."""
    b, num_tokens, _ = selected.shape
    chosen = torch.zeros(
        b, num_tokens, num_keys, dtype=torch.bool, device=selected.device
    )  # (B, T, T_k)
    return chosen.scatter_(-1, selected, True).unsqueeze(1)  # (B, 1, T, T_k)
