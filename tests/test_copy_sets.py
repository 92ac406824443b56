"""What the API reference tells a copier to take works as it is.

For every copyable module: its zip is downloaded from the built site and unpacked into an empty
folder under a package name that is not ``llm_attention``; a Python that has torch and nothing
else (no ``llm_attention``, no matplotlib: tests/clean_python.py) imports it from there and runs
the module's example below; the package runs the same example here, and the two results must be
equal. The modules' own imports are checked too: relative between the package's modules, no
other module's private helper, nothing but torch and the standard library, and each docstring
names the modules it builds on.
"""

from __future__ import annotations

import ast
import io
import os
import sys
import textwrap
import urllib.request
import zipfile

import pytest
import torch

from llm_attention_site.copy_sets import (
    PACKAGE,
    READING_ORDER,
    copy_set,
    copyable_modules,
    sibling_imports,
)
from tests.clean_python import PreloadedRunner, make_clean_python

COPY_PACKAGE = "vendored_attention"  # the folder a copier unzips into: any name but llm_attention

# One example per module: code that runs with ``m`` the module and ``load(name)`` its siblings,
# and leaves what it computed in ``result``. Each runs once against the copy, once against the package.
EXAMPLES = {
    "toy.py": "result = m.toy_embeddings()",
    "checks.py": """
        m.check_inputs(torch.zeros(2, 3, 4), torch.ones(2, 3, dtype=torch.bool), 4, 8, torch.zeros(1))
        result = []
        for bad in (lambda: m.check_size("num_heads", 0), lambda: m.check_flag("causal", 1)):
            try:
                bad()
            except (TypeError, ValueError) as error:
                result.append(f"{type(error).__name__}: {error}")
    """,
    "simple.py": "result = m.simple_self_attention(torch.randn(6, 3))",
    "self_attention.py": "result = m.SelfAttentionV2(3, 2)(torch.randn(6, 3))",
    "causal.py": "result = m.CausalAttention(3, 2, 6, 0.0)(torch.randn(2, 6, 3))",
    "multihead_wrapper.py": "result = m.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2)(torch.randn(2, 6, 3))",
    "multihead.py": """
        x, mask = torch.randn(2, 5, 8), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
        explicit = m.MultiHeadAttention(8, 8, 16, 0.0, 2)
        fast = m.MultiHeadAttention(8, 8, 16, 0.0, 2, fast_path=True)
        fast.load_state_dict(explicit.state_dict())
        result = (explicit(x, mask), fast(x, mask))
    """,
    "kv_cache.py": """
        cache = m.KVCache(2, 2, 4, 8)
        keys, values, mask = cache.append(torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 4))
        result = (keys, values, mask, cache.length,
                  m.kv_cache_bytes(num_layers=2, num_kv_heads=2, head_dim=4, num_tokens=8, batch_size=2))
    """,
    "gpt.py": "result = m.GPTModel(30, 16, 32, 4, 2).eval()(torch.randint(0, 30, (2, 7)))",
    "generate.py": """
        model = load("gpt").GPTModel(30, 16, 32, 4, 2).eval()
        prompt = torch.randint(0, 30, (2, 4))
        result = (m.generate(model, prompt, 5), m.generate(model, prompt, 5, use_cache=False)[0])
    """,
    "induction.py": """
        config = m.InductionConfig(steps=3, batch_size=4)
        state, losses = m.train(config)
        batch = m.make_batch(config, 2, torch.Generator().manual_seed(1))
        result = (torch.tensor(losses), batch.tokens)
    """,
    "grouped_query.py": """
        x = torch.randn(2, 5, 16)
        result = m.GroupedQueryAttention(16, 16, 8, 0.0, 4, 2)(x)
    """,
    "rope.py": "result = m.RotaryEmbedding(8, 16)(torch.randn(1, 2, 5, 8), start=3)",
    "sliding_window.py": """
        cache = m.RollingKVCache(1, 1, 2, 3)
        held = [cache.append(torch.randn(1, 1, 2, 2), torch.randn(1, 1, 2, 2))[0] for _ in range(3)]
        result = (m.sliding_window_mask(6, 3), *held, cache.length)
    """,
    "rope_scaling.py": """
        result = (m.rope_frequencies(16, 500000.0, rope_type="llama3", factor=8.0,
                                     low_freq_factor=1.0, high_freq_factor=4.0,
                                     original_max_position_embeddings=16)[0],
                  torch.tensor(m.rope_frequencies(16, 1e4, rope_type="yarn", factor=4.0,
                                                  original_max_position_embeddings=16)[1]))
    """,
    "attention_variants.py": """
        q, k, v = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
        mask = torch.ones(3, 3, dtype=torch.bool).triu(1)
        out = m.variant_attention_explicit(q, k, v, mask, torch.nn.Identity(), scale=0.3,
                                           softcap=2.0, sinks=torch.randn(4))
        result = (out, m.UnitOffsetRMSNorm(8)(q), m.soft_cap(torch.arange(-3.0, 4.0), 2.0))
    """,
    "hf_config.py": """
        options = m.modern_attention_options(dict(
            model_type="gemma2", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, max_position_embeddings=16, rope_theta=1e4,
            sliding_window=4, query_pre_attn_scalar=8, attn_logit_softcapping=50.0), 0)
        result = torch.tensor([options["window"], options["scale"], options["softcap"]])
    """,
    "chunked.py": """
        cache = m.ChunkedKVCache(2, 1, 4, 3)
        keys = torch.randn(2, 1, 7, 4)
        padding = torch.ones(2, 7, dtype=torch.bool)
        padding[1, :2] = False
        returned = cache.append(keys, keys.clone(), padding)
        mask = m.chunk_mask(0, 7, 0, 7, 3, m.left_padding(padding))
        result = (returned[0], mask, cache.left_padding, torch.tensor(cache.held))
    """,
    "kv_sharing.py": """
        shared = m.SharedKV()
        keys = torch.randn(2, 1, 5, 4)
        shared.append(keys, keys * 2)
        got_keys, got_values, padding, start = shared.read(5)
        result = (got_keys, got_values, padding, torch.tensor(start))
    """,
    "latent.py": """
        layer = m.LatentAttention(16, 16, 32, 0.0, 4, kv_lora_rank=8, qk_nope_head_dim=4,
                                  qk_rope_head_dim=4, v_head_dim=4, q_lora_rank=8).eval()
        x = torch.randn(2, 6, 16)
        cache = layer.make_cache(2)
        steps = [layer(x[:, :4], cache=cache)] + [layer(x[:, t : t + 1], cache=cache) for t in (4, 5)]
        layer.absorb = True
        result = (layer(x), torch.cat(steps, dim=1), torch.tensor(cache.nbytes))
    """,
    "lightning_indexer.py": """
        indexer = m.LightningIndexer(16, 8, 3, 8, 4).eval()
        cos, sin = load("rope").rope_tables(4, 32)
        x, query_latent = torch.randn(2, 6, 16), torch.randn(2, 6, 8)
        with torch.no_grad():
            keys = indexer.keys(x, cos, sin, 0)
            scores = indexer.scores(x, query_latent, keys, cos, sin, 0)
        hidden = torch.ones(6, 6, dtype=torch.bool).triu(1)
        result = (scores, m.top_k_keys(scores, hidden, 3).sort(dim=-1).values)
    """,
    "sparse_latent.py": """
        layer = m.SparseLatentAttention(16, 16, 32, 0.0, 4, kv_lora_rank=8, qk_nope_head_dim=4,
                                        qk_rope_head_dim=4, v_head_dim=4, q_lora_rank=8,
                                        index_n_heads=2, index_head_dim=8, index_topk=3).eval()
        x = torch.randn(2, 6, 16)
        cache = layer.make_cache(2)
        steps = [layer(x[:, :4], cache=cache)] + [layer(x[:, t : t + 1], cache=cache) for t in (4, 5)]
        layer.gathered = True
        result = (layer(x), torch.cat(steps, dim=1), torch.tensor(cache.nbytes))
    """,
    "block_sparse.py": """
        layer = m.BlockSparseAttention(16, 16, 32, 0.0, 4, 2, head_dim=8, qk_norm=True,
                                       norm_unit_offset=True, partial_rotary_factor=0.5,
                                       index_n_heads=2, index_head_dim=8, block_size=2,
                                       top_k=2).eval()
        x = torch.randn(2, 7, 16)
        padding = torch.ones(2, 7, dtype=torch.bool)
        padding[1, :3] = False
        cache = layer.make_cache(2)
        steps = [layer(x[:, :4], padding[:, :4], cache=cache)]
        steps += [layer(x[:, t : t + 1], cache=cache) for t in (4, 5, 6)]
        layer.gathered = True
        result = (layer(x, padding), torch.cat(steps, dim=1), torch.tensor(cache.nbytes))
    """,
    "compressor.py": """
        pool = m.Compressor(16, 8, 3, overlap=True).eval()
        with torch.no_grad():
            for parameter in pool.parameters():
                parameter.normal_(0.0, 0.3)
            x = torch.randn(2, 10, 16)
            entries, count, state = pool.pool(x, torch.tensor([0, -3]), torch.tensor([0.5, 0.1]))
        angles = m.rotary_angles(torch.arange(10), torch.tensor([0.5]))
        result = (entries, count, state.stream, m.rotate_pairs(x, *angles))
    """,
    "compressed_attention.py": """
        layer = m.CompressedAttention(
            16, 16, 32, 0.0, 4, head_dim=8, q_lora_rank=8, o_groups=2, o_lora_rank=4, window=3,
            layer_type="compressed_sparse_attention", compress_rate=2, rope_head_dim=4,
            index_n_heads=2, index_head_dim=4, index_topk=2).eval()
        x = torch.randn(2, 7, 16)
        padding = torch.ones(2, 7, dtype=torch.bool)
        padding[1, :2] = False
        with torch.no_grad():
            for parameter in layer.parameters():
                parameter.normal_(0.0, 0.3)
            cache = layer.make_cache(2)
            steps = [layer(x[:, :4], padding[:, :4], cache=cache)]
            steps += [layer(x[:, t : t + 1], cache=cache) for t in (4, 5, 6)]
            layer.gathered = True
            result = (layer(x, padding), torch.cat(steps, dim=1), torch.tensor(cache.nbytes))
    """,
    "hf_layers.py": """
        config = dict(
            model_type="gemma2", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, max_position_embeddings=16, rope_theta=1e4,
            sliding_window=4, query_pre_attn_scalar=8, attn_logit_softcapping=50.0)
        layers = [m.layer_from_hf(config, i) for i in range(2)]
        result = (torch.tensor([layer.window or 0 for layer in layers]), layers[1](torch.randn(2, 6, 32)))
    """,
    "delta_rule.py": """
        q, k = torch.randn(2, 3, 9, 4), torch.nn.functional.normalize(torch.randn(2, 3, 9, 4), dim=-1)
        v, g, beta = torch.randn(2, 3, 9, 5), -torch.rand(2, 3, 9, 4), torch.rand(2, 3, 9)
        result = (m.recurrent(q, k, v, g, beta), m.chunked(q, k, v, g, beta, chunk_size=4),
                  m.step(q[:, :, 0], k[:, :, 0], v[:, :, 0], g[:, :, 0], beta[:, :, 0],
                         torch.zeros(2, 3, 4, 5)))
    """,
    "delta_cache.py": """
        cache = m.DeltaStateCache(2, 3, 4, 5, 6, 4)
        cache.update(torch.ones(2, 6, 3), torch.randn(2, 3, 4, 5), 7)
        cache.reorder(torch.tensor([1, 0]))
        result = (cache.state, torch.tensor([cache.nbytes, cache.length]))
    """,
    "linear_attention.py": """
        layer = m.GatedDeltaNet(16, 16, 4, num_key_heads=2, key_head_dim=4, value_head_dim=3,
                                chunk_size=3).eval()
        kda = m.KimiDeltaAttention(16, 16, 2, head_dim=4).eval()
        x = torch.randn(2, 7, 16)
        padding = torch.ones(2, 7, dtype=torch.bool)
        padding[1, :2] = False
        with torch.no_grad():
            cache = layer.make_cache(2)
            steps = [layer(x[:, :4], padding[:, :4], cache=cache)]
            steps += [layer(x[:, t : t + 1], cache=cache) for t in (4, 5, 6)]
            result = (layer(x, padding), torch.cat(steps, dim=1), cache.state, kda(x))
    """,
    "ssd.py": """
        q, k, v = torch.randn(2, 3, 9, 4), torch.randn(2, 3, 9, 4), torch.randn(2, 3, 9, 5)
        dt = torch.rand(2, 3, 9) * 0.5
        g = -dt * torch.rand(2, 3, 1)
        result = (m.recurrent(q, k, v, g, dt), m.chunked(q, k, v, g, dt, chunk_size=4),
                  m.masked(q, k, v, g, dt),
                  m.step(q[:, :, 0], k[:, :, 0], v[:, :, 0], g[:, :, 0], dt[:, :, 0],
                         torch.zeros(2, 3, 4, 5)))
    """,
    "mamba2.py": """
        layer = m.Mamba2(16, 16, 4, head_dim=4, state_size=6, num_groups=2, chunk_size=3,
                         in_bias=True).eval()
        x = torch.randn(2, 7, 16)
        padding = torch.ones(2, 7, dtype=torch.bool)
        padding[1, :2] = False
        with torch.no_grad():
            cache = layer.make_cache(2)
            cache.save_at(5)
            steps = [layer(x[:, :4], padding[:, :4], cache=cache)]
            steps += [layer(x[:, t : t + 1], cache=cache) for t in (4, 5, 6)]
            resumed = layer(x[:, 5:], cache=cache.snapshot(5))
            result = (layer(x, padding), torch.cat(steps, dim=1), cache.state, resumed)
    """,
    "ring_attention.py": """
        held = [m.balanced_positions(16, r, 2) for r in range(2)]
        result = (torch.stack(held), torch.tensor(m.causal_pairs(held)),
                  m.contiguous_positions(16, 1, 2))
    """,
    "modern.py": """
        layer = m.ModernAttention(16, 16, 32, 0.0, 4, 2, window=4, qk_norm=True).eval()
        x = torch.randn(2, 6, 16)
        cache = layer.make_cache(2)
        steps = [layer(x[:, :4], cache=cache)] + [layer(x[:, t : t + 1], cache=cache) for t in (4, 5)]
        result = (layer(x), torch.cat(steps, dim=1))
    """,
}

