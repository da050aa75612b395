# TEST-ONLY stand-in for postgres:15 (make compose-check): Debian 12's PostgreSQL 15 with an
# entrypoint honouring POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB. Not the real image.
FROM headway-compose-check/base:bookworm
RUN mkdir -p /etc/postgresql-common \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf \
 && apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
