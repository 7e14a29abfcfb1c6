"""``python -m streams worker [--index N]``: run one stream worker (same consumer group as the rest)."""

from __future__ import annotations

import argparse
import logging
import sys

from pipelines.settings import get_settings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m streams")
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("--index", type=int, default=0, help="worker number (for logs)")
    parser.add_argument("--loglevel", default="warn", choices=["crit", "error", "warn", "info", "debug"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format=f"[worker-{args.index}] %(asctime)s %(levelname)s %(name)s: %(message)s")
    from streams.app import create_app

    app = create_app(get_settings())
    sys.argv = [sys.argv[0], "worker", "--without-web", "-l", args.loglevel]
    app.main()


if __name__ == "__main__":
    main()
