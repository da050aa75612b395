"""User accounts beyond Django's: sign-in through an OpenID Connect provider (single sign-on),
the identities it links to users, and the groups it keeps in step (docs/security.md)."""
