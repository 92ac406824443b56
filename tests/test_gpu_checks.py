"""The GPU check script still runs, end to end, on the CPU at tiny sizes (``--quick --device
cpu``: its numbers mean nothing there): every section writes what it should, every layer kind
runs its prefill and its cached decoding, and the chunked delta rule agrees with transformers'
torch path. Its real run needs a GPU, which CI does not have."""

from __future__ import annotations

import json
import pathlib

from tests.scripts import run_main

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_checks.py"


def test_a_quick_run_on_the_cpu_writes_every_section(tmp_path, capsys):
    out = tmp_path / "checks.json"
    run_main(SCRIPT, "--quick", "--device", "cpu", "--repeats", "2", "--out", str(out))
    report = json.loads(out.read_text())
    assert report["quick"] is True and report["machine"]["device"] == "cpu"
    assert report["bandwidth"]["copy_bytes_per_s"] > 0
    for row in report["decode"]:
        for name in ("explicit", "fast", "bare_sdpa"):
            assert row[name]["median_s"] > 0 and row[name]["kernels"] is None
        assert row["fast"]["cuda_graph"] == {"error": "not a GPU"}
        assert row["bytes_read"] == row["cache_bytes"] + row["weight_bytes"]
    decays = [row["decay"] for row in report["delta_rule"]]
    assert decays == ["per head", "per head", "per channel"]
    assert all(row["max_difference"] < 1e-5 for row in report["delta_rule"])
    kinds = report["equal_on_device_and_cpu"]
    assert len(kinds) == 33 and all(row.get("relative_difference") == 0.0
                                    for row in kinds.values()), kinds
    assert set(report["goals"]) >= {"fast_step_within_1.25x_bare_sdpa",
                                    "delta_rule_no_slower_than_transformers"}
    assert "goals:" in capsys.readouterr().out
