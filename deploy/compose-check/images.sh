# shellcheck shell=bash
# make compose-check: every image the stack needs, built here (sourced by run.sh; no registry).
#
# cc_base_image: `debootstrap --variant=minbase bookworm`, imported as
#   headway-compose-check/base:bookworm. The root file system's tarball is kept in
#   $CC_STATE/cache/ (reused by later runs on this machine; `make clean` drops it).
# cc_standin_images: TEST-ONLY stand-ins from Debian packages on that base, under the tags
#   docker-compose.yml and the Dockerfile name (standins/*.Dockerfile say what each is).
# cc_project_image: the project's Dockerfile, unchanged, as headway:latest (the compose file's
#   image), with pip trusting this machine's CA (the python stand-in's PIP_CERT) and torch from
#   a PEP 503 index served on loopback from the wheels on this disk (TORCH_INDEX).
# Needs: CC_ROOT, CC_STATE, CC_DOCKER, DOCKER_HOST; the images stay in the daemon's data root.

CC_BASE_TAG=headway-compose-check/base:bookworm
CC_STANDINS=(
  "python:3.11-slim python.Dockerfile"
  "postgres:15 postgres.Dockerfile"
  "redis:7 redis.Dockerfile"
  "minio/minio:latest minio.Dockerfile"
  "nginx:1.27-alpine nginx.Dockerfile"
)
CC_MIRROR=${CC_MIRROR:-http://deb.debian.org/debian}

cc_base_image() {
  if "$CC_DOCKER" image inspect "$CC_BASE_TAG" > /dev/null 2>&1; then
    echo "base image $CC_BASE_TAG: kept from an earlier run"
    return 0
  fi
  local tarball="$CC_STATE/cache/bookworm-minbase.tar" rootfs="$CC_STATE/rootfs"
  mkdir -p "$CC_STATE/cache"
  if [ ! -s "$tarball" ]; then
    rm -rf "$rootfs"
    echo "debootstrap --variant=minbase bookworm (a few minutes) ..."
    debootstrap --variant=minbase bookworm "$rootfs" "$CC_MIRROR" > "$CC_STATE/debootstrap.log" 2>&1 \
      || { echo "debootstrap failed: see $CC_STATE/debootstrap.log" >&2; return 1; }
    # As Debian's own images: services are never started by package scripts, no recommends,
    # no package caches kept.
    printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"
    chmod 755 "$rootfs/usr/sbin/policy-rc.d"
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
      > "$rootfs/etc/apt/apt.conf.d/90headway-compose-check"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" --numeric-owner -cf "$tarball.part" . && mv "$tarball.part" "$tarball" || return 1
    rm -rf "$rootfs"
  fi
  "$CC_DOCKER" import "$tarball" "$CC_BASE_TAG" > /dev/null || return 1
  echo "base image $CC_BASE_TAG imported"
}

cc_standin_images() {
  local context="$CC_STATE/standins-context" entry tag file
  rm -rf "$context"
  cp -r "$CC_ROOT/deploy/compose-check/standins" "$context"
  cp /etc/ssl/certs/ca-certificates.crt "$context/ca-bundle.crt"
  for entry in "${CC_STANDINS[@]}"; do
    read -r tag file <<< "$entry"
    echo "stand-in $tag ($file) ..."
    "$CC_DOCKER" build --network host -q -t "$tag" -f "$context/$file" "$context" > /dev/null \
      || { echo "building the stand-in $tag failed" >&2; return 1; }
  done
}

# A PEP 503 index of torch==2.13.0 and its dependencies, fetched once by this machine's pip
# (its configuration finds the CPU wheel on disk), in $CC_STATE/cache/torch-index/simple.
cc_torch_index() {
  local wheels="$CC_STATE/cache/torch-wheels" index="$CC_STATE/cache/torch-index"
  if [ ! -f "$index/.complete" ]; then
    mkdir -p "$wheels"
    "$CC_ROOT/.venv/bin/pip" download -q --only-binary=:all: -d "$wheels" torch==2.13.0 \
      || { echo "pip download torch==2.13.0 failed" >&2; return 1; }
    "$CC_ROOT/.venv/bin/python" "$CC_ROOT/deploy/compose-check/compose_check.py" \
      index "$wheels" "$index/simple" || return 1
    touch "$index/.complete"
  fi
}

cc_project_image() {
  cc_torch_index || return 1
  local port
  port=$("$CC_ROOT/.venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$CC_ROOT/.venv/bin/python" -m http.server --bind 127.0.0.1 -d "$CC_STATE/cache/torch-index" \
    "$port" > "$CC_STATE/torch-index.log" 2>&1 &
  CC_INDEX_PID=$!
  sleep 1
  echo "headway:latest from Dockerfile (torch from http://127.0.0.1:$port/simple) ..."
  local rc=0
  "$CC_DOCKER" build --network host --build-arg "TORCH_INDEX=http://127.0.0.1:$port/simple" \
    -t headway:latest "$CC_ROOT" > "$CC_STATE/project-build.log" 2>&1 || rc=$?
  kill "$CC_INDEX_PID" 2>/dev/null || true
  wait "$CC_INDEX_PID" 2>/dev/null || true
  CC_INDEX_PID=
  [ "$rc" = 0 ] || { echo "docker build failed: see $CC_STATE/project-build.log" >&2; tail -20 "$CC_STATE/project-build.log" >&2; return 1; }
  echo "headway:latest built"
}

# Every image this check built (the tags above and headway:latest), for `docker rmi`.
cc_built_images() {
  local entry
  echo headway:latest
  for entry in "${CC_STANDINS[@]}"; do echo "${entry%% *}"; done
  echo "$CC_BASE_TAG"
}
