"""A minimal Django REST Framework project: the vendor of the real-vendor tier.

``settings`` reads its database from the environment (``RV_PG_DSN``, ``RV_PG_SCHEMA``), so
every run gets a schema of its own; ``shop`` holds the ``Order`` model and its list views.
"""
