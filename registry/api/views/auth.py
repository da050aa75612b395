"""``POST /api/v1/auth/login/``: exchange a username and password for the user's API token."""

from django.contrib.auth import authenticate
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.authtoken.models import Token
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from headway.client import _wire as wire
from registry.api.answers import answer
from registry.api.schema import ErrorSerializer
from registry.api.serializers import LoginSerializer


class LoginView(APIView):
    authentication_classes = ()
    permission_classes = (AllowAny,)

    @extend_schema(
        request=LoginSerializer,
        responses={
            200: wire.LoginAnswer,
            401: OpenApiResponse(ErrorSerializer, "wrong username or password"),
            429: OpenApiResponse(ErrorSerializer, "too many failed logins"),
        },
    )
    def post(self, request):
        data = LoginSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(
            request,
            username=data.validated_data["username"],
            password=data.validated_data["password"],
        )
        if user is None and getattr(request, "axes_locked_out", False):
            # django-axes: too many wrong passwords for this username from this address.
            return Response(
                {"detail": "Too many failed logins; try again later.", "errors": {}},
                status=status.HTTP_429_TOO_MANY_REQUESTS,
            )
        if user is None:
            return Response(
                {"detail": "Wrong username or password.", "errors": {}},
                status=status.HTTP_401_UNAUTHORIZED,
            )
        token, _ = Token.objects.get_or_create(user=user)
        return answer(wire.LoginAnswer, {"token": token.key, "username": user.username})
