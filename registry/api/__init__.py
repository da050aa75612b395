"""The REST API (``/api/v1/``): DRF viewsets over the registry services."""
