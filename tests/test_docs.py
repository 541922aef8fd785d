"""The docs name what a user needs and stay inside the repository."""

from __future__ import annotations

import re
from pathlib import Path

from cohabit.spec.cluster import PRESETS
from cohabit.sim.traces import EMBEDDED

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_architecture_page_is_self_contained() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert not re.search(r"\.\./shared|shared folder|DESIGN\.md", text)


def test_readme_names_every_benchmark_preset_and_example() -> None:
    missing = [p.name for p in sorted((ROOT / "bench").glob("*.py")) if f"`{p.name}`" not in README]
    assert not missing, f"README does not name bench/{missing}"
    assert [n for n in PRESETS if f"`{n}`" not in README] == []
    assert [n for n in EMBEDDED if f"`{n}`" not in README] == []
    assert "examples/trace.yaml" in README


def test_readme_shows_the_cluster_yaml_format() -> None:
    block = re.search(r"```yaml\n(.*?)```", README, re.S)
    assert block is not None and "nodes:" in block.group(1) and "capacity:" in block.group(1)
    from cohabit.spec.yamlio import loads_cluster

    assert len(loads_cluster(block.group(1), "README.md").nodes) == 5


def test_readme_says_what_is_built_with_its_doc() -> None:
    assert "Harmony ×2" not in README
    intro = README[:README.index("## Quick start")]
    for name, doc in (("Rotary-DLT", "rotary.md"), ("Rotary-AQP", "aqp.md"), ("Ratchet", "ratchet.md"),
                      ("MLFS", "mlfs.md"), ("Harmony-DRL", "drl.md")):
        assert name in intro and f"docs/{doc}" in intro, name
        assert (ROOT / "docs" / doc).is_file(), doc
    assert "Planned, not built" not in intro  # every seed system is built; shortfalls are in their docs

