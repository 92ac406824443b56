# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The running example: "Your journey starts with one step" as 6 tokens x 3 dimensions.

The embedding values are the ones readers of the book "Build a Large Language Model
(From Scratch)" meet in its attention chapter, so every number on the site can be
checked against it. Real embeddings have hundreds of dimensions; three keep every step
printable.

Shapes: ``toy_embeddings()`` is ``(T, d_in) = (6, 3)``.

Needs only torch. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch

TOKENS: tuple[str, ...] = ("Your", "journey", "starts", "with", "one", "step")

_EMBEDDINGS = (
    (0.43, 0.15, 0.89),  # Your
    (0.55, 0.87, 0.66),  # journey
    (0.57, 0.85, 0.64),  # starts
    (0.22, 0.58, 0.33),  # with
    (0.77, 0.25, 0.10),  # one
    (0.05, 0.80, 0.55),  # step
)


def toy_embeddings(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Return a fresh ``(6, 3)`` tensor of the example's embeddings.

    One row per token of ``TOKENS``. A new tensor each call, so a reader who edits it in
    place cannot change what later code sees.
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    return torch.tensor(_EMBEDDINGS, dtype=dtype)  # (T, d_in) = (6, 3)
