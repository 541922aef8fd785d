"""Sub-commands of ``cohabit`` that are imported only when they run.

The service stack (SQLAlchemy, Alembic, FastAPI), MLFS's workload generator (SciPy) and the
trainers would cost about a second at every ``cohabit`` start, ``--help`` included. They are
mounted here by name: :data:`LAZY_COMMANDS` maps a command name to ``"module:attribute"``, a
typer command function, or a function returning a :class:`typer.Typer` group (``group=True``).

:class:`LazyGroup` (the main app's click group) lists them beside the eager commands; their
one-line help in ``cohabit --help`` is the function's docstring, read from the module's
source with :mod:`ast` (not imported). Running ``cohabit NAME ...`` (or ``cohabit NAME
--help``) imports the module and hands the arguments to the real command.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import click
import typer
from typer.core import TyperGroup

from .cli_common import EXIT_CODES_HELP

__all__ = ["LAZY_COMMANDS", "LazyCommand", "LazyGroup", "Lazy", "load_command"]


@dataclass(frozen=True)
class Lazy:
    """Where a lazily mounted command lives and how to mount it."""

    target: str  # "module:attribute"
    group: bool = False  # attribute() returns a typer.Typer (a command group)
    settings: dict[str, Any] = field(default_factory=dict)  # extra keywords of ``Typer.command``


_SERVICE = ("serve", "submit", "status", "queue", "cancel", "logs", "top", "tenant", "policy", "whatif")

#: command name -> where it lives, in the order ``cohabit --help`` lists them (after the eager ones).
LAZY_COMMANDS: dict[str, Lazy] = {
    "run": Lazy("cohabit.runtime.cli:run", settings={"epilog": EXIT_CODES_HELP}),
    "hyperband": Lazy("cohabit.pack.cli:hyperband"),
    "mlfs-workload": Lazy("cohabit.sim.mlfs_workload:mlfs_workload"),
    **{name: Lazy(f"cohabit.service.cli:{name}") for name in _SERVICE},
    "train": Lazy("cohabit.train_cli:train_app", group=True),
}


@lru_cache(maxsize=None)
def _docstring(target: str) -> str:
    """The docstring of ``module:function`` read from the module's source, without importing it."""
    module, _, attr = target.partition(":")
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    with open(spec.origin, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), filename=spec.origin)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == attr:
            return ast.get_docstring(node) or ""
    return ""


@lru_cache(maxsize=None)
def load_command(name: str) -> click.Command:
    """Import ``name``'s module and build its click command (once per process)."""
    spec = LAZY_COMMANDS[name]
    module, _, attr = spec.target.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    if spec.group:
        cmd = typer.main.get_command(obj())
    else:
        single = typer.Typer()
        single.command(name, **spec.settings)(obj)
        cmd = typer.main.get_command(single)
    cmd.name = name
    return cmd


class LazyCommand(click.Command):
    """Stands in for a not yet imported command: its help line in listings, the real one on use."""

    def __init__(self, name: str) -> None:
        super().__init__(name, help=_docstring(LAZY_COMMANDS[name].target))

    @property
    def real(self) -> click.Command:
        return load_command(self.name or "")

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        return self.real.make_context(info_name, args, parent=parent, **extra)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return self.real.get_params(ctx)

    def get_help(self, ctx: click.Context) -> str:
        return self.real.get_help(ctx)

    def invoke(self, ctx: click.Context) -> Any:
        return self.real.invoke(ctx)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[Any]:
        return self.real.shell_complete(ctx, incomplete)


class LazyGroup(TyperGroup):
    """The main app's group: its own commands, then :data:`LAZY_COMMANDS` as :class:`LazyCommand`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        own = list(super().list_commands(ctx))
        return own + [n for n in LAZY_COMMANDS if n not in own]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name in LAZY_COMMANDS:
            return LazyCommand(cmd_name)
        return cmd

