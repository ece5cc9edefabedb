"""All CLI output goes through here. What a command reports (lists, status, plans, estimates, results) goes to
stdout, as kubectl and Kafka's tools print theirs, so it pipes into grep and less; diagnostics, progress and
warnings go to stderr. With --json, stdout holds the JSON alone and the human report goes to stderr."""

import getpass
import json
import socket
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console


class Output:
    def __init__(self, as_json: bool = False):
        self.as_json = as_json
        # No emoji codes: an ID like decommission:five:… must not print as a keycap.
        self.err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
        self.out = Console(highlight=False, soft_wrap=True, emoji=False)

    @property
    def _report(self) -> Console:
        """Where the human report goes: stdout, unless that holds the JSON."""
        return self.err if self.as_json else self.out

    def human(self) -> "Output":
        """An Output for a part of this command that reports as people read it (a live watch): the same as this
        one, except that with --json its report goes to stderr, beside this command's JSON on stdout."""
        other = Output(False)
        if self.as_json:
            other.out = other.err
        return other

    def show(self, message: str) -> None:
        """A line of what the command reports (data, not a diagnostic)."""
        self._report.print(message, markup=False)

    def info(self, message: str) -> None:
        """Progress and diagnostics: stderr."""
        self.err.print(message, markup=False)

    def success(self, message: str) -> None:
        self.err.print(f"[green]✓[/green] {message}" if self.err.is_terminal else f"ok: {message}")

    def warning(self, message: str) -> None:
        self.err.print(f"warning: {message}", style="yellow", markup=False)

    def error(self, message: str) -> None:
        self.err.print(f"error: {message}", style="red", markup=False)

    def table(self, title: str, columns: list[str], rows: Sequence[Sequence[object]]) -> None:
        """A drawn table on a terminal; piped or redirected, the title and then tab-separated lines, one a row, so
        that no ID is wrapped or cut and the lines can be cut and grepped."""
        cells = [["-" if v is None else str(v) for v in row] for row in rows]
        report = self._report
        if not report.is_terminal:
            lines = [title, "\t".join(columns), *("\t".join(row) for row in cells)]
            report.file.write("\n".join(lines) + "\n")
            report.file.flush()
            return
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in cells:
            table.add_row(*row)
        report.print(table)

    def data(self, value: Any) -> None:
        """The machine-readable result (a pydantic model, a dict or a list), printed on stdout only with --json."""
        if not self.as_json:
            return
        if hasattr(value, "model_dump_json"):
            sys.stdout.write(value.model_dump_json(indent=2) + "\n")
        else:
            sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def default_actor() -> str:
    """Who asks, unless told: user@host."""
    return f"{getpass.getuser()}@{socket.gethostname()}"
