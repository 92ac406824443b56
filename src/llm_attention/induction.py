# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""A task that only attention by content solves, a tiny GPT trained on it, head scores.

Each sequence holds ``T`` distinct random token ids, except that a segment of ``S``
tokens appears twice, at random places. Inside the second copy the next token can be
known: find where the current token occurred before, and read the token that followed
it. Nothing else predicts it, and the place changes from sequence to sequence, so the
model has to look back by content, not by position.

Shapes: ``B`` batch, ``T`` tokens (``seq_len``), ``S`` the repeated segment's length,
``V`` vocabulary size, ``L`` layers, ``H`` heads.

``trained_model(config)`` trains once per process and config; set the environment
variable ``LLM_ATTENTION_RUN_CACHE`` to a folder to also keep the result on disk, keyed
by the code of the modules involved and the torch version, so that separate processes
(test workers, a site build) share one run.

Builds on ``gpt.py`` and ``multihead.py`` of this package (the run's key on disk reads
their source), imported relatively: copy them with this file, under any package name
(its API page offers the set as one download). MIT licence: keep the first two lines of
each file.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pathlib
import sys
import time

import torch
import torch.nn.functional as F

from .gpt import GPTModel

CACHE_ENV = "LLM_ATTENTION_RUN_CACHE"


@dataclasses.dataclass(frozen=True)
class InductionConfig:
    """Everything that decides a training run: same config, same model."""

    vocab_size: int = 32
    seq_len: int = 24
    segment: int = 8  # S, the repeated segment's length
    emb_dim: int = 64
    num_heads: int = 4
    num_layers: int = 2
    steps: int = 300
    batch_size: int = 64
    lr: float = 5e-3
    seed: int = 0
    # A seed: multiply every initial weight by (1 + 1e-6 * noise). Another CPU rounds
    # differently, and training amplifies such differences; nudged runs show what holds
    # on every machine (None: no nudge).
    nudge: int | None = None


