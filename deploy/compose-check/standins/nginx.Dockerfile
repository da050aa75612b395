# TEST-ONLY stand-in for nginx:1.27-alpine (make compose-check): Debian 12's nginx (1.22) and
# wget (the compose health check's) on the debootstrap base. Not the real image.
FROM headway-compose-check/base:bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends nginx wget \
 && rm -rf /var/lib/apt/lists/* \
 && chmod -R a+rwX /var/lib/nginx
EXPOSE 80
CMD ["nginx", "-g", "daemon off;"]
