# TEST-ONLY stand-in for redis:7 (make compose-check): Debian 12's Redis 7.0. Not the real image.
FROM headway-compose-check/base:bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/*
EXPOSE 6379
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]
