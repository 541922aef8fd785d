"""Progress bars for the command line's runs, drawn only where someone watches.

On a terminal the bars update live. When the console writes to a file or a
pipe, rich would print each bar's last frame squeezed to 80 columns (bars and
per-job info cut mid-word); there the bars are off and the caller prints one
plain line per finished run instead (:func:`finished_line`).
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn


def progress_bar(console: Console, *extra: ProgressColumn) -> Progress:
    """Description, bar, done/total, elapsed time and ``extra`` columns; disabled unless ``console``
    is a terminal (check ``bar.disable`` to know whether to print :func:`finished_line`)."""
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    *extra, console=console, disable=not console.is_terminal)


def finished_line(console: Console, label: str, done: int, total: int, what: str, seconds: float) -> None:
    """One plain line for a finished run: ``label: done/total what in 1.2 s``."""
    console.print(f"{escape(label)}: {done}/{total} {what} in {seconds:.1f} s", highlight=False, soft_wrap=True)
