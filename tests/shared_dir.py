"""Where the project's ``shared`` reference directory is: one rule for the tests and the benchmarks.

``HLOSHARD_SHARED`` if set, else ``<repo>/../shared`` (where CI checks it out beside the clone). Nothing here
checks that it exists: tests reach it through :func:`tests.conftest.require_shared` (skip locally, fail under
``CI=true``); a benchmark that needs it says which path it looked at.
"""

from __future__ import annotations

import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("HLOSHARD_SHARED") or (ROOT.parent / "shared")).resolve()
