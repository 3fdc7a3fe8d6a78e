"""`fluxgate-stack`: the command line over :class:`fluxgate_stack.stack.Stack`."""

from __future__ import annotations

import logging
import shlex
import sys
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

from fluxgate_stack import servers
from fluxgate_stack.errors import StackError
from fluxgate_stack.settings import parse_topics
from fluxgate_stack.stack import Stack
from fluxgate_stack.topics import create_topics

app = typer.Typer(help="Real servers on loopback for Fluxgate development and tests.", no_args_is_help=True)
topics_app = typer.Typer(help="Kafka topics.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")

T = TypeVar("T")
ServerNames = Annotated[
    list[str] | None, typer.Argument(help=f"servers among: {', '.join(servers.SERVER_TYPES)}", show_default=False)
]


@app.callback()
def main(quiet: Annotated[bool, typer.Option("--quiet", "-q", help="only errors")] = False) -> None:
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per probe request is noise


@app.command()
def install(names: ServerNames = None) -> None:
    """Fetch what servers need (default: all of them); cached, safe to repeat."""
    _run(lambda: Stack().install(names))


@app.command()
def up(names: ServerNames = None) -> None:
    """Start servers (default: all but coap-server) and wait until ready; reuses running ones."""
    _run(lambda: Stack().up(names))


@app.command()
def down(
    names: ServerNames = None,
    wipe: Annotated[bool, typer.Option(help="also delete the servers' data")] = False,
) -> None:
    """Stop the servers this tool started (default: all)."""
    _run(lambda: Stack().down(names, wipe=wipe))


@app.command()
def purge() -> None:
    """Stop every server and delete downloads, data and logs, also those kept outside the checkout."""
    for folder in _run(lambda: Stack().purge()):
        typer.echo(f"deleted {folder}")


@app.command()
def status() -> None:
    """Which servers run, with pid, ports and readiness."""
    rows = [("SERVER", "STATE", "PID", "PORTS")]
    rows += [(s.name, s.state, str(s.pid or "-"), s.ports) for s in _run(lambda: Stack().status())]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@app.command()
def env() -> None:
    """Print `export` lines for clients: eval "$(fluxgate-stack env)"."""
    stack = Stack()
    for server in servers.build(None, stack.settings, all_if_empty=True):
        for key, value in server.env().items():
            typer.echo(f"export {key}={shlex.quote(value)}")


@topics_app.command("create")
def topics_create(
    specs: Annotated[
        list[str] | None,
        typer.Argument(help="name[:partitions] (default partitions 3); default: FLUXGATE_STACK_TOPICS"),
    ] = None,
) -> None:
    """Create topics that do not exist yet (Kafka must be up)."""
    stack = Stack()
    wanted = parse_topics(",".join(specs)) if specs else stack.settings.topic_partitions
    created = _run(lambda: create_topics(stack.endpoints().bootstrap, wanted))
    typer.echo(f"created: {', '.join(created) or 'none'}; already there: {len(wanted) - len(created)}")


def _run(action: Callable[[], T]) -> T:
    """Turn our errors into a message and exit code 1 instead of a traceback."""
    try:
        return action()
    except StackError as exc:
        typer.echo(f"fluxgate-stack: {exc}", err=True)
        raise typer.Exit(1) from exc
