# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""A tiny GPT-style language model built around ``MultiHeadAttention``.

Shapes: ``B`` batch, ``T`` tokens, ``V`` vocabulary size, ``d`` the model's width
(``emb_dim``), ``H`` heads, ``L`` blocks (``num_layers``).

    x      = tok_emb(tokens) + pos_emb(positions)        (B, T) -> (B, T, d)
    x      = x + att(norm1(x)); x = x + ff(norm2(x))      L times, (B, T, d)
    logits = out_head(final_norm(x))                      (B, T, V)

The layout is GPT-2's (pre-norm blocks, learned position embeddings) and the names are
those of the book's ``GPTModel``. Two context managers open the model up for figures and
experiments: ``record_attention()`` keeps every head's attention weights, and
``ablate(heads)`` zeroes chosen heads' outputs. ``forward(..., caches=...)`` runs with
one ``KVCache`` per block (``kv_cache.py``; ``generate.py`` makes them) to generate text
one token at a time.

Builds on ``multihead.py`` and ``checks.py`` of this package, imported relatively: copy
them with this file, under any package name (its API page offers the set as one
download). MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch
from torch import nn

from .checks import check_size
from .multihead import MultiHeadAttention


class TransformerBlock(nn.Module):
    r"""One pre-norm transformer block: attention, then a feed-forward layer.

    $$x \leftarrow x + \mathrm{Attn}(\mathrm{LN}_1(x)), \qquad
      x \leftarrow x + W_2\,\mathrm{GELU}(W_1\,\mathrm{LN}_2(x))$$

    Shapes: ``x`` ``(B, T, d)`` in and out; ``padding_mask`` ``(B, T)`` bool, True =
    real token; ``cache`` a ``KVCache`` for this block's attention, or None.
    """

    def __init__(
        self,
        emb_dim: int,
        context_length: int,
        num_heads: int,
        dropout: float,
        qkv_bias: bool,
        fast_path: bool,
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(emb_dim)
        self.att = MultiHeadAttention(
            emb_dim, emb_dim, context_length, dropout, num_heads, qkv_bias,
            fast_path=fast_path,
        )  # fmt: skip
        self.norm2 = nn.LayerNorm(emb_dim)
        self.ff = nn.Sequential(
            nn.Linear(emb_dim, 4 * emb_dim),  # (B, T, d) -> (B, T, 4d)
            nn.GELU(approximate="tanh"),
            nn.Linear(4 * emb_dim, emb_dim),  # (B, T, 4d) -> (B, T, d)
        )
        self.drop_shortcut = nn.Dropout(dropout)

    def forward(self, x, padding_mask=None, cache=None):
        attended = self.att(self.norm1(x), padding_mask, cache=cache)  # (B, T, d)
        x = x + self.drop_shortcut(attended)  # (B, T, d)
        return x + self.drop_shortcut(self.ff(self.norm2(x)))  # (B, T, d)


def token_positions(
    tokens: torch.Tensor,
    padding_mask: torch.Tensor | None,
    caches: list | None,
    start: int,
) -> torch.Tensor:
    """The position of each token of ``tokens`` ``(B, T)`` in its own row: ``(B, T)``,
    or ``(T,)`` when no row is padded (every row alike).

    A row's first real token is at position 0 however many pads come before it, so a
    left-padded prompt continues exactly as it would alone. Each token counts the real
    tokens before it: those the caches already hold (their ``key_padding``) and those
    earlier in ``tokens``. Pads get the position of the next real token; attention
    never reads them.
    """
    held = getattr(caches[0], "key_padding", None) if caches and start else None
    num_tokens, device = tokens.shape[1], tokens.device
    if padding_mask is None and held is None:  # no padding: every row alike
        return torch.arange(start, start + num_tokens, device=device)  # (T,)
    if padding_mask is None:
        new = torch.arange(num_tokens, device=device)  # (T,)
    else:
        new = padding_mask.long().cumsum(dim=-1) - padding_mask.long()  # (B, T)
    if held is None:  # a cache that keeps no padding: its tokens all count
        return new + start  # (B, T)
    return new + held[:, :start].sum(dim=-1, keepdim=True)  # (B, T) + (B, 1)


class GPTModel(nn.Module):
    r"""A GPT-style decoder: embeddings, ``num_layers`` blocks, a final norm, logits.

    $$h_0 = E_{tok}[x_t] + E_{pos}[t], \quad h_\ell = \mathrm{Block}_\ell(h_{\ell-1}),
      \quad \mathrm{logits} = \mathrm{LN}(h_L)\, W_{out}^\top$$

    Args:
        vocab_size: ``V``, the number of token ids.
        context_length: the most tokens the model reads (size of ``pos_emb``).
        emb_dim: ``d``, the width of every token vector.
        num_heads: heads per attention layer; must divide ``emb_dim``.
        num_layers: ``L``, the number of transformer blocks.
        dropout: dropout probability in ``[0, 1)`` (embeddings, attention, shortcuts).
        qkv_bias: add a bias to the query, key and value projections.
        fast_path: give the attention layers the fused fast path.

    Shapes:
        ``forward(tokens, padding_mask=None, *, caches=None)``: ``tokens`` ``(B, T)``
        int64 ids in ``[0, V)``; ``padding_mask`` ``(B, T)`` bool, True = real token;
        ``caches`` one ``KVCache`` per block, or None. Returns logits ``(B, T, V)``.
        With caches, ``tokens`` are the next ``T`` tokens. A token's position counts
        the real tokens before it in its row (``token_positions``), so left padding
        changes nothing a real token computes.

    Raises:
        TypeError: an argument or input of the wrong type or dtype.
        ValueError: an argument or input of the wrong value or shape.
    """

    def __init__(
        self,
        vocab_size: int,
        context_length: int,
        emb_dim: int,
        num_heads: int,
        num_layers: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
        *,
        fast_path: bool = True,
    ) -> None:
        for name, value in (("vocab_size", vocab_size), ("num_layers", num_layers)):
            check_size(name, value)
        super().__init__()  # MultiHeadAttention checks the other arguments
        blocks = [
            TransformerBlock(
                emb_dim, context_length, num_heads, dropout, qkv_bias, fast_path
            )
            for _ in range(num_layers)
        ]
        self.tok_emb = nn.Embedding(vocab_size, emb_dim)  # (V, d)
        self.pos_emb = nn.Embedding(context_length, emb_dim)  # (T_max, d)
        self.drop_emb = nn.Dropout(dropout)
        self.trf_blocks = nn.ModuleList(blocks)
        self.final_norm = nn.LayerNorm(emb_dim)
        self.out_head = nn.Linear(emb_dim, vocab_size, bias=False)  # (V, d)

    @property
    def context_length(self) -> int:
        return self.pos_emb.num_embeddings

    def forward(
        self,
        tokens: torch.Tensor,
        padding_mask: torch.Tensor | None = None,
        *,
        caches: list | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, T, V)`` for every position of ``tokens`` ``(B, T)``."""
        start = self._check_inputs(tokens, caches, padding_mask)
        positions = token_positions(tokens, padding_mask, caches, start)  # (B, T)
        x = self.tok_emb(tokens) + self.pos_emb(positions)  # (B, T, d) + (T or B, T, d)
        x = self.drop_emb(x)  # (B, T, d)
        for i, block in enumerate(self.trf_blocks):
            cache = None if caches is None else caches[i]
            x = block(x, padding_mask, cache)  # (B, T, d)
        return self.out_head(self.final_norm(x))  # (B, T, d) -> (B, T, V)

    def _check_inputs(self, tokens, caches, padding_mask) -> int:
        """Raise a clear error for bad ``tokens``, ``caches`` or ``padding_mask``;
        return the start."""
        if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.long:
            got = getattr(tokens, "dtype", type(tokens).__name__)
            raise TypeError(f"tokens must be a torch.long tensor (B, T), got {got}")
        if tokens.dim() != 2 or 0 in tokens.shape:
            raise ValueError(
                "tokens must have shape (B, T) with B, T >= 1, "
                f"got {tuple(tokens.shape)}"
            )
        vocab_size = self.tok_emb.num_embeddings
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= vocab_size:
            raise ValueError(
                f"tokens must be ids in [0, {vocab_size}), "
                f"got values from {low} to {high}"
            )
        if padding_mask is not None:
            is_tensor = isinstance(padding_mask, torch.Tensor)
            if not is_tensor or padding_mask.dtype != torch.bool:
                got = getattr(padding_mask, "dtype", type(padding_mask).__name__)
                raise TypeError(
                    f"padding_mask must be a torch.bool tensor (B, T), got {got}"
                )
            if padding_mask.shape != tokens.shape:
                raise ValueError(
                    "padding_mask must have the shape of tokens "
                    f"{tuple(tokens.shape)}, got {tuple(padding_mask.shape)}"
                )
        start = 0
        if caches is not None:
            if not isinstance(caches, (list, tuple)) or len(caches) != len(
                self.trf_blocks
            ):
                raise ValueError(
                    f"caches must be a list of {len(self.trf_blocks)} KVCache (one per "
                    f"block), got {type(caches).__name__} of length "
                    f"{len(caches) if isinstance(caches, (list, tuple)) else '-'}"
                )
            start = getattr(caches[0], "length", 0)
        if start + tokens.shape[1] > self.context_length:
            raise ValueError(
                f"positions {start}..{start + tokens.shape[1] - 1} do not fit "
                f"context_length={self.context_length}"
            )
        return start

    @contextlib.contextmanager
    def record_attention(self) -> Iterator[list[torch.Tensor]]:
        """Keep every block's attention weights while the ``with`` block runs.

        Yields a list that each forward pass extends with one ``(B, H, T, T_k)`` tensor
        per block, in block order. The attention layers use the explicit path meanwhile
        (the fused one never forms the weights); the weights are read as they enter the
        layer's dropout, so they are exactly what multiplies the values in eval mode.
        """
        weights: list[torch.Tensor] = []

        def keep(module, inputs):
            weights.append(inputs[0].detach())  # (B, H, T, T_k)

        layers = [block.att for block in self.trf_blocks]
        fast = [att.fast_path for att in layers]
        hooks = [att.dropout.register_forward_pre_hook(keep) for att in layers]
        try:
            for att in layers:
                att.fast_path = False
            yield weights
        finally:
            for att, was_fast, hook in zip(layers, fast, hooks, strict=True):
                att.fast_path = was_fast
                hook.remove()

    @contextlib.contextmanager
    def ablate(self, heads: Iterable[tuple[int, int]]) -> Iterator[None]:
        """Zero the output of each ``(layer, head)`` in ``heads`` inside the ``with``.

        The head's context vectors are set to zero before ``out_proj`` mixes the heads,
        so the rest of the model runs as if that head had attended to nothing.
        """
        heads = list(heads)
        num_layers, num_heads = len(self.trf_blocks), self.trf_blocks[0].att.num_heads
        for item in heads:
            ok = isinstance(item, tuple) and len(item) == 2
            if not ok or not all(isinstance(i, int) for i in item):
                raise TypeError(
                    f"heads must hold (layer, head) int pairs, got {item!r}"
                )
            if not (0 <= item[0] < num_layers and 0 <= item[1] < num_heads):
                raise ValueError(
                    f"heads: {item} is not a (layer, head) of this model, which has "
                    f"{num_layers} layers of {num_heads} heads"
                )
        hooks = []
        for layer in sorted({layer for layer, _ in heads}):
            att = self.trf_blocks[layer].att
            zeroed = [head for each_layer, head in heads if each_layer == layer]

            def zero(module, inputs, att=att, zeroed=zeroed):
                context_vec = inputs[0]  # (B, T, d_out)
                split = context_vec.shape[:-1] + (att.num_heads, att.head_dim)
                context_vec = context_vec.reshape(split).clone()  # (B, T, H, d_h)
                context_vec[..., zeroed, :] = 0.0
                return (context_vec.flatten(-2),)  # (B, T, d_out)

            hooks.append(att.out_proj.register_forward_pre_hook(zero))
        try:
            yield
        finally:
            for hook in hooks:
                hook.remove()
