"""What one decoding step does, logged on the CPU so that CI (which has no GPU) holds what a
GPU needs of it: no copy of the cache, no mask when nothing is hidden, no number read back to
Python (on a GPU, a wait for the device).

``StepLog`` is a ``TorchDispatchMode``: it sees every kernel call of the code run under it,
with its arguments and what it returns. For each call it keeps the name, the bytes of any
storage the call allocated (an output whose storage is none of the inputs': views and writes
in place allocate nothing) and the bytes an in-place call (``copy_``, ``mul_``, ...) wrote
into a tensor it was given. ``aten._local_scalar_dense`` is what ``int()``, ``bool()`` and
``.item()`` of a tensor dispatch to: the read back. ``sdpa_masks`` records the ``attn_mask``
of every ``scaled_dot_product_attention`` call."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def _storages(tree) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tree_leaves(tree)
            if isinstance(t, torch.Tensor)}


class StepLog(TorchDispatchMode):
    """Every kernel call: ``calls`` holds ``(name, bytes allocated, bytes written in
    place)``."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        given = _storages((args, kwargs))
        name = func.overloadpacket.__name__
        new, written = 0, 0
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            if t.untyped_storage().data_ptr() not in given:
                new = max(new, t.untyped_storage().nbytes())
            elif name.endswith("_"):  # in place: into a tensor it was given
                written = max(written, t.numel() * t.element_size())
        self.calls.append((name, new, written))
        return out

    def allocations_of_at_least(self, size: int) -> list[str]:
        """The calls that allocated ``size`` bytes or more."""
        return [name for name, new, _ in self.calls if new >= size]

    def writes_of_at_least(self, size: int) -> list[str]:
        """The in-place calls that wrote ``size`` bytes or more."""
        return [name for name, _, written in self.calls if written >= size]

    @property
    def read_backs(self) -> int:
        """Numbers read back to Python (a host-device sync on a GPU)."""
        return self.count("_local_scalar_dense")

    def count(self, name: str) -> int:
        return sum(call[0] == name for call in self.calls)


def sdpa_masks(monkeypatch) -> list:
    """Patch ``scaled_dot_product_attention`` (every module calls it as
    ``F.scaled_dot_product_attention``) to record the ``attn_mask`` of each call."""
    masks, real = [], F.scaled_dot_product_attention

    def spy(*args, attn_mask=None, **kwargs):
        masks.append(attn_mask)
        return real(*args, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    return masks


def step_after_prompt(layer, cache, x, prompt_mask=None, **kwargs):
    """Run ``layer`` on all of ``x`` ``(B, T + 1, d_in)`` but its last token as a prompt
    (with ``prompt_mask``), then log the decoding step of the last token: the
    ``StepLog`` and the step's output."""
    with torch.no_grad():
        layer(x[:, :-1], prompt_mask, cache=cache, **kwargs)
        with StepLog() as log:
            out = layer(x[:, -1:], cache=cache, **kwargs)
    return log, out


def one_pass_last(layer, x, prompt_mask=None):
    """The last position of one pass of ``layer`` over all of ``x`` (the prompt's mask, if
    any, extended by the new token): what the step logged by ``step_after_prompt`` must
    equal."""
    mask = None if prompt_mask is None else torch.cat(
        (prompt_mask, torch.ones(x.shape[0], 1, dtype=torch.bool)), dim=1)  # (B, T + 1)
    with torch.no_grad():
        return layer(x, mask)[:, -1:]


def assert_masks_only_with_padding(log, masks, fast_path: bool, padded: bool) -> None:
    """A decoding step masks only when the prompt had padding: the fast path hands SDPA
    no mask without it (``masks`` from ``sdpa_masks``, the prompt's call first), and no
    path fills a mask in."""
    step_masks = masks[1:] if fast_path else masks
    assert [m is None for m in step_masks] == ([not padded] if fast_path else [])
    assert (log.count("masked_fill") + log.count("masked_fill_") > 0) == padded
