"""Django's PostgreSQL backend with Headway's check of pooled connections (``base``)."""
