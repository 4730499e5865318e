"""Progress on stderr for long work: the chunks of a sweep or search, the steps of a measurement."""

from __future__ import annotations

import contextlib

__all__ = ["space_progress", "steps_progress"]


@contextlib.contextmanager
def space_progress():
    """A callback (done, total) showing how much of a space has been evaluated."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("space", total=None)

        def report(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield report


@contextlib.contextmanager
def steps_progress(total: int):
    """A callback (step, total, seconds) showing the steps of a measurement and the last one's time."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("measuring"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[last]}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("steps", total=total, last="")

        def report(step: int, steps: int, seconds: float) -> None:
            progress.update(task, completed=step, last=f"last step {seconds:.3g} s")

        yield report
