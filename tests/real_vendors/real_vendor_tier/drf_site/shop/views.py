"""The vendor's endpoints: one listing per DRF pagination style, and an order by id.

Filters for incremental polling, written with django-filter:

- ``updated_at__gte``: orders stamped at or after an instant;
- ``after_id``: with ``updated_at__gte``, skips the orders stamped exactly at that instant
  whose id is not greater (a keyset over ``(updated_at, id)``, so a group of orders sharing
  one stamp can be paged through);
- ``ordering``: ``updated_at,id`` (or ``id``, the default of the page-number listing).
"""

from __future__ import annotations

from typing import Any, ClassVar

import django_filters
from django.db.models import QuerySet
from drf_site.shop.models import Order
from rest_framework import generics, pagination, serializers


class OrderSerializer(serializers.ModelSerializer):
    """Every field, as the API shows it."""

    class Meta:
        model = Order
        fields: ClassVar[list[str]] = [
            "id",
            "customer",
            "status",
            "amount",
            "version",
            "updated_at",
        ]


class OrderFilter(django_filters.FilterSet):
    """``updated_at__gte``, ``after_id`` and ``ordering``."""

    updated_at__gte = django_filters.IsoDateTimeFilter(field_name="updated_at", lookup_expr="gte")
    after_id = django_filters.NumberFilter(method="filter_after_id")
    ordering = django_filters.OrderingFilter(fields=(("updated_at", "updated_at"), ("id", "id")))

    class Meta:
        model = Order
        fields: ClassVar[list[str]] = []

    def filter_after_id(self, queryset: QuerySet[Order], name: str, value: Any) -> QuerySet[Order]:
        since = self.form.cleaned_data.get("updated_at__gte")
        if since is None or value is None:
            return queryset
        return queryset.exclude(updated_at=since, id__lte=value)


class PageNumbers(pagination.PageNumberPagination):
    """``?page=N&page_size=M``; a page past the end is ``404 {"detail": "Invalid page."}``."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 1000


class LimitOffset(pagination.LimitOffsetPagination):
    """``?limit=M&offset=K``; past the end, an empty page."""

    default_limit = 100
    max_limit = 1000


class Cursor(pagination.CursorPagination):
    """Opaque ``cursor`` tokens in ``next`` links, positioned in ``updated_at`` order."""

    ordering = ("updated_at", "id")
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class _Orders(generics.ListAPIView):
    serializer_class = OrderSerializer
    filterset_class = OrderFilter

    def get_queryset(self) -> QuerySet[Order]:
        return Order.objects.order_by("id")


class OrdersByPage(_Orders):
    """``PageNumberPagination``."""

    pagination_class = PageNumbers


class OrdersByOffset(_Orders):
    """``LimitOffsetPagination``."""

    pagination_class = LimitOffset


class OrdersByCursor(_Orders):
    """``CursorPagination``."""

    pagination_class = Cursor


class OrderDetail(generics.RetrieveAPIView):
    """One order, or ``404``."""

    serializer_class = OrderSerializer
    queryset = Order.objects.all()
