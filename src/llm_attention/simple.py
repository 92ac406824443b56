# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Self-attention without trainable weights.

Each token attends to every token by dot product.

Shapes: ``T`` tokens, each a vector of ``d`` numbers.

    scores  = X X^T                   (T, T)  how well each query matches each key
    weights = softmax(scores, dim=-1) (T, T)  each row sums to one
    context = weights X               (T, d)  a weighted sum of all tokens, per token

Nothing here is learned: the same input always gives the same weights. The next step
adds trainable projections (see ``self_attention.py``).

Needs only torch. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch


def _check_sequence(inputs: object, name: str = "inputs") -> None:
    if not isinstance(inputs, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape (T, d), "
            f"got {type(inputs).__name__}"
        )
    if inputs.dim() != 2:
        raise ValueError(
            f"{name} must be one sequence of shape (T, d), "
            f"got shape {tuple(inputs.shape)}"
            + (" (a batch? pass one sequence at a time)" if inputs.dim() == 3 else "")
        )
    if not inputs.is_floating_point():
        raise TypeError(
            f"{name} must hold floating-point numbers, got dtype {inputs.dtype}"
        )
    if inputs.shape[0] == 0 or inputs.shape[1] == 0:
        raise ValueError(
            f"{name} must have at least one token and one dimension, "
            f"got shape {tuple(inputs.shape)}"
        )


# --8<-- [start:scores]
def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token: ``X X^T``.

    Shape ``(T, d) -> (T, T)``; row ``i`` holds the scores of query token ``i``
    against all tokens.
    """
    _check_sequence(inputs)
    return inputs @ inputs.T  # (T, d) @ (d, T) -> (T, T)
# --8<-- [end:scores]


# --8<-- [start:weights]
def attention_weights(inputs: torch.Tensor) -> torch.Tensor:
    """Softmax of the scores over each row: ``softmax(X X^T)``.

    Shape ``(T, d) -> (T, T)``; each row sums to one.
    """
    scores = attention_scores(inputs)  # (T, T)
    return torch.softmax(scores, dim=-1)  # (T, T), rows sum to 1
# --8<-- [end:weights]


# --8<-- [start:context]
def simple_self_attention(inputs: torch.Tensor) -> torch.Tensor:
    """Context vectors ``softmax(X X^T) X``, shape ``(T, d) -> (T, d)``.

    Each output row is an average of all input rows, weighted by attention.
    """
    weights = attention_weights(inputs)  # (T, T)
    return weights @ inputs  # (T, T) @ (T, d) -> (T, d)
# --8<-- [end:context]
