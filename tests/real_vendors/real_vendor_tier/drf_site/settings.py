"""Django settings of the vendor: one app, PostgreSQL in a schema of the run's own."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

_dsn = urlsplit(os.environ.get("RV_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test"))
_schema = os.environ.get("RV_PG_SCHEMA", "public")

SECRET_KEY = "real-vendor-tier-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "drf_site.urls"
WSGI_APPLICATION = "drf_site.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "rest_framework",
    "django_filters",
    "drf_site.shop",
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _dsn.path.lstrip("/") or "postgres",
        "USER": _dsn.username or "postgres",
        "PASSWORD": _dsn.password or "",
        "HOST": _dsn.hostname or "127.0.0.1",
        "PORT": str(_dsn.port or 5432),
        # Every connection works in the run's schema and nowhere else.
        "OPTIONS": {"options": f"-c search_path={_schema}"},
        "CONN_MAX_AGE": 60,
    }
}

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}
