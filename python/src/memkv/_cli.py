"""The `memkv` command, installed with the package: the whole command line of the memkv binary
(serve, mcp, exec, sync, ...), run by the native extension that carries it, so that the wheel
needs no second build of it and no Rust on the machine."""

from __future__ import annotations

import sys
import signal


def main() -> None:
    from . import _native

    # The command handles its own signals, as the binary does: Python's SIGINT handler would
    # only set a flag that nothing reads while the command runs (Ctrl-C would be lost).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(_native.cli(list(sys.argv)))


if __name__ == "__main__":
    main()
