"""`python -m bench`: see `bench/run.py`; `python -m bench peer`: see `bench/peer/run.py`."""

from __future__ import annotations

import sys

if sys.argv[1:2] == ["peer"]:
    from bench.peer.run import main as peer_main

    sys.exit(peer_main(sys.argv[2:]))

from bench.run import main

sys.exit(main())
