"""``cohabit train NAME ...``: the training commands of learned policies (MLF-RL, Harmony-DRL, ...).

Each learned policy keeps its trainer beside its policy module and lists it here, one line
in :data:`TRAINERS`: ``"command-name": "module:function"``; the function is a typer command
(its signature is the command's options). The group is built (and the modules imported) only when
``cohabit train`` runs (:mod:`cohabit.cli_lazy`), so ``cohabit --help`` stays fast and a trainer's heavy
imports (torch) load on use.
"""

from __future__ import annotations

from importlib import import_module

import typer

#: command name -> "module:function" of a typer command function.
TRAINERS: dict[str, str] = {
    "mlfs-rl": "cohabit.learn.mlfs_rl:train_mlfs_rl",
    "drl": "cohabit.learn.drl_rl:train_drl",
    "drl-reward": "cohabit.learn.drl_reward:train_drl_reward",
    "drl-dagger": "cohabit.learn.drl_dagger:train_drl_dagger",
}


def train_app() -> typer.Typer:
    """Train the learned policies; writes the weights the package ships."""
    group = typer.Typer(help=train_app.__doc__, no_args_is_help=True)
    for name, target in sorted(TRAINERS.items()):
        module, _, func = target.partition(":")
        group.command(name)(getattr(import_module(module), func))
    return group
