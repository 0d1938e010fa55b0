"""benchmarks/bert_recipes.py's dry run: every eager variant of the BERT recipe comparison on the CPU, in rotated
rounds, its table and its JSON (the figures need a GPU: benchmarks/gpu_check.sh runs it there)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bert_recipes.py"


@pytest.fixture(scope="module")
def recipes():
    spec = importlib.util.spec_from_file_location("bert_recipes", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_each_round_rotates_the_order(recipes):
    names = ["a", "b", "c"]
    assert [recipes.rotated(names, r) for r in range(4)] == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"],
                                                             ["a", "b", "c"]]


def test_the_dry_run_times_every_eager_variant_in_rotated_rounds(recipes, tmp_path, capsys):
    out = tmp_path / "recipes.json"
    assert recipes.main(["--dry-run", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    compiled = [v.name for v in recipes.VARIANTS if v.compiled]
    assert f"not run (they compile for minutes on a CPU): {', '.join(compiled)}" in printed
    eager = [v.name for v in recipes.VARIANTS if not v.compiled]
    rounds = [line.split(":", 1)[1].split("  ")[0].strip() for line in printed.splitlines()
              if line.startswith("  round ") and not line.endswith(" ...")]  # not the "starting" lines
    assert rounds == eager + eager[1:] + eager[:1]  # round 2 starts with the second variant
    document = json.loads(out.read_text())
    assert document["dry_run"] is True and document["device"] == "cpu"
    assert [row["variant"] for row in document["variants"]] == eager
    for row in document["variants"]:
        assert row["rounds"] == 2 and row["throughput"] > 0 and row["gpu_util_mean"] is None
    assert [row["fused_adamw"] for row in document["variants"]] == [True, True, False]
    assert "/built-in" in printed and "1.0000" in printed
    assert not (tmp_path / "recipes.json.partial").exists()  # written after each variant, renamed into place
