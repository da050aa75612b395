# TEST-ONLY stand-in for python:3.11-slim (make compose-check): Debian 12's Python 3.11 on the
# debootstrap base, trusting this machine's CA bundle for pip (PIP_CERT). Not the real image.
FROM headway-compose-check/base:bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-pip python-is-python3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY ca-bundle.crt /usr/local/share/headway-compose-check/ca-bundle.crt
ENV PIP_CERT=/usr/local/share/headway-compose-check/ca-bundle.crt LANG=C.UTF-8
CMD ["python3"]
