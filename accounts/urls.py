"""``/accounts/``: login and logout, and the single sign-on legs."""

from django.contrib.auth import views as auth_views
from django.urls import path

from accounts import views

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("sso/login/", views.sso_login, name="sso-login"),
    path("sso/callback/", views.sso_callback, name="sso-callback"),
]
