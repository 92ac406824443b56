# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Generate tokens with a ``GPTModel``: the simple way, and with a KV cache.

Shapes: ``B`` batch, ``T`` prompt tokens, ``N`` new tokens, ``V`` vocabulary size.

Without a cache, every step runs the model on the whole sequence so far and keeps the
last position's logits: step ``n`` costs a pass over ``T + n`` tokens. With a cache, the
prompt runs once (the *prefill*), then every step runs the model on the one new token,
whose queries attend to the keys and values the caches hold (the *decode* steps).
Both give the same tokens; the logits agree to within rounding.

Builds on ``gpt.py`` and ``kv_cache.py`` of this package, imported relatively: copy them
with this file, under any package name (its API page offers the set as one download).
MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import numbers

import torch

from .gpt import GPTModel
from .kv_cache import KVCache


def new_caches(model: GPTModel, batch_size: int) -> list[KVCache]:
    """One empty ``KVCache`` per block of ``model``, with its dtype, device and size."""
    if not isinstance(model, GPTModel):
        raise TypeError(f"model must be a GPTModel, got {type(model).__name__}")
    weight = model.out_head.weight
    return [
        KVCache(
            batch_size, block.att.num_heads, block.att.head_dim, model.context_length,
            dtype=weight.dtype, device=weight.device,
        )  # fmt: skip
        for block in model.trf_blocks
    ]


def _check_arguments(model, tokens, max_new_tokens, temperature, top_k) -> None:
    if not isinstance(model, GPTModel):
        raise TypeError(f"model must be a GPTModel, got {type(model).__name__}")
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
        got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else tokens
        raise ValueError(f"tokens must be a (B, T) tensor of ids, got {got!r}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise TypeError(f"max_new_tokens must be an int, got {max_new_tokens!r}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    total = tokens.shape[1] + max_new_tokens
    if total > model.context_length:
        raise ValueError(
            f"{tokens.shape[1]} prompt tokens + max_new_tokens={max_new_tokens} = "
            f"{total}, more than the model's context_length={model.context_length}"
        )
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a float >= 0, got {temperature!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and (
        isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1
    ):
        raise ValueError(f"top_k must be None or a positive int, got {top_k!r}")


def _next_token(logits, temperature, top_k, generator):
    """Pick one token per sequence from the last position's logits ``(B, V)``."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1): greedy
    logits = logits.float() / temperature  # (B, V)
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, -torch.inf)  # (B, V)
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)


@torch.no_grad()
def generate(
    model: GPTModel,
    tokens: torch.Tensor,
    max_new_tokens: int,
    *,
    padding_mask: torch.Tensor | None = None,
    use_cache: bool = True,
    temperature: float = 0.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Extend ``tokens`` ``(B, T)`` by ``max_new_tokens`` tokens.

    Args:
        model: the model, used as it is (call ``model.eval()`` first to switch
            dropout off).
        tokens: the prompt, ``(B, T)`` ids; left-pad prompts of different lengths
            and say which positions are real in ``padding_mask``.
        max_new_tokens: ``N``; the prompt and the new tokens must fit the context.
        padding_mask: ``(B, T)`` bool, True = real token, or None.
        use_cache: prefill once and decode with KV caches (True), or re-run the
            whole sequence at every step (False).
        temperature: 0 picks the most likely token (greedy); above 0, samples
            from ``softmax(logits / temperature)``.
        top_k: when sampling, keep only the ``top_k`` most likely tokens.
        generator: a ``torch.Generator`` for reproducible sampling.

    Returns:
        ``(tokens, logits)``: the prompt followed by the new tokens, ``(B, T + N)``,
        and the logits each new token was chosen from, ``(B, N, V)``.
    """
    _check_arguments(model, tokens, max_new_tokens, temperature, top_k)
    caches = new_caches(model, tokens.shape[0]) if use_cache else None
    step_logits = []
    new = tokens  # what the model reads next: the prompt first
    for _ in range(max_new_tokens):
        logits = model(new, padding_mask, caches=caches)[:, -1]  # (B, V), last position
        step_logits.append(logits)
        next_token = _next_token(logits, temperature, top_k, generator)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)  # (B, T + n)
        if use_cache:
            new, padding_mask = next_token, None  # the caches keep the prompt's padding
        else:
            new = tokens  # the whole sequence again
            if padding_mask is not None:
                real = torch.ones_like(next_token, dtype=torch.bool)  # (B, 1)
                padding_mask = torch.cat([padding_mask, real], dim=1)  # (B, T + n)
    return tokens, torch.stack(step_logits, dim=1)  # (B, T + N), (B, N, V)
