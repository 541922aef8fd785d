"""``cohabit hyperband`` command (mounted from cohabit.pack.cli.app)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
import typer  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from cohabit.pack.cli import app  # noqa: E402


def _parent() -> typer.Typer:
    parent = typer.Typer()

    @parent.command()
    def other() -> None:  # a second command, as in the real CLI
        pass

    parent.add_typer(app)
    return parent


def test_hyperband_command_writes_json(tmp_path) -> None:
    out = tmp_path / "hb.json"
    r = CliRunner().invoke(_parent(), ["hyperband", "--R", "3", "--samples", "300", "--unit", "16", "--pack", "random",
                                        "--memory-mb", "2", "--json", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["trials"] == 5 and data["pack"] == "random" and 0 <= data["best_val_acc"] <= 1


def test_hyperband_async_schedule(tmp_path) -> None:
    out = tmp_path / "hb.json"
    r = CliRunner().invoke(_parent(), ["hyperband", "--R", "3", "--samples", "300", "--unit", "16", "--pack", "knn",
                                        "--schedule", "async", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["schedule"] == "async"


def test_hyperband_command_rejects_bad_values() -> None:
    r = CliRunner().invoke(_parent(), ["hyperband", "--pack", "magic"])
    assert r.exit_code != 0 and "magic" in r.output


def test_hyperband_measurement_aware_packs(tmp_path) -> None:
    out = tmp_path / "hb.json"
    r = CliRunner().invoke(_parent(), ["hyperband", "--R", "3", "--samples", "300", "--unit", "16", "--pack", "knn",
                                        "--aware", "--interleave", "--memory-mb", "8", "--json", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["aware"] is True and data["mean_pack_size"] <= 4  # the packaged profile's best MLP-3 size