SCRIPT = """\
import importlib, sys
import torch
sys.path.insert(0, {parent!r})
def load(name):
    return importlib.import_module({prefix!r} + name)
m = load({stem!r})
assert m.__file__.startswith({parent!r}), m.__file__
torch.manual_seed(0)
{example}
torch.save(result, {out!r})
"""


def run_example(module, load, name: str):
    namespace = {"m": module, "load": load, "torch": torch}
    torch.manual_seed(0)
    exec(textwrap.dedent(EXAMPLES[name]), namespace)
    return namespace["result"]


def assert_same(copied, ours, where=""):
    if isinstance(ours, torch.Tensor) and ours.is_floating_point():
        # Another process may sum in another order (its own thread count): rounding only.
        assert copied.dtype == ours.dtype and copied.shape == ours.shape, where
        assert torch.allclose(copied, ours, rtol=1e-5, atol=1e-6), f"{where}: the copy computes something else"
    elif isinstance(ours, torch.Tensor):
        assert torch.equal(copied, ours), f"{where}: the copy computes something else"
    elif isinstance(ours, (tuple, list)):
        assert len(copied) == len(ours), where
        for index, (a, b) in enumerate(zip(copied, ours)):
            assert_same(a, b, f"{where}[{index}]")
    else:
        assert copied == ours, where


