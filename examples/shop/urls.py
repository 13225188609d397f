from __future__ import annotations

from django.urls import path

from shop import views

urlpatterns = [
    path("shops/<str:tenant>/checkout", views.checkout),
    path("shops/<str:tenant>/orders/<int:order>/receipt", views.receipt),
    path("shops/<str:tenant>/orders/<int:order>/refund", views.refund_order),
    path("results/<str:task>/<str:id>", views.outcome),
]
