"""Admin site pages: an admin links a provider account to an existing user here."""

from django.contrib import admin

from accounts.models import ExternalIdentity


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    """External identities, searchable by user, issuer and subject."""

    list_display = ("user", "issuer", "subject", "last_login_at")
    search_fields = ("user__username", "issuer", "subject")
    raw_id_fields = ("user",)
