#!/bin/sh
# The commands Headway's containers run (Dockerfile, docker-compose.yml). e2e_tests/deploy/test_deployment.py
# runs this same script on the build machine (PostgreSQL + Redis + an S3 server), so what the
# containers run is what the test exercises (docs/deployment.md).
#
#   entrypoint.sh migrate          apply database migrations (one-shot, before web and worker)
#   entrypoint.sh bucket NAME      create S3 bucket NAME at $HEADWAY_S3_ENDPOINT_URL if missing
#   entrypoint.sh web [ARGS]       collect static files, then gunicorn (config/gunicorn.py) on
#                                  $HEADWAY_BIND:$HEADWAY_PORT (default 0.0.0.0:8000)
#   entrypoint.sh master           the master's Celery worker: lost-run reaper (with beat), checkpoint
#                                  GC, deletions; it opens the database (one per cluster)
#   entrypoint.sh agent            a GPU host's agent (python -m workers): REST to $HEADWAY_MASTER with
#                                  $HEADWAY_HOST_TOKEN, the broker; no database settings needed
#   entrypoint.sh worker           a host agent beside the master (manage.py worker: issues this
#                                  host's token with the database, then runs the agent without it)
#   entrypoint.sh healthcheck      exit 0 when the web server answers /healthz
#   entrypoint.sh CMD ...          anything else runs as given (e.g. `manage.py createsuperuser`)
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
command="${1:-web}"
[ $# -gt 0 ] && shift

case "$command" in
  migrate)
    exec "$PYTHON" manage.py migrate --noinput
    ;;
  bucket)
    exec "$PYTHON" - "$@" <<'PY'
import os, sys
import boto3, botocore.exceptions
# MinIO's default root account is a published secret: the Django services refuse it too
# (config.env.refuse_default_credentials).
if (os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")) == ("minioadmin", "minioadmin"):
    sys.exit("AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are MinIO's default root account; set your own (docs/deployment.md)")
s3 = boto3.client("s3", endpoint_url=os.environ.get("HEADWAY_S3_ENDPOINT_URL") or None)
try:
    s3.head_bucket(Bucket=sys.argv[1])
    print(f"bucket {sys.argv[1]} exists")
except botocore.exceptions.ClientError:
    s3.create_bucket(Bucket=sys.argv[1])
    print(f"bucket {sys.argv[1]} created")
PY
    ;;
  web)
    "$PYTHON" manage.py collectstatic --noinput -v 0
    export HEADWAY_BIND="${HEADWAY_BIND:-0.0.0.0}"
    exec "$PYTHON" -m gunicorn -c config/gunicorn.py config.wsgi:application "$@"
    ;;
  master)
    exec "$PYTHON" -m celery -A config worker -Q "${HEADWAY_QUEUE:-headway}" --pool=threads \
      --concurrency=2 --without-gossip --without-mingle -l info -B "$@"
    ;;
  agent)
    exec "$PYTHON" -m workers "$@"
    ;;
  worker)
    exec "$PYTHON" manage.py worker "$@"
    ;;
  healthcheck)
    exec "$PYTHON" -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('HEADWAY_PORT', '8000') + '/healthz', timeout=5)"
    ;;
  *)
    exec "$command" "$@"
    ;;
esac
