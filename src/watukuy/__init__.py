"""watukuy: webhooks for APIs that don't have them."""

from __future__ import annotations
