"""The node process command line (``python -m nodes``).

``python -m nodes [run] --config node.properties [--override key=value]… [--bug NAME]…``
    runs one node until SIGTERM/SIGINT (a graceful shutdown: the leader hands over, bounded by
    ``kraftwerk.shutdown.timeout.ms``; then flush, exit 0). Logs go to stderr and to
    ``<log.dirs>/node.log``; node events to ``<log.dirs>/events.jsonl``. With
    ``process.roles=controller,broker`` the node is also a Kafka-style broker: Kafka clients
    (kafka-python, librdkafka) connect to the CLIENT listener; partition logs live in
    ``<log.dirs>/partitions/``. ``process.roles=broker`` is a broker that observes the quorum
    (not in ``controller.quorum.voters``; ``listeners=BROKER://…,CLIENT://…``).
``python -m nodes dump-log (--config node.properties | --dir DIR)``
    prints the node's committed log (``logs/<node>.jsonl`` lines) from its data directory.
``python -m nodes disk-fault --dir DIR --fault lose-unsynced|torn|corrupt [--seed N]``
    damages a stopped node's log files (``diskfault.py``); prints what was done as JSON.

Example ``node.properties`` (node 1 of 3; see ``config.py`` for every key)::

    node.id=1
    process.roles=controller,broker
    controller.quorum.voters=1@127.0.0.2:9093,2@127.0.0.3:9093,3@127.0.0.4:9093
    listeners=CONTROLLER://127.0.0.2:9093,CLIENT://127.0.0.2:9092
    log.dirs=/var/lib/kraftwerk/n1
    controller.quorum.election.timeout.ms=1000
    controller.quorum.fetch.timeout.ms=2000
    kraftwerk.bugs=

Exit codes: 0 clean stop, 1 cannot start or storage failure (corrupt quorum-state, directory in
use, port taken, I/O error), 2 bad arguments or configuration (the message names the key),
3 the raft core stopped on an illegal state (Fatal).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from .config import ConfigError, NodeConfig, load_config
from .driver import EXIT_STORAGE, NodeDriver, StartupError
from .storage import StorageError, offline_dump

__all__ = ["EXIT_CONFIG", "main"]

EXIT_CONFIG = 2
log = logging.getLogger("nodes")


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nodes", description="Run one kraftwerk quorum node.")
    p.add_argument("--config", required=True, help="Kafka-style node.properties file")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    p.add_argument("--bug", action="append", default=[], metavar="NAME", help="turn on a seeded bug (repeatable)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p


def _dump_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nodes dump-log", description="Print the committed log dump.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="node.properties (its log.dirs is read)")
    source.add_argument("--dir", help="the node's data directory")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--bug", action="append", default=[], metavar="NAME", help="read the log as a node with this bug")
    return p


def _setup_logging(config: NodeConfig, level: str) -> None:
    fmt = logging.Formatter(f"%(asctime)s %(levelname)-7s [{config.name}] %(name)s: %(message)s")
    root = logging.getLogger()
    root.setLevel(level)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    try:
        config.log_dir.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(config.log_dir / "node.log", encoding="utf-8"))
    except OSError as exc:
        print(f"warning: no log file in {config.log_dir}: {exc}", file=sys.stderr)
    for handler in handlers:
        handler.setFormatter(fmt)
        root.addHandler(handler)


async def _serve(config: NodeConfig) -> int:
    driver = NodeDriver(config)
    try:
        await driver.open()
    except StartupError as exc:
        log.error("cannot start: %s", exc)
        return EXIT_STORAGE
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, driver.request_stop)
    driver.start()
    await driver.stopped.wait()
    return driver.exit_code or 0


def _run(argv: Sequence[str]) -> int:
    args = _run_parser().parse_args(argv)
    try:
        config = load_config(args.config, args.override, args.bug)
    except ConfigError as exc:
        print(f"error: {args.config}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    _setup_logging(config, args.log_level)
    return asyncio.run(_serve(config))


def _dump(argv: Sequence[str]) -> int:
    args = _dump_parser().parse_args(argv)
    if args.dir is not None:
        directory = Path(args.dir)
    else:
        try:
            directory = load_config(args.config, args.override).log_dir
        except ConfigError as exc:
            print(f"error: {args.config}: {exc}", file=sys.stderr)
            return EXIT_CONFIG
    try:
        sys.stdout.write(offline_dump(directory, check_crc="skip-crc" not in args.bug))
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_STORAGE
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] == "dump-log":
            return _dump(args[1:])
        if args and args[0] == "disk-fault":
            from .diskfault import main as disk_fault

            return disk_fault(args[1:])
        if args and args[0] == "run":
            args = args[1:]
        return _run(args)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_CONFIG
