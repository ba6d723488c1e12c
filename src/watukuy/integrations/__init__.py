"""Integrations with web frameworks.

- :mod:`watukuy.integrations.fastapi`: a lifespan that runs the engine with a FastAPI app,
  a public health probe and an inspect route for operators
  (``pip install 'watukuy[fastapi]'``).
- :class:`HealthCheck`: the health verdict those routes serve, usable from any framework::

      check = HealthCheck(engine, max_lag="10m")
      result = await check.check()
      status = 200 if result.healthy else 503
      body = result.to_dict()          # status and short reasons; detail=True for operators

Importing this package needs no web framework; each framework module imports its own.
"""

from __future__ import annotations

from ._health import Finding, HealthCheck, HealthResult, KeyHealth

__all__ = ["Finding", "HealthCheck", "HealthResult", "KeyHealth"]
