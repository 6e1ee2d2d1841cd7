"""`python -m clusterscaler`: the `clusterscaler` command, with the same arguments and exit
statuses as the console script."""

from __future__ import annotations

import sys

from clusterscaler.commands.cli import main

if __name__ == "__main__":
    sys.exit(main())
