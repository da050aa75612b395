"""Process entry points run by Headway workers (``python -m headway.exec.harness``)."""
