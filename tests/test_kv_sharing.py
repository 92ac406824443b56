"""``kv_sharing.SharedKV`` and ModernAttention's ``kv_shared`` layers: a layer that reuses an
earlier layer's keys and values computes what a layer with that layer's key and value weights
would, in a prefill and in cached decoding (windowed, with a prompt longer than the window),
on both paths; and every misuse is refused with a message that says what to do."""

from __future__ import annotations

import pytest
import torch

from llm_attention.kv_sharing import SharedKV
from llm_attention.modern import ModernAttention

OPTIONS = dict(qk_norm=True, value_norm=True, scale=1.0)  # Gemma 4's


def trio(window=None, fast_path=False):
    """An owner, a reader of its keys, and the reader's twin with the owner's key and
    value weights of its own."""
    torch.manual_seed(0)
    kw = dict(window=window, fast_path=fast_path, **OPTIONS)
    owner = ModernAttention(16, 16, 32, 0.0, 4, 2, **kw).eval()
    reader = ModernAttention(16, 16, 32, 0.0, 4, 2, kv_shared=True, window=window,
                             fast_path=fast_path, qk_norm=True, scale=1.0).eval()
    twin = ModernAttention(16, 16, 32, 0.0, 4, 2, **kw).eval()
    state = {**owner.state_dict(), **reader.state_dict()}  # reader's queries, owner's keys
    twin.load_state_dict(state)
    return owner, reader, twin


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("window", [None, 3])
def test_a_reader_is_a_layer_with_the_owners_keys(window, fast_path):
    """In a prefill (a SharedKV with no cache), the reader fed what the owner was fed
    equals the twin; fed something else, only its queries change: its keys are still the
    owner's."""
    owner, reader, twin = trio(window, fast_path)
    assert reader.W_key is None and reader.W_value is None and reader.k_norm is None
    x, h = torch.randn(2, 9, 16), torch.randn(2, 9, 16)
    padding = torch.ones(2, 9, dtype=torch.bool)
    padding[1, :2] = False
    with torch.no_grad():
        shared = SharedKV()  # a prefill: nothing kept
        owner(x, padding, cache=shared)
        same = reader(x, padding, cache=shared)
        other = reader(h, padding, cache=shared)  # the same keys, other queries
        owner(h, padding, cache=shared)
        both_h = reader(h, padding, cache=shared)
        twin_x, twin_h = twin(x, padding), twin(h, padding)
    torch.testing.assert_close(same[padding], twin_x[padding])
    torch.testing.assert_close(both_h[padding], twin_h[padding])
    assert (other[padding] - twin_h[padding]).abs().max() > 1e-3  # keys of x, not h


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("window", [None, 3])
def test_decoding_reads_what_the_owner_attended_to(window, fast_path):
    """With the same input for owner and reader, the reader equals the twin; decoding a
    prompt of 6 (longer than the window of 3) then single tokens equals one prefill."""
    owner, reader, twin = trio(window, fast_path)
    x = torch.randn(2, 10, 16)
    padding = torch.ones(2, 10, dtype=torch.bool)
    padding[1, :4] = False
    with torch.no_grad():
        whole = twin(x, padding)
        shared = SharedKV(owner.make_cache(2))
        for start, end in [(0, 6), (6, 7), (7, 8), (8, 10)]:
            owner(x[:, start:end], padding[:, start:end], cache=shared)
            got = reader(x[:, start:end], padding[:, start:end], cache=shared)
            real = padding[:, start:end]
            torch.testing.assert_close(got[real], whole[:, start:end][real])
    assert shared.length == 10 and shared.nbytes == shared.cache.nbytes
    if window is not None:
        assert shared.cache.held == window  # the owner's cache rolled; the reader has none


def test_misuse_is_refused():
    owner, reader, _ = trio()
    x = torch.randn(1, 4, 16)
    with pytest.raises(TypeError, match="pass that layer's SharedKV"):
        reader(x)
    with pytest.raises(TypeError, match="pass that layer's SharedKV"):
        reader(x, cache=owner.make_cache(1))
    with pytest.raises(ValueError, match="SharedKV holds nothing yet"):
        reader(x, cache=SharedKV())
    shared = SharedKV()
    owner(x, cache=shared)
    with pytest.raises(ValueError, match="last call had 4 new tokens, this call has 2"):
        reader(x[:, :2], cache=shared)
    wide = ModernAttention(16, 16, 32, 0.0, 4, 1, kv_shared=True, head_dim=4)
    with pytest.raises(ValueError, match="the shared keys have 2 heads of width 4"):
        wide(x, cache=shared)
    with pytest.raises(TypeError, match="cache must be a key/value cache with an append"):
        SharedKV("cache")
    with pytest.raises(ValueError, match="value_norm, values_from_keys and chunk_size belong"):
        ModernAttention(16, 16, 8, 0.0, 2, 1, kv_shared=True, value_norm=True)
    assert SharedKV().nbytes == 0 and SharedKV().length == 0
