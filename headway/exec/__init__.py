"""What runs around a trial's processes on a host: the entry points Headway workers start
(``python -m headway.exec.harness``, ``headway.exec.guard``) and the bounding of their output
lines (``loglines``), shared by the host that reads them and the server that stores them."""
