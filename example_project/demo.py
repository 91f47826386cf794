"""Run the redisbeat demo: two beats, a worker and the Django admin on a private Redis.

``make demo`` runs this with the project's virtualenv; ``DEMO_SECONDS=30 make demo`` runs
30 seconds, checks that every occurrence ran exactly once, and exits non-zero if not.
"""

from __future__ import annotations

import sys

from redisbeat_demo.runner import main

if __name__ == "__main__":
    sys.exit(main())
