"""``fluxgate connect <file>``: read a Kafka Connect connector config and run, in this process's
place, the Fluxgate service that does the same job, with the equivalent ``FLUXGATE_*`` settings
over the current environment (the config wins where both set one). With ``tasks.max`` > 1 it
runs that many members of the service instead, as its children (:mod:`fluxgate_connect.task_processes`),
each with its own settings (:mod:`fluxgate_connect.tasks`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from fluxgate_connect import helm
from fluxgate_connect.config import load
from fluxgate_connect.errors import ConnectError
from fluxgate_connect.task_processes import supervise
from fluxgate_connect.tasks import Members, members
from fluxgate_connect.translate import Translation, dumps_env, translate

app = typer.Typer(add_completion=False, help="Fluxgate command-line tools.")


@app.callback()
def main() -> None:
    """Fluxgate command-line tools."""


@app.command()
def connect(
    file: Annotated[Path, typer.Argument(help="connector config: .properties or the REST JSON")],
    print_env: Annotated[bool, typer.Option("--print-env", help="print the FLUXGATE_* settings, run nothing")] = False,
    print_values: Annotated[
        bool, typer.Option("--print-values", help="print the service chart's Helm values, run nothing")
    ] = False,
    show_secrets: Annotated[
        bool, typer.Option("--show-secrets", help="--print-env prints secret values instead of placeholders")
    ] = False,
) -> None:
    """Run the Fluxgate service that does the connector's job (or print its settings)."""
    try:
        translation = translate(load(file, os.environ))
        tasks = members(translation, os.environ)
    except ConnectError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    for line in translation.notes:
        typer.echo(f"note: {line}", err=True)
    for line in translation.warnings:
        typer.echo(f"warning: {line}", err=True)
    if print_env or print_values:
        text = _env_text(translation, tasks, show_secrets) if print_env else helm.dumps(translation)
        typer.echo(text, nl=False)
        return
    _run(translation, tasks)


def _env_text(translation: Translation, tasks: Members, show_secrets: bool) -> str:
    env, secret = {**translation.env, **tasks.common}, translation.secret_names
    env = {name: value for name, value in env.items() if name not in tasks.each[0]}  # a member's own wins
    shown = {name: value for name, value in env.items() if show_secrets or name not in secret}
    hidden = "".join(f"# {name}=<secret: --show-secrets prints it>\n" for name in sorted(secret - shown.keys()))
    if len(tasks.each) == 1:
        return dumps_env(shown) + hidden
    count = len(tasks.each)
    own = [f"# member {i} of {count} (tasks.max), its own:\n" + dumps_env(tasks.each[i]) for i in range(count)]
    return f"# every member of {count} (tasks.max):\n" + dumps_env(shown) + hidden + "".join(own)


def _run(translation: Translation, tasks: Members) -> None:
    script = _script(translation.connector.script)
    for name, value in sorted({**translation.env, **tasks.common}.items()):
        if os.environ.get(name, value) != value:
            typer.echo(f"warning: {name} from the environment is replaced by the connector config's", err=True)
    if len(tasks.each) > 1:
        raise typer.Exit(_run_members(translation, tasks, script))
    typer.echo(f"fluxgate connect: running {translation.connector.service} ({script})", err=True)
    sys.stderr.flush()
    # The service in this process's place: its signals, exit code and output are the service's own.
    os.execve(script, [script], {**os.environ, **translation.env})  # noqa: S606 - argv of our own script


def _run_members(translation: Translation, tasks: Members, script: str) -> int:
    """tasks.max members as children; the exit code of the first that failed."""
    labels = [f"{translation.connector.service}-{i}" for i in range(len(tasks.each))]
    for label, own in zip(labels, tasks.each, strict=True):
        settings = " ".join(f"{name}={value}" for name, value in sorted(own.items()))
        typer.echo(f"fluxgate connect: running {label} ({script}): {settings}", err=True)
    envs = [{**os.environ, **translation.env, **tasks.env(i)} for i in range(len(labels))]
    return asyncio.run(supervise([script], envs, labels))


def _script(name: str) -> str:
    """The service's console script: beside this Python first (its virtualenv), else on PATH."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        typer.echo(f"error: {name} is not installed (pip install the service's package)", err=True)
        raise typer.Exit(2)
    return found
