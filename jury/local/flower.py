"""`jury flower`: Flower, in this process, against the configured broker.

Flower shows what task events carry: the task's name, its arguments as the producer wrote
them (`argsrepr`: references — batch, item, dimension, and for a judge task judge and
sample — never item text or a key), its state (FAILURE for a judgment stored as failed, with
its error kind and message), its result (the score, or a callback's verdict), runtime and
worker. Here the arguments are labelled on the page, and the
tasks table shows them. Results live in the store, not in Flower.
"""

from __future__ import annotations

import ast
import os
import socket
import sys
from typing import Any

from celery import Celery

from jury.errors import ConfigurationError
from jury.schemas.tasks import AGGREGATE_TASK, GENERATE_TASK, JUDGE_TASK
from jury.settings import Settings

DEFAULT_PORT = 5555
# Loopback unless told otherwise: Flower can revoke tasks and shows every batch's task list.
DEFAULT_ADDRESS = "127.0.0.1"
TASK_COLUMNS = "name,uuid,state,args,result,received,runtime,worker"
# The references each task carries: a judge task's sample, a chord callback's cell, a
# generation's (item, candidate).
ARG_LABELS = {
    JUDGE_TASK: ("batch", "item", "dimension", "judge", "sample"),
    AGGREGATE_TASK: ("batch", "item", "dimension"),
    GENERATE_TASK: ("batch", "item", "candidate"),
}


def label_args(
    argsrepr: str | None, labels: tuple[str, ...] = ARG_LABELS[JUDGE_TASK]
) -> str | None:
    """`['b1', 'q1', 'tone', 'openai/x', 0]` → `batch=b1 item=q1 dimension=tone …`; anything
    that does not parse as these references is returned unchanged."""
    if not argsrepr:
        return argsrepr
    try:
        values = ast.literal_eval(argsrepr)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return argsrepr
    if not isinstance(values, tuple | list) or len(values) != len(labels):
        return argsrepr
    return " ".join(f"{label}={value}" for label, value in zip(labels, values, strict=True))


def format_task(task: Any) -> Any:
    """Flower's `format_task` hook: called on a copy of each task it is about to show."""
    labels = ARG_LABELS.get(getattr(task, "name", None) or "")
    if labels is not None:
        task.args = label_args(task.args, labels)
    return task


def check_basic_auth(value: str | None) -> None:
    if value is None:
        return
    for pair in value.split(","):
        user, sep, password = pair.partition(":")
        if not sep or not user or not password:
            raise ConfigurationError(
                "--basic-auth (or FLOWER_BASIC_AUTH) must be user:password (several separated "
                f"by commas); got {len(pair)} characters without a user and a password"
            )


def check_flower_options(extra: tuple[str, ...]) -> None:
    """Flower silently ignores an option it does not know: refuse one here instead."""
    from flower.options import options  # defines Flower's options; imported only here

    for arg in extra:
        name = arg[2:].partition("=")[0] if arg.startswith("--") else ""
        if not name or name not in options:
            raise ConfigurationError(
                f"{arg!r} is not a Flower option: after `--`, give Flower's own options as "
                "--name=value (e.g. --url_prefix=flower); see `celery flower --help`"
            )


def flower_argv(
    port: int, address: str, basic_auth: str | None, extra: tuple[str, ...] = ()
) -> list[str]:
    argv = ["flower", f"--port={port}", f"--address={address}", f"--tasks_columns={TASK_COLUMNS}"]
    if basic_auth:
        argv.append(f"--basic_auth={basic_auth}")
    return argv + list(extra)


def check_port(address: str, port: int) -> None:
    """Refuse a port something else listens on, before Flower fails on it with a traceback."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((address, port))
    except OSError as exc:
        raise ConfigurationError(
            f"cannot listen on {address} port {port}: {exc.strerror or exc} (another Flower, "
            "or another program, may use it). Pick a free one with --port, e.g. --port "
            f"{port + 1}, or stop what listens there."
        ) from None


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_EVERY_INTERFACE = ("0.0.0.0", "::", "")


def allowed_hosts(address: str, extra: list[str]) -> set[str]:
    """The names a browser may reach Flower by (its requests' Host header): the address it
    listens on (loopback: every loopback name; every interface: this machine's names), and
    those the operator lists in JURY_FLOWER_HOSTS. A page of another site that a DNS name
    of its own points at this machine (DNS rebinding) sends its own name, and is refused."""
    hosts = {address.lower().strip("[]"), *(h.lower() for h in extra)}
    if address in LOOPBACK_NAMES or address.startswith("127."):
        hosts |= set(LOOPBACK_NAMES)
    if address in _EVERY_INTERFACE:
        hosts |= {*LOOPBACK_NAMES, socket.gethostname().lower(), socket.getfqdn().lower()}
    return hosts - {""}


def install_host_check(hosts: set[str]) -> None:
    """Every request Flower routes (pages, API, static files) first has its Host checked:
    another name gets 421 Misdirected Request, and nothing else. Tornado's Application
    routes every request through find_handler (tornado.web.Application.find_handler,
    get_handler_delegate), which Flower's app inherits."""
    import tornado.web
    from flower.app import Flower

    class MisdirectedHost(tornado.web.RequestHandler):
        def prepare(self) -> None:
            self.set_status(421)
            self.finish("jury flower answers only the hosts it was told (JURY_FLOWER_HOSTS)\n")

    routed = tornado.web.Application.find_handler

    def find_handler(app: Any, request: Any, **kwargs: Any) -> Any:
        host = str(request.host_name or "").lower().strip("[]")
        if host not in hosts:
            return app.get_handler_delegate(request, MisdirectedHost)
        return routed(app, request, **kwargs)

    Flower.find_handler = find_handler


def run_flower(
    settings: Settings, port: int, address: str, basic_auth: str | None, extra: tuple[str, ...]
) -> int:
    """Serve Flower until interrupted; returns the exit code."""
    basic_auth = basic_auth or os.environ.get("FLOWER_BASIC_AUTH") or None
    check_basic_auth(basic_auth)
    check_flower_options(extra)
    check_port(address, port)
    if not basic_auth and address not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"jury flower: warning: serving on {address} without --basic-auth; anyone who can "
            "reach the port can see and revoke tasks",
            file=sys.stderr,
        )
    from flower.options import options  # defines Flower's options; imported only here

    options.format_task = format_task
    install_host_check(allowed_hosts(address, settings.flower_hosts))
    app = Celery("jury", set_as_current=True)
    app.conf.update(settings.celery_config())
    code = app.start(argv=flower_argv(port, address, basic_auth, extra))
    return int(code or 0)