@dataclasses.dataclass
class InductionBatch:
    """Sequences with a repeated segment and where its two copies start."""

    tokens: torch.Tensor  # (B, T) int64
    first: torch.Tensor  # (B,) start of the first copy
    second: torch.Tensor  # (B,) start of the second copy

    def predictable(self, segment: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch rows and positions ``t`` whose next token the first copy gives.

        Positions ``second .. second + S - 2``: at each, the token after the first
        copy's match is the answer. Both results are ``(B * (S - 1),)``.
        """
        offsets = torch.arange(segment - 1)  # (S - 1,)
        positions = self.second[:, None] + offsets  # (B, S - 1)
        rows = torch.arange(len(self.second))[:, None]  # (B, 1)
        rows = rows.expand_as(positions)  # (B, S - 1)
        return rows.reshape(-1), positions.reshape(-1)


def make_batch(
    config: InductionConfig, batch_size: int, generator: torch.Generator
) -> InductionBatch:
    """Random sequences of distinct ids in which one segment of ``S`` ids repeats."""
    t, s = config.seq_len, config.segment
    if config.vocab_size < t or t < 2 * s:
        raise ValueError(
            f"need vocab_size >= seq_len >= 2 * segment, got vocab_size="
            f"{config.vocab_size}, seq_len={t}, segment={s}"
        )
    scores = torch.rand(batch_size, config.vocab_size, generator=generator)  # (B, V)
    tokens = scores.argsort(dim=-1)[:, :t]  # (B, T): distinct ids, random order
    first = torch.randint(0, t - 2 * s + 1, (batch_size,), generator=generator)  # (B,)
    room = t - s - (first + s) + 1  # (B,) places left for the second copy
    second = first + s + (torch.rand(batch_size, generator=generator) * room).long()
    span = torch.arange(s)  # (S,)
    rows = torch.arange(batch_size)[:, None]  # (B, 1)
    tokens[rows, second[:, None] + span] = tokens[rows, first[:, None] + span]
    return InductionBatch(tokens, first, second)


def repeat_loss_and_accuracy(
    logits: torch.Tensor, batch: InductionBatch, segment: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy and accuracy on the predictable positions of the second copy."""
    rows, positions = batch.predictable(segment)  # (N,), (N,)
    chosen = logits[rows, positions]  # (N, V)
    targets = batch.tokens[rows, positions + 1]  # (N,)
    loss = F.cross_entropy(chosen.float(), targets)
    accuracy = (chosen.argmax(dim=-1) == targets).float().mean()
    return loss, accuracy


@torch.no_grad()
def accuracy_without(
    model: GPTModel, batch: InductionBatch, segment: int, heads=()
) -> float:
    """Accuracy on the repeat with the ``(layer, head)`` pairs in ``heads`` zeroed."""
    with model.ablate(heads):
        logits = model(batch.tokens)  # (B, T, V)
    return repeat_loss_and_accuracy(logits, batch, segment)[1].item()


def new_model(config: InductionConfig) -> GPTModel:
    """The untrained model of ``config``: its seed's weights, nudged if asked."""
    torch.manual_seed(config.seed)
    model = GPTModel(
        config.vocab_size, config.seq_len, config.emb_dim, config.num_heads,
        config.num_layers, dropout=0.0, fast_path=True,
    )  # fmt: skip
    if config.nudge is not None:
        nudge_weights(model, config.nudge)
    return model


@torch.no_grad()
def nudge_weights(model: torch.nn.Module, seed: int, size: float = 1e-6) -> None:
    """Multiply every parameter by ``1 + size * noise``, the noise standard normal
    from a generator of its own (``seed``), leaving the global random state alone."""
    generator = torch.Generator().manual_seed(seed)
    for parameter in model.parameters():
        noise = torch.randn(parameter.shape, generator=generator)  # like the parameter
        parameter.mul_(1 + size * noise.to(parameter.dtype))


def train(config: InductionConfig) -> tuple[dict, list[float]]:
    """Train a fresh model with AdamW; return its state dict and the loss per step.

    Runs on one CPU thread: the model is so small that more threads barely help, and
    on a machine shared with other work they can make it many times slower.
    """
    model = new_model(config).train()
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    losses = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(config.steps):
            batch = make_batch(config, config.batch_size, generator)
            logits = model(batch.tokens)  # (B, T, V)
            loss, _ = repeat_loss_and_accuracy(logits, batch, config.segment)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    return model.state_dict(), losses


def _cache_key(config: InductionConfig) -> str:
    from . import gpt, multihead

    fields = sorted(dataclasses.asdict(config).items())  # the values, not the class
    digest = hashlib.sha256(repr(fields).encode())
    digest.update(torch.__version__.encode())
    for module in (multihead, gpt, sys.modules[__name__]):
        digest.update(pathlib.Path(module.__file__).read_bytes())
    return digest.hexdigest()[:20]


def kept_on_disk(name: str, key: str, compute):
    """``compute()``, run once for every process that asks with the same ``key``:
    with ``$LLM_ATTENTION_RUN_CACHE`` set to a folder, the first process runs it and
    keeps the result there as ``<name>-<key>.pt``; the others wait for it and load it.
    Without the variable, ``compute()`` runs at every call. The result must be tensors
    and plain Python values (it is loaded with ``weights_only=True``)."""
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        return compute()
    import fcntl  # Unix only: imported here so that the module loads everywhere

    path = pathlib.Path(folder) / f"{name}-{key}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process computes, the others wait
        if not path.exists():
            partial = path.with_suffix(".part")
            torch.save(compute(), partial)
            os.replace(partial, path)
        return torch.load(path, weights_only=True)


def _train_or_load(config: InductionConfig) -> tuple[dict, list[float], float]:
    """Train, or load a run kept under ``$LLM_ATTENTION_RUN_CACHE`` by any process."""

    def run() -> dict:
        start = time.perf_counter()
        state, losses = train(config)
        seconds = time.perf_counter() - start
        return {"state": state, "losses": losses, "seconds": seconds}

    saved = kept_on_disk("induction", _cache_key(config), run)
    return saved["state"], saved["losses"], saved["seconds"]


@functools.lru_cache(maxsize=8)
def _trained(config: InductionConfig) -> tuple[dict, tuple[float, ...], float]:
    state, losses, seconds = _train_or_load(config)
    return state, tuple(losses), seconds


def trained_model(
    config: InductionConfig = InductionConfig(),
) -> tuple[GPTModel, list[float], float]:
    """The model trained on ``config`` (in eval mode), its losses, and training seconds.

    Each call returns a new model with the trained weights, so a caller may change it.
    """
    if not isinstance(config, InductionConfig):
        raise TypeError(
            f"config must be an InductionConfig, got {type(config).__name__}"
        )
    state, losses, seconds = _trained(config)
    model = new_model(config)
    model.load_state_dict(state)
    return model.eval(), list(losses), seconds


def head_scores(
    weights: list[torch.Tensor], batch: InductionBatch, segment: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Previous-token and induction scores, ``(L, H)`` each, from recorded weights.

    ``weights``: one ``(B, H, T, T)`` tensor per layer (``record_attention``).
    Previous-token score: the mean weight that position ``t`` puts on ``t - 1``.
    Induction score: in the second copy, the mean weight that the token at ``t`` puts
    on the position just after its earlier occurrence (``t - offset + 1``).
    """
    rows, positions = batch.predictable(segment)  # (N,), (N,)
    offset = (batch.second - batch.first)[rows]  # (N,)
    previous, induction = [], []
    for layer in weights:  # (B, H, T, T)
        diagonal = layer.diagonal(offset=-1, dim1=-2, dim2=-1)  # (B, H, T - 1)
        previous.append(diagonal.float().mean(dim=(0, 2)))  # (H,)
        after_match = layer[rows, :, positions, positions - offset + 1]  # (N, H)
        induction.append(after_match.float().mean(dim=0))  # (H,)
    return torch.stack(previous), torch.stack(induction)  # (L, H) twice