def test_every_copyable_module_has_an_example_and_a_place_in_the_reading_order():
    assert sorted(EXAMPLES) == copyable_modules()
    assert sorted(READING_ORDER) == copyable_modules()


@pytest.fixture(scope="module")
def torch_only(tmp_path_factory):
    """Runs a script with a Python that has torch and nothing else; returns (exit code, output)."""
    python = make_clean_python(tmp_path_factory.mktemp("torch-only-venv"), ("torch",))
    home = tmp_path_factory.mktemp("copier-home")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "OMP_NUM_THREADS": "1"}
    runner = PreloadedRunner(python, ("torch",), home, env)
    yield lambda script: runner.run(script, env)
    runner.close()


@pytest.mark.xdist_group("copy sets")  # one clean environment and runner per run
@pytest.mark.parametrize("name", copyable_modules())
def test_the_downloaded_set_works_under_another_name(built_site, torch_only, tmp_path, name):
    stem = name.removesuffix(".py")
    data = urllib.request.urlopen(f"{built_site.url}code/llm_attention/{stem}.zip").read()
    project = tmp_path / "project"
    zipfile.ZipFile(io.BytesIO(data)).extractall(project / COPY_PACKAGE)  # unzip stem.zip -d ...
    out = tmp_path / "result.pt"
    script = tmp_path / "use_it.py"
    script.write_text(SCRIPT.format(
        parent=str(project), prefix=f"{COPY_PACKAGE}.", stem=stem, out=str(out),
        example=textwrap.dedent(EXAMPLES[name]).strip(),
    ))
    returncode, output = torch_only(script)
    assert returncode == 0, output[-3000:]
    copied = [torch.load(out, weights_only=False)]

    if len(copy_set(name)) == 1:  # its page says the file also works alone, as a top-level module
        alone = tmp_path / "alone"
        alone.mkdir()
        (alone / name).write_bytes(urllib.request.urlopen(f"{built_site.url}code/llm_attention/{name}").read())
        script.write_text(SCRIPT.format(
            parent=str(alone), prefix="", stem=stem, out=str(out),
            example=textwrap.dedent(EXAMPLES[name]).strip(),
        ))
        returncode, output = torch_only(script)
        assert returncode == 0, output[-3000:]
        copied.append(torch.load(out, weights_only=False))

    import importlib

    ours = run_example(importlib.import_module(f"llm_attention.{stem}"),
                       lambda sibling: importlib.import_module(f"llm_attention.{sibling}"), name)
    for copy in copied:
        assert_same(copy, ours, name)


