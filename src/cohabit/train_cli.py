"""``cohabit train NAME ...``: the training commands of learned policies (MLF-RL, Harmony-DRL, ...).

Each learned policy keeps its trainer beside its policy module and lists it here, one line
in :data:`TRAINERS`: ``"command-name": "module:function"``; the function is a typer command
(its signature is the command's options). Modules are imported only when the group is built,
so ``cohabit --help`` stays fast and a trainer's heavy imports (torch) load on use.
"""

from __future__ import annotations

from importlib import import_module

import typer

#: command name -> "module:function" of a typer command function.
TRAINERS: dict[str, str] = {
    "mlfs-rl": "cohabit.learn.mlfs_rl:train_mlfs_rl",
    "drl": "cohabit.learn.drl_rl:train_drl",
    "drl-reward": "cohabit.learn.drl_reward:train_drl_reward",
}


def register(app: typer.Typer) -> None:
    """Mount ``train`` with one sub-command per entry of :data:`TRAINERS` (none: no group)."""
    if not TRAINERS:
        return
    group = typer.Typer(help="Train the learned policies; writes the weights the package ships.",
                        no_args_is_help=True)
    for name, target in sorted(TRAINERS.items()):
        module, _, func = target.partition(":")
        group.command(name)(getattr(import_module(module), func))
    app.add_typer(group, name="train")
