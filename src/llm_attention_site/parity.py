# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""One parity harness: every family of the family table (``families.py``) against
transformers, through ``layer_from_hf``.

For a family, the harness builds its tiny transformers model (``AutoConfig`` of the
entry's ``tiny`` fields, eager attention, float32, random weights moved off their
init), finds each decoder layer's token mixer (the submodule the layer calls with an
``attention_mask``: ``self_attn``, ``linear_attn``, ``attn``, ``mixer``; a layer with
two side by side has two), and runs the whole model on a batch of ``B`` sequences of
``T`` tokens, the rows left-padded by ``PADDING`` tokens, recording what each mixer
reads and returns. Our module for the same layer, ``layer_from_hf(config, i,
mixer.state_dict())``, then reads the same input, in each of its forms (explicit and
fast path, absorbed or not, chunked or token by token), and must return the same output
at every real token:

- in one pass, with and without left padding;
- decoding with its own cache, in the calls of ``SPLITS`` (a prompt then one token at a
  time; uneven calls), against the model decoding with its own cache;
- the decoded outputs against its own single pass;
- gradients: the input's gradient of a weighted sum of the outputs, against the
  mixer's own (called again alone on what it read).

Each difference must stay within ``TOL`` (gradients, sums over every output, within
``GRAD_TOL``). Then the harness proves its reach: for each
mechanism the entry names, it drops the mechanism on the transformers side (the
entry's ``Change``), runs the model again with each mixer fed what it read before, and
requires the output of every layer that has the mechanism to move by more than
``REACH``: ours matches the model with the mechanism, so ours computes it. A tiny
config too small to reach a branch (a window longer than the text, a top-k that keeps
every token) fails here instead of passing. Not a model module: it needs transformers.
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import functools
import os
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch

from llm_attention.hf_config import kv_source_layer, topk_source_layer
from llm_attention.hf_layers import layer_from_hf, layer_kind
from llm_attention.kv_cache import KVCache
from llm_attention.kv_sharing import SharedKV, SharedTopK

from .families import FAMILIES, Change

B, T, PROMPT = 3, 12, 7
PADDING = (0, 4, PROMPT - 1)  # left padding of each row
SPLITS = {  # the calls a text is fed in: one pass, and two ways of decoding
    "one pass": (T,),
    "7+1+1+1+1+1": (PROMPT,) + (1,) * (T - PROMPT),
    "4+6+2": (4, 6, 2),
}
TOL = 1e-5  # float32, outputs of size about 1: atol and rtol
GRAD_TOL = 1e-4  # gradients sum over every output: ten times the outputs' rounding
REACH = 1e-3  # the least a dropped mechanism must move an output by

# Our modules' forms: attribute settings that change how a layer computes, not what.
# A form a layer cannot take (the fast path of a soft-capped layer) is left out.
_PATHS = {"explicit": {"fast_path": False}, "fast": {"fast_path": True}}
FORMS = {
    "MultiHeadAttention": _PATHS,
    "ModernAttention": _PATHS,
    "LatentAttention": {
        f"{'absorbed' if absorb else 'plain'}, {'fast' if fast else 'explicit'}":
            {"absorb": absorb, "fast_path": fast}
        for absorb in (False, True) for fast in (False, True)
    },
    "SparseLatentAttention": {
        **{f"masked, {'absorbed' if absorb else 'plain'}, {path}":
           {"gathered": False, "absorb": absorb, **settings}
           for absorb in (False, True) for path, settings in _PATHS.items()},
        **{f"gathered, {path}": {"gathered": True, "absorb": False, **settings}
           for path, settings in _PATHS.items()},
    },
    "BlockSparseAttention": {
        "masked, explicit": {"gathered": False, "fast_path": False},
        "masked, fast": {"gathered": False, "fast_path": True},
        "gathered": {"gathered": True, "fast_path": False},
    },
    # sliding and heavily compressed layers pick nothing to gather
    "CompressedAttention": lambda layer: {
        **_PATHS, **({"gathered": {"gathered": True, "fast_path": False}}
                     if layer.layer_type == "compressed_sparse_attention" else {})},
    # chunks of 5: twelve tokens are chunks of 5, 5 and 2
    "GatedDeltaNet": {"chunked": {"form": "chunked", "chunk_size": 5},
                      "recurrent": {"form": "recurrent"}},
    "Mamba2": {"chunked": {"form": "chunked", "chunk_size": 5},
               "recurrent": {"form": "recurrent"}},
    "KimiDeltaAttention": {"chunked": {"form": "chunked", "chunk_size": 5},
                           "recurrent": {"form": "recurrent"}},
}
DEFAULT_INIT = (  # parameter pattern -> how it is drawn; the first match wins
    ("*sinks", lambda p: p.normal_(0.0, 1.0)),  # wide enough to weigh in a softmax
    ("*A_log", lambda p: p.uniform_(-2.0, 1.0)),  # decays of every speed
    ("*dt_bias", lambda p: p.normal_(0.0, 1.0)),
    ("*norm*", lambda p: p.uniform_(0.5, 1.5)),  # norms start at 1: move them off
    ("*", lambda p: p.normal_(0.0, 0.2)),
)


@functools.cache
def hf() -> SimpleNamespace:
    """The parts of transformers used here, imported once, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    transformers.logging.set_verbosity_error()  # no notes on defaults
    version = transformers.__version__
    return SimpleNamespace(**locals())


def tiny_config(key: str, *changes: Change):
    """The transformers config of family ``key``'s tiny model, with ``changes``."""
    fields = copy.deepcopy(FAMILIES[key].tiny)
    for change in changes:
        fields.update(copy.deepcopy(change.config))
    config = hf().AutoConfig.for_model(fields.pop("model_type"), **fields)
    config._attn_implementation = "eager"
    return config


def transformers_config(values: dict):
    """The transformers config object of a published ``config.json`` dict (its class
    found by ``model_type``). The fields are copied: transformers writes
    ``rope_theta`` into the ``rope_scaling`` dict it is given, which would change the
    published dict for every later reader."""
    fields = copy.deepcopy({k: v for k, v in values.items() if k != "model_type"})
    return hf().AutoConfig.for_model(values["model_type"], **fields)


def _changes(key: str, variant: str | None, mechanism: str | None) -> list[Change]:
    family = FAMILIES[key]
    found = [family.variants[variant]] if variant else []
    return found + ([family.mechanisms[mechanism]] if mechanism else [])


def randomize(model: torch.nn.Module, init: dict) -> None:
    """Every parameter drawn again (seeded): ``init`` (pattern -> draw) first, then
    ``DEFAULT_INIT``."""
    rules = (*init.items(), *DEFAULT_INIT)
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            draw = next(d for pattern, d in rules if fnmatch.fnmatchcase(name, pattern))
            draw(parameter)
    torch.random.set_rng_state(generator_state)


@functools.cache
def model(key: str, variant: str | None = None, mechanism: str | None = None):
    """``(config, model)``: the tiny model of ``key`` (with ``variant``), in eval
    mode; with ``mechanism`` dropped, the same weights then the mechanism's edit."""
    changes = _changes(key, variant, mechanism)
    config = tiny_config(key, *changes)
    torch.manual_seed(0)
    named = FAMILIES[key].model_class  # where transformers' Auto classes have none
    build = getattr(hf().transformers, named) if named else (
        hf().AutoModelForCausalLM.from_config)
    built = build(config).eval()
    if mechanism is None:
        randomize(built, FAMILIES[key].init)
    else:  # the very weights of the model with the mechanism
        built.load_state_dict(model(key, variant)[1].state_dict())
    for change in changes:
        if change.edit is not None:
            change.edit(built)
    return config, built


def decoder_layers(built, config) -> torch.nn.ModuleList:
    """The model's list of decoder layers (``model.layers``, GPT-2's ``h``, ...)."""
    count = config.num_hidden_layers
    for module in built.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == count:
            return module
    raise ValueError(f"{type(built).__name__} has no list of {count} layers")


@functools.cache
def mixers(key: str, variant: str | None = None) -> tuple[tuple[int, str], ...]:
    """``(layer, name)`` of each token mixer: each child a decoder layer calls with an
    ``attention_mask`` (a layer with none, Nemotron-H's MLP blocks, has no mixer)."""
    config, built = model(key, variant)
    found, handles = set(), []
    for i, layer in enumerate(decoder_layers(built, config)):
        for name, child in layer.named_children():
            def probe(module, args, kwargs, where=(i, name)):
                if "attention_mask" in kwargs:
                    found.add(where)
            handles.append(child.register_forward_pre_hook(probe, with_kwargs=True))
    try:
        ids, mask = inputs(True)
        with torch.no_grad():
            built(input_ids=ids, attention_mask=mask, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    return tuple(sorted(found))


def inputs(padded: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Token ids ``(B, T)`` and the attention mask ``(B, T)`` (1 = real token) of the
    left-padded batch, or None."""
    ids = torch.randint(0, 50, (B, T), generator=torch.Generator().manual_seed(1))
    if not padded:
        return ids, None
    mask = torch.ones(B, T, dtype=torch.long)
    for row, pads in enumerate(PADDING):
        mask[row, :pads] = 0
    return ids, mask


def real_tokens(padded: bool) -> torch.Tensor:
    """``(B, T)`` bool: the tokens compared (every token of an unpadded batch)."""
    _, mask = inputs(padded)
    return torch.ones(B, T, dtype=torch.bool) if mask is None else mask.bool()


def _hidden(args, kwargs) -> torch.Tensor:
    return kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]


@contextlib.contextmanager
def _recording(built, config, where, feed=None):
    """Record, per mixer of ``where``, its call (args, kwargs) and output into the
    dict yielded; with ``feed`` ((layer, name) -> tensor), each mixer reads that
    instead of what the model gives it."""
    calls, handles = {}, []
    layers = decoder_layers(built, config)
    for i, name in where:
        mixer = layers[i].get_submodule(name)

        def before(module, args, kwargs, at=(i, name)):
            if feed is not None:
                if "hidden_states" in kwargs:
                    kwargs = {**kwargs, "hidden_states": feed[at]}
                else:
                    args = (feed[at], *args[1:])
            calls[at] = dict(args=args, kwargs=kwargs)
            return args, kwargs

        def after(module, args, kwargs, output, at=(i, name)):
            out = output[0] if isinstance(output, tuple) else output
            calls[at].update(input=_hidden(args, kwargs).detach(), output=out.detach())

        handles.append(mixer.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(mixer.register_forward_hook(after, with_kwargs=True))
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def bounds(split: str) -> list[tuple[int, int]]:
    ends = torch.tensor(SPLITS[split]).cumsum(0).tolist()
    return list(zip([0, *ends[:-1]], ends))


def position_ids(key: str, mask: torch.Tensor | None) -> torch.Tensor | None:
    """The positions the family's model is called with: None (a plain call counts every
    slot, padding included), or, for a family whose layers read positions counted from
    each row's first real token, those ``generate`` passes: ``(B, T)``."""
    how = FAMILIES[key].positions
    if how == "slots, passed":  # a model that does not count them itself (Bamba)
        return torch.arange(T).expand(B, T)
    if mask is None or how == "slots":
        return None
    counted = mask.long().cumsum(-1) - 1  # (B, T)
    return counted.masked_fill(mask == 0, 1)


class Calls(list):
    """Per call, per mixer, what it read and returned; ``cache``: the model's cache
    after the last call."""

    cache = None


@functools.cache
def reference_run(key: str, variant: str | None, split: str, padded: bool,
                  mechanism: str | None = None) -> Calls:
    """The model fed the batch in the calls of ``split``, with its own cache: per
    call, per mixer, what it read and returned. With ``mechanism`` dropped, each mixer
    reads what it read in one pass with it (one pass only)."""
    if padded and mechanism is None and FAMILIES[key].padded_rows == "prompt alone":
        return _prompt_alone_run(key, variant, split)
    config, built = model(key, variant, mechanism)
    where = mixers(key, variant)
    feed, patch = None, contextlib.nullcontext()
    if mechanism is not None:
        first = reference_run(key, variant, "one pass", padded)[0]
        feed = {at: call["input"] for at, call in first.items()}
        change = FAMILIES[key].mechanisms[mechanism]
        if change.patch is not None:
            patch = change.patch(built)
    ids, mask = inputs(padded)
    positions = position_ids(key, mask)
    cache, calls = None, Calls()
    with patch:
        for start, end in bounds(split):
            with _recording(built, config, where, feed) as recorded, torch.no_grad():
                out = built(input_ids=ids[:, start:end],
                            attention_mask=None if mask is None else mask[:, :end],
                            position_ids=None if positions is None
                            else positions[:, start:end],
                            past_key_values=cache, use_cache=split != "one pass")
            cache = out.past_key_values
            calls.append(recorded)
    calls.cache = cache
    return calls


def _prompt_alone_run(key: str, variant: str | None, split: str) -> Calls:
    """The left-padded batch as each row's prompt alone gives it: per call of ``split``,
    per mixer, what it read and returned at the row's real tokens, the model run on
    that row's real tokens alone (zeros at the padding)."""
    config, built = model(key, variant)
    where = mixers(key, variant)
    ids, _ = inputs(True)
    calls = Calls({} for _ in bounds(split))
    for row, pads in enumerate(PADDING):
        cache = None
        for call, (start, end) in zip(calls, bounds(split)):
            first = max(start, pads)
            if first >= end:  # no real token of this row in this call
                continue
            with _recording(built, config, where) as recorded, torch.no_grad():
                out = built(input_ids=ids[row : row + 1, first:end],
                            past_key_values=cache, use_cache=split != "one pass")
            cache = out.past_key_values
            for at, seen in recorded.items():
                for name in ("input", "output"):
                    width = seen[name].shape[-1]
                    kept = call.setdefault(at, {}).setdefault(
                        name, seen[name].new_zeros(B, end - start, width))  # (B, T', d)
                    kept[row, first - start :] = seen[name][0]
    return calls


def record(key: str, ids: torch.Tensor, mask: torch.Tensor | None = None,
           variant: str | None = None) -> dict:
    """One pass of the tiny model on any token ids ``(B', T')`` (and attention mask):
    per mixer, what it read and returned."""
    config, built = model(key, variant)
    with _recording(built, config, mixers(key, variant)) as recorded, torch.no_grad():
        built(input_ids=ids, attention_mask=mask, use_cache=False)
    return recorded


@functools.cache
def ours(key: str, variant: str | None, layer: int, name: str) -> torch.nn.Module:
    """Our module for mixer ``name`` of ``layer``, by ``layer_from_hf`` with the
    mixer's weights (``mixer=`` named where the layer has two)."""
    config, built = model(key, variant)
    mixer = decoder_layers(built, config)[layer].get_submodule(name)
    several = sum(1 for i, _ in mixers(key, variant) if i == layer) > 1
    extra = {"mixer": name} if several else {}
    return layer_from_hf(config, layer, mixer.state_dict(), **extra)


def one_pass_gap(key: str, module: torch.nn.Module, at=(0, "self_attn"),
                 variant: str | None = None) -> float:
    """How far ``module``, standing for mixer ``at``, lands from transformers' on what
    that mixer read in one pass of the padded batch: the largest difference at real
    tokens. (A module built wrong on purpose must land far.)"""
    seen = reference_run(key, variant, "one pass", True)[0][at]
    real = real_tokens(True)
    with torch.no_grad():
        got = module(seen["input"], real)  # (B, T, d)
    return (got - seen["output"])[real].abs().max().item()


def forms(module: torch.nn.Module) -> dict[str, dict]:
    """The forms ``module`` computes in: name -> attribute settings."""
    found = FORMS.get(type(module).__name__, {"default": {}})
    if callable(found):  # forms that depend on the layer's kind
        found = found(module)
    fused = all(getattr(module, name, None) is None for name in ("softcap", "sinks"))
    if type(module).__name__ == "ModernAttention" and not fused:  # no cap, no sinks
        found = {name: s for name, s in found.items() if not s.get("fast_path")}
    return found


@contextlib.contextmanager
def _in_form(modules, settings: dict):
    saved = [{name: getattr(m, name) for name in settings} for m in modules]
    try:
        for m in modules:
            for name, value in settings.items():
                setattr(m, name, value)
        yield
    finally:
        for m, values in zip(modules, saved):
            for name, value in values.items():
                setattr(m, name, value)


def _new_cache(module):
    if hasattr(module, "make_cache"):
        return module.make_cache(B)
    return KVCache(B, module.num_heads, module.head_dim, T)  # the chapters' module


def _source(key: str, variant: str | None, layer: int) -> tuple | None:
    """``(mixer, what)``: the earlier mixer whose keys and values ``layer`` reads
    (Gemma 4's sharing layers) or whose indexer's choice it reuses (GLM-5's shared
    layers); None for a layer that reads no other."""
    config, _ = model(key, variant)
    kv, topk = kv_source_layer(config, layer), topk_source_layer(config, layer)
    if kv is None and topk is None:
        return None
    source = kv if kv is not None else topk
    at = next(at for at in mixers(key, variant) if at[0] == source)
    return at, "keys and values" if kv is not None else "top-k"


def our_run(key, variant, at, form: str, split: str, padded: bool,
            grad_weights: torch.Tensor | None = None,
            one_pass_inputs: bool = False) -> list[torch.Tensor]:
    """Our module of mixer ``at`` in ``form``, fed what the model's mixer read in the
    calls of ``split`` (or, with ``one_pass_inputs``, what it read in one pass, cut
    into those calls), with its own cache: its output per call. With
    ``grad_weights`` (one pass only), the gradient of ``sum(output * grad_weights)``
    with respect to the input, instead."""
    module = ours(key, variant, *at)
    found = _source(key, variant, at[0])
    source_at, what = found if found is not None else (None, None)
    source = None if source_at is None else ours(key, variant, *source_at)
    settings = forms(module)[form]
    calls = reference_run(key, variant, split, padded)
    if one_pass_inputs:
        whole = reference_run(key, variant, "one pass", padded)[0]
        calls = [{where: {"input": call["input"][:, start:end]}
                  for where, call in whole.items()} for start, end in bounds(split)]
    decoding = split != "one pass"
    if what == "keys and values":  # the owner appends, the reader reads
        shared = SharedKV(_new_cache(source) if decoding else None)
        source_kw = reader_kw = {"cache": shared}
    else:
        reader_kw = {"cache": _new_cache(module) if decoding else None}
    if what == "top-k":  # each its own cache; the source chooses, the reader reuses
        picks = SharedTopK()
        source_kw = {"cache": _new_cache(source) if decoding else None, "topk": picks}
        reader_kw["topk"] = picks
    real = real_tokens(padded)
    outputs = []
    with _in_form([m for m in (module, source) if m is not None], settings):
        for (start, end), call in zip(bounds(split), calls):
            padding = real[:, start:end] if padded else None
            if source is not None:
                with torch.no_grad():
                    source(call[source_at]["input"], padding, **source_kw)
            x = call[at]["input"].clone().requires_grad_(grad_weights is not None)
            with torch.set_grad_enabled(grad_weights is not None):
                out = module(x, padding, **reader_kw)
            if grad_weights is not None:
                return [torch.autograd.grad((out * grad_weights).sum(), x)[0]]
            outputs.append(out.detach())
    return outputs


def reference_gradient(key, variant, at, padded: bool, weights) -> torch.Tensor:
    """The model's mixer called again alone on what it read in one pass: the gradient
    of ``sum(output * weights)`` with respect to its input."""
    config, built = model(key, variant)
    mixer = decoder_layers(built, config)[at[0]].get_submodule(at[1])
    call = reference_run(key, variant, "one pass", padded)[0][at]
    x = call["input"].clone().requires_grad_(True)
    args, kwargs = call["args"], dict(call["kwargs"])
    if "hidden_states" in kwargs:
        kwargs["hidden_states"] = x
    else:
        args = (x, *args[1:])
    with torch.enable_grad():
        out = mixer(*args, **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        return torch.autograd.grad((out * weights).sum(), x)[0]


def _gap(got: torch.Tensor, expected: torch.Tensor, real: torch.Tensor) -> float:
    """The largest |got - expected| at real tokens, relative to ``1 + |expected|``
    (the tolerance is atol = rtol)."""
    gap = (got[real] - expected[real]).abs() / (1 + expected[real].abs())
    return gap.max().item()


@dataclass
class LayerProof:
    """One mixer: the largest difference (relative to 1 + |expected|) per form and
    case."""

    layer: int
    mixer: str
    kind: str
    module: str
    differences: dict = field(default_factory=dict)  # (form, case) -> float

    @property
    def worst(self) -> float:
        return max(self.differences.values())

    def worst_of(self, form: str) -> float:
        return max(d for (f, _), d in self.differences.items() if f == form)


@dataclass
class Proof:
    """A family's proof: every mixer's differences, and how far each dropped
    mechanism moves each layer that has it."""

    key: str
    variant: str | None
    layers: list
    reach: dict  # mechanism -> {(layer, mixer): largest move at real tokens}

    @property
    def worst(self) -> float:
        return max(layer.worst for layer in self.layers)

    def failures(self) -> list[str]:
        """What breaks the proof: a difference above ``TOL``, a mechanism that moves
        some layer that has it by ``REACH`` or less."""
        found = [
            f"layer {p.layer} {p.mixer} ({p.module}), {form}, {case}: {d:.1e} > "
            f"{tolerance(case)}"
            for p in self.layers for (form, case), d in p.differences.items()
            if not d <= tolerance(case)
        ]
        found += [
            f"dropping {name!r} moves layer {layer} {mixer} by {move:.1e} only "
            f"(<= {REACH}): the tiny config does not reach it"
            for name, moves in self.reach.items()
            for (layer, mixer), move in moves.items() if not move > REACH
        ]
        found += [f"{name!r} names no layer with a mixer"
                  for name, moves in self.reach.items() if not moves]
        return found


def _padded_reference(key: str) -> bool:
    """Whether transformers' own left-padded batch serves as the reference (else its
    unpadded batch serves where one call must stand for the batch: gradients, reach)."""
    return FAMILIES[key].padded_rows == "reference"


def tolerance(case: str) -> float:
    """The largest difference a case may show (relative to 1 + |expected|)."""
    return GRAD_TOL if case.startswith("gradients") else TOL


def _layers_with(key: str, variant: str | None, change: Change) -> list:
    config, _ = model(key, variant)
    where = mixers(key, variant)
    if change.layers is None:
        return list(where)
    return [(i, name) for i, name in where if i in change.layers
            or name in change.layers or layer_kind(config, i)[1] in change.layers]


def reach(key: str, variant: str | None = None) -> dict:
    """Mechanism -> {(layer, mixer): how far dropping it moves that mixer's output},
    at real tokens of the padded batch (the unpadded one where transformers' padded rows
    cannot serve), each mixer fed what it read with the mechanism."""
    found = {}
    padded = _padded_reference(key)
    real = real_tokens(padded)
    base = reference_run(key, variant, "one pass", padded)[0]
    for name, change in FAMILIES[key].mechanisms.items():
        dropped = reference_run(key, variant, "one pass", padded, mechanism=name)[0]
        found[name] = {
            at: (dropped[at]["output"] - base[at]["output"])[real].abs().max().item()
            for at in _layers_with(key, variant, change)
        }
    return found


# --8<-- [start:prove_mixer]
def prove_mixer(key, variant, at):  # -> LayerProof
    config, _ = model(key, variant)
    module = ours(key, variant, *at)
    kind = layer_kind(config, at[0])[1]
    proof = LayerProof(at[0], at[1], kind, type(module).__name__)
    weights = torch.randn(B, T, config.hidden_size,
                          generator=torch.Generator().manual_seed(4))
    ties = variant is not None and FAMILIES[key].variants[variant].ties
    for form in forms(module):
        diff = proof.differences
        for padded in (False, True):
            real = real_tokens(padded)
            one_pass = None
            for split in SPLITS:
                got = torch.cat(our_run(key, variant, at, form, split, padded), dim=1)
                calls = reference_run(key, variant, split, padded)
                expected = torch.cat([call[at]["output"] for call in calls], dim=1)
                label = split + (", padded" if padded else "")
                diff[form, label] = _gap(got, expected, real)
                if one_pass is None:
                    one_pass = got
                elif not ties:  # decoding the one pass's inputs, against our one pass
                    same = torch.cat(our_run(key, variant, at, form, split, padded,
                                             one_pass_inputs=True), dim=1)
                    case = f"{label} against our one pass"
                    diff[form, case] = _gap(same, one_pass, real)
        padded = _padded_reference(key)
        real = real_tokens(padded)
        masked = weights * real[..., None]  # (B, T, d): real tokens' outputs only
        got = our_run(key, variant, at, form, "one pass", padded,
                      grad_weights=masked)[0]
        expected = reference_gradient(key, variant, at, padded, masked)
        case = "gradients" + (", padded" if padded else "")
        diff[form, case] = _gap(got, expected, real)
    return proof
# --8<-- [end:prove_mixer]


@functools.cache
def prove(key: str, variant: str | None = None) -> Proof:
    """Family ``key`` (with ``variant``) proven: see the module's docstring."""
    if key not in FAMILIES:
        raise ValueError(f"family {key!r} is not in the table; expected one of "
                         f"{', '.join(FAMILIES)}")
    if variant is not None and variant not in FAMILIES[key].variants:
        raise ValueError(f"{key!r} has no variant {variant!r}")
    layers = [prove_mixer(key, variant, at) for at in mixers(key, variant)]
    return Proof(key, variant, layers, reach(key, variant))


def summary(key: str, variant: str | None = None) -> list[str]:
    """The lines a page prints for a family: each mixer's worst difference per form,
    and how far dropping each mechanism moves its layers (the least move)."""
    proof = prove(key, variant)
    title = FAMILIES[key].title + (f", {variant}" if variant else "")
    lines = [title]
    for p in proof.layers:
        forms_seen = dict.fromkeys(form for form, _ in p.differences)
        worst = "  ".join(f"{form} {p.worst_of(form):.0e}" for form in forms_seen)
        lines.append(
            f"  layer {p.layer} {p.mixer:<11} {p.kind:<18} {p.module:<21} {worst}")
    if proof.reach:
        moves = ", ".join(f"{name} {min(m.values()):.2f}"
                          for name, m in proof.reach.items() if m)
        lines.append(f"  dropped, each moves its layers by at least: {moves}")
    return lines
