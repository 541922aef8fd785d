"""What every ``cohabit`` command shares: the error console, exit codes, and markup-safe text.

Exit codes (documented in README and in ``--help``):

====  =====================================================================
 0    every job of every policy finished (or stopped early on its criteria)
 2    bad input: an unknown option value, policy, trace or format, or a
      malformed file (the message names it); nothing was run
 3    the run ended, but some job was rejected (it can never fit the cluster)
 4    the run ended, but some job did not finish (still pending or paused at
      the end, at ``--horizon``, or cancelled)
 5    the run ended, but some job failed (real execution: its task kept
      crashing past ``--max-restarts``)
====  =====================================================================

When several apply, the highest code wins (failed > unfinished > rejected).
Rich renders ``[...]`` in printed text as markup, so text that comes from the
user (paths, job ids, policy names, messages quoting them) goes through
:func:`escape` before it is printed.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["EXIT_CODES_HELP", "MEANING", "ExitCode", "err", "escape", "exit_code", "fail", "finish"]

err = Console(stderr=True)


class ExitCode(IntEnum):
    """Process exit status of ``cohabit simulate`` / ``cohabit run`` (see the module docstring)."""

    OK = 0
    BAD_INPUT = 2
    REJECTED = 3
    UNFINISHED = 4
    FAILED = 5


#: What each exit code means, as ``--help`` and the closing line of a run say it.
MEANING: dict[ExitCode, str] = {
    ExitCode.OK: "every job finished",
    ExitCode.BAD_INPUT: "bad input (nothing was run)",
    ExitCode.REJECTED: "some job was rejected (it can never fit the cluster)",
    ExitCode.UNFINISHED: "some job did not finish (pending or paused at the end or at --horizon, or cancelled)",
    ExitCode.FAILED: "some job failed (its task kept crashing past --max-restarts)",
}

#: The exit codes in ``--help`` (the epilog of the top-level help, ``simulate`` and ``run``).
EXIT_CODES_HELP = ("Exit codes of simulate and run: " + "; ".join(f"{int(c)} {m}" for c, m in MEANING.items())
                   + ". The highest that applies wins.")


def fail(msg: str) -> NoReturn:
    """Print ``error: msg`` (user text inside shown verbatim, brackets included) and exit with code 2."""
    err.print(f"[bold red]error:[/] {escape(msg)}", soft_wrap=True)
    raise typer.Exit(ExitCode.BAD_INPUT)


def exit_code(results: Iterable[Any]) -> ExitCode:
    """The exit code for finished runs: the worst outcome of any job in any of ``results``.

    Each item is an engine ``RunResult`` (``jobs``: id -> JobView with a ``state``).
    """
    from .engine.state import JobState

    worst = ExitCode.OK
    for result in results:
        for job in result.jobs.values():
            state = JobState(job.state)
            if state in (JobState.FINISHED, JobState.STOPPED_EARLY):
                continue
            code = {JobState.REJECTED: ExitCode.REJECTED, JobState.FAILED: ExitCode.FAILED}.get(
                state, ExitCode.UNFINISHED)
            worst = max(worst, code)
    return worst


def finish(results: Iterable[Any]) -> None:
    """Exit with :func:`exit_code` of ``results``, saying why on stderr when it is not 0."""
    code = exit_code(results)
    if code is not ExitCode.OK:
        err.print(f"[yellow]exit code {int(code)}: {MEANING[code]}[/]")
        raise typer.Exit(int(code))
