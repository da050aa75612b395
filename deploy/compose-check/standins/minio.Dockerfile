# TEST-ONLY stand-in for minio/minio (make compose-check): moto's S3 server (from PyPI) on port
# 9000 behind a `minio` command that accepts MinIO's command line, and an `mc` that answers the
# compose health check (`mc ready local`). Objects live in memory. Not the real image.
FROM headway-compose-check/base:bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY ca-bundle.crt /usr/local/share/headway-compose-check/ca-bundle.crt
ARG MOTO_VERSION=5.2.5
RUN python3 -m venv /opt/moto \
 && PIP_CERT=/usr/local/share/headway-compose-check/ca-bundle.crt PIP_NO_CACHE_DIR=1 \
    /opt/moto/bin/pip install -q "moto[server]==$MOTO_VERSION"
COPY minio-standin.sh /usr/local/bin/minio
COPY mc-standin.sh /usr/local/bin/mc
EXPOSE 9000
ENTRYPOINT ["/usr/local/bin/minio"]
CMD ["server", "/data"]
