"""Celery tasks that run trials on a host."""