# ---- The imports that make a set work under any name ----

def _imports(name: str) -> list[ast.AST]:
    tree = ast.parse((PACKAGE / name).read_text(encoding="utf8"))
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


@pytest.mark.parametrize("name", copyable_modules())
def test_imports_are_torch_the_standard_library_or_relative(name):
    outside = set()
    for node in _imports(name):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            continue
        modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module]
        outside |= {module.split(".")[0] for module in modules}
    assert outside - set(sys.stdlib_module_names) - {"torch"} == set(), name


@pytest.mark.parametrize("name", copyable_modules())
def test_no_module_imports_another_ones_private_helper(name):
    for node in _imports(name):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            private = [alias.name for alias in node.names if alias.name.startswith("_")]
            assert not private, f"{name} imports {private} from .{node.module}"


@pytest.mark.parametrize("name", copyable_modules())
def test_the_docstring_names_what_the_module_builds_on(name):
    docstring = ast.get_docstring(ast.parse((PACKAGE / name).read_text(encoding="utf8")))
    last = docstring.split("\n\n")[-1].replace("\n", " ")
    siblings = sibling_imports(name)
    if not siblings:
        assert any(f"Needs {what}" in last for what in ("only torch", "torch", "only the standard library")), (name, last)
        return
    named = {word.strip("`,.") for word in last.split() if word.strip("`,.").endswith(".py")}
    assert "Builds on" in last and named == set(siblings), (name, last, siblings)


def test_a_set_is_the_module_and_what_it_needs():
    """The sets follow imports through: modern.py needs checks.py only through its siblings."""
    assert copy_set("toy.py") == ["toy.py"]
    assert copy_set("multihead_wrapper.py") == ["multihead_wrapper.py", "causal.py", "checks.py"]
    assert copy_set("generate.py") == ["generate.py", "checks.py", "gpt.py", "kv_cache.py", "multihead.py"]
    with pytest.raises(ValueError, match="name must be one of .*got 'figures.py'"):
        copy_set("figures.py")
