"""The vendor's routes.

Every list is served under ``/c/<client>/``: the client name only labels the request in
gunicorn's access log, so the tier can count each poller's requests at the vendor.
"""

from __future__ import annotations

from django.urls import include, path
from drf_site.shop import views

api = [
    path("orders/pages/", views.OrdersByPage.as_view()),
    path("orders/offset/", views.OrdersByOffset.as_view()),
    path("orders/cursor/", views.OrdersByCursor.as_view()),
    path("orders/<int:pk>/", views.OrderDetail.as_view()),
]

urlpatterns = [path("c/<str:client>/", include(api)), *api]
