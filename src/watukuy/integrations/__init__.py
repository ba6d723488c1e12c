"""Integrations with web frameworks.

- :mod:`watukuy.integrations.fastapi`: a lifespan that runs the engine with a FastAPI app,
  public health probes and an inspect route for operators
  (``pip install 'watukuy[fastapi]'``).
- :class:`HealthCheck`: the health verdicts those routes serve, usable from any framework::

      check = HealthCheck(engine, max_lag="10m")
      alive = await check.liveness()  # the engine's own progress: for a liveness probe
      result = await check.check()     # everything, lag included: for monitoring
      status = 200 if result.healthy else 503
      body = result.to_dict()          # status and short reasons; detail=True for operators

Importing this package needs no web framework; each framework module imports its own.
"""

from __future__ import annotations

from ._health import Finding, FindingKind, HealthCheck, HealthResult, KeyHealth, Probe

__all__ = ["Finding", "FindingKind", "HealthCheck", "HealthResult", "KeyHealth", "Probe"]
