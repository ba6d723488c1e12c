"""The vendor's one model: an order whose ``updated_at`` is stamped when it is saved."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    """An order. Its id is the vendor's order number, so a deleted order can come back.

    ``updated_at`` is set by ``save()`` (``auto_now``), inside the writer's transaction,
    which may stay open for seconds: rows become visible out of ``updated_at`` order, as
    they do in any database-backed API.
    """

    id = models.BigIntegerField(primary_key=True)
    customer = models.CharField(max_length=40)
    status = models.CharField(max_length=20)
    amount = models.DecimalField(max_digits=10, decimal_places=2)
    version = models.IntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        db_table = "orders"
        app_label = "shop"
