# Headway's image: web server, worker and one-shot commands (deploy/entrypoint.sh), as
# docker-compose.yml runs them. The package and its dependencies are installed once, in the
# build stage; the runtime stage copies the virtual environment and the source.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# torch pinned as in the Makefile: 2.13.0, the CPU build (a looser pin pulls a multi-GB CUDA
# build). For GPU workers build with --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN pip install --index-url "$TORCH_INDEX" torch==2.13.0
WORKDIR /app
COPY pyproject.toml README.md ./
COPY headway/ headway/
COPY config/ config/
COPY registry/ registry/
COPY dashboard/ dashboard/
COPY workers/ workers/
RUN pip install ".[server]"

FROM python:3.11-slim
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 \
    HEADWAY_VAR_DIR=/data/var HEADWAY_CHECKPOINT_DIR=/data/checkpoints HEADWAY_PORT=8000
# `headway` runs the web server; `trial` is the user workers start trials as
# (HEADWAY_TRIAL_USER, docs/security.md#trial-isolation). The group `checkpoints` (the trial
# user's own) lets the web server delete the checkpoints trials wrote to the shared volume.
RUN groupadd --system --gid 10000 checkpoints \
 && useradd --system --create-home --uid 10001 --groups checkpoints headway \
 && useradd --system --create-home --uid 10002 --gid checkpoints trial \
 && mkdir -p /data/var /data/checkpoints && chown headway:headway /data/var /data/checkpoints
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY . /app
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=6s --start-period=30s --retries=5 \
    CMD ["/app/deploy/entrypoint.sh", "healthcheck"]
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
CMD ["web"]
