"""The package's version, the one source the build reads it from (``[tool.hatch.version]``).

Read from here rather than from ``importlib.metadata``: that module costs tens of
milliseconds to import, and looking the distribution up scans ``sys.path``; the engine
needs the version for its default ``User-Agent`` on every start.
"""

from __future__ import annotations

__version__ = "0.1.0"
