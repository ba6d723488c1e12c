"""The ``shop`` app."""

from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):
    """Orders and their list endpoints."""

    name = "drf_site.shop"
    label = "shop"
    default_auto_field = "django.db.models.BigAutoField"
