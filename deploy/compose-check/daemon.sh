# shellcheck shell=bash
# make compose-check: the private Docker daemon's lifecycle (sourced by run.sh).
#
# cc_daemon_start starts dockerd with its own data root, exec root and socket, no default bridge,
# no iptables rules and no IP forwarding (the compose networks are bridges this host never
# routes: containers talk on them, the host reaches published ports through docker-proxy), and
# puts the iptables FORWARD policy back at once should the daemon have changed it.
# cc_daemon_stop_and_clean stops it (and the containerd it started), then undoes every host
# change a daemon can make: DOCKER chains and the rules jumping to them, nft tables that did
# not exist before (only when left empty), the FORWARD policy and net.ipv4.ip_forward.
# cc_daemon_verify checks the host is as it was. Needs: CC_STATE, CC_EXEC_ROOT, CC_SOCK.

CC_DOCKER=/usr/bin/docker      # Debian's client; an unrelated one may sit earlier on PATH
CC_DOCKERD=/usr/sbin/dockerd

cc_forward_policy() { iptables -S FORWARD 2>/dev/null | awk '$1 == "-P" {print $3}'; }

cc_daemon_start() {
  mkdir -p "$CC_STATE/docker" "$CC_STATE/run" "$CC_EXEC_ROOT" "$CC_STATE/docker-config"
  # What to put back: the FORWARD policy, ip_forward and the nft tables present now.
  CC_BEFORE_POLICY=$(cc_forward_policy)
  CC_BEFORE_POLICY=${CC_BEFORE_POLICY:-ACCEPT}
  CC_BEFORE_IP_FORWARD=$(sysctl -n net.ipv4.ip_forward)
  nft list tables 2>/dev/null | sort > "$CC_STATE/run/nft-tables.before"
  printf 'CC_BEFORE_POLICY=%s\nCC_BEFORE_IP_FORWARD=%s\n' \
    "$CC_BEFORE_POLICY" "$CC_BEFORE_IP_FORWARD" > "$CC_STATE/run/before.env"
  echo '{}' > "$CC_STATE/run/daemon.json"   # not the host's /etc/docker/daemon.json
  export DOCKER_HOST="unix://$CC_SOCK" DOCKER_CONFIG="$CC_STATE/docker-config"
  setsid "$CC_DOCKERD" --config-file "$CC_STATE/run/daemon.json" \
    --data-root "$CC_STATE/docker" --exec-root "$CC_EXEC_ROOT" -H "unix://$CC_SOCK" \
    --pidfile "$CC_STATE/run/dockerd.pid" --bridge=none --iptables=false --ip-forward=false \
    --ip-masq=false > "$CC_STATE/dockerd.log" 2>&1 &
  CC_DOCKERD_PID=$!
  local i
  for i in $(seq 1 600); do
    # Every tenth of a second: a daemon that sets FORWARD to DROP gets it back right away.
    [ "$(cc_forward_policy)" = "$CC_BEFORE_POLICY" ] || iptables -P FORWARD "$CC_BEFORE_POLICY"
    if "$CC_DOCKER" version > /dev/null 2>&1; then break; fi
    kill -0 "$CC_DOCKERD_PID" 2>/dev/null || { echo "dockerd exited: see $CC_STATE/dockerd.log" >&2; return 1; }
    sleep 0.1
  done
  [ "$(cc_forward_policy)" = "$CC_BEFORE_POLICY" ] || iptables -P FORWARD "$CC_BEFORE_POLICY"
  "$CC_DOCKER" version > /dev/null || { echo "dockerd did not answer within 60 s" >&2; return 1; }
  echo "dockerd $CC_DOCKERD_PID on $CC_SOCK (data root $CC_STATE/docker)"
}

# Rules in a built-in chain that jump to a DOCKER chain, then the DOCKER chains themselves.
cc_remove_docker_chains() {
  local table chain rule
  for table in filter nat; do
    iptables -t "$table" -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j DOCKER' | while read -r rule; do
      # shellcheck disable=SC2086  # a rule is words
      iptables -t "$table" ${rule/#-A/-D} || true
    done
    for chain in $(iptables -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
      iptables -t "$table" -F "$chain" || true
    done
    for chain in $(iptables -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
      iptables -t "$table" -X "$chain" || true
    done
  done
}

cc_daemon_stop_and_clean() {
  local pid i
  pid=$(cat "$CC_STATE/run/dockerd.pid" 2>/dev/null || echo "${CC_DOCKERD_PID:-}")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for i in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  # The containerd dockerd started for itself (its pid file is under our exec root).
  pid=$(cat "$CC_EXEC_ROOT/containerd/containerd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for i in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  # Mounts a killed daemon may have left under its roots (deepest first).
  awk -v a="$CC_STATE/docker" -v b="$CC_EXEC_ROOT" 'index($2, a) == 1 || index($2, b) == 1 {print $2}' \
    /proc/mounts | sort -r | while read -r mnt; do umount -l "$mnt" || true; done
  [ -f "$CC_STATE/run/before.env" ] || return 0
  # shellcheck disable=SC1091
  . "$CC_STATE/run/before.env"
  cc_remove_docker_chains
  iptables -P FORWARD "$CC_BEFORE_POLICY" || true
  sysctl -q -w "net.ipv4.ip_forward=$CC_BEFORE_IP_FORWARD" || true
  # nft tables that appeared while the daemon ran, deleted only when nothing else is in them.
  local family name
  nft list tables 2>/dev/null | sort | comm -13 "$CC_STATE/run/nft-tables.before" - \
    | while read -r _ family name; do
        if ! nft list table "$family" "$name" | grep -qE '^\s+(ip|tcp|udp|meta|counter|jump|accept|drop|ct|iifname|oifname)\b'; then
          nft delete table "$family" "$name" || true
        fi
      done
  rm -rf "$CC_EXEC_ROOT"
}

# Prints "name<TAB>ok|fail<TAB>detail" lines; returns 1 when one failed.
cc_daemon_verify() {
  # shellcheck disable=SC1091
  . "$CC_STATE/run/before.env"
  local rc=0 policy forward chains procs
  policy=$(cc_forward_policy); policy=${policy:-ACCEPT}
  forward=$(sysctl -n net.ipv4.ip_forward)
  chains=$( { iptables -t filter -S; iptables -t nat -S; } 2>/dev/null | grep -c DOCKER || true)
  procs=$(pgrep -f "($CC_DOCKERD|containerd).*($CC_SOCK|$CC_EXEC_ROOT)" | wc -l)
  _cc_check() { if [ "$2" = "$3" ]; then printf '%s\tok\t%s\n' "$1" "$2"; else printf '%s\tfail\t%s (want %s)\n' "$1" "$2" "$3"; rc=1; fi; }
  _cc_check forward_policy "$policy" "$CC_BEFORE_POLICY"
  _cc_check ip_forward "$forward" "$CC_BEFORE_IP_FORWARD"
  _cc_check docker_iptables_entries "$chains" 0
  _cc_check daemon_processes "$procs" 0
  return $rc
}
