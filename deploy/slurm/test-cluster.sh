#!/usr/bin/env bash
# A one-node Slurm test cluster on this machine (Debian's slurm-wlm + munge), for the Slurm pool's
# tests: `deploy/slurm/test-cluster.sh start|stop|status`. Not a site configuration: SlurmUser=root,
# no accounting database (job states come from squeue/scontrol; MinJobAge keeps ended jobs an hour),
# non-default ports (16817/16818) so it never meets a real cluster's daemons. State lives in
# $HEADWAY_SLURM_DIR (default /tmp/headway-slurm); the config is written to /etc/slurm/slurm.conf
# only when that file is absent or was written by this script.
set -euo pipefail

dir="${HEADWAY_SLURM_DIR:-/tmp/headway-slurm}"
conf=/etc/slurm/slurm.conf
marker="# Written by headway deploy/slurm/test-cluster.sh"

write_conf() {
  if [ -e "$conf" ] && ! head -1 "$conf" | grep -qF "$marker"; then
    echo "test-cluster.sh: $conf exists and is not ours; refusing to overwrite it" >&2
    exit 1
  fi
  local host cpus
  host="$(hostname -s)"
  cpus="$(nproc)"
  mkdir -p /etc/slurm "$dir"/{state,spool,log}
  cat >"$conf" <<CONF
$marker: a one-node test cluster, not a site config.
ClusterName=headway-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=10
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
}

start() {
  write_conf
  mkdir -p /run/munge && chown munge:munge /run/munge
  if ! munge -n >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
  fi
  pgrep -x slurmctld >/dev/null || slurmctld
  pgrep -x slurmd >/dev/null || slurmd
  for _ in $(seq 1 30); do
    if sinfo -h -o %T 2>/dev/null | grep -q idle; then
      echo "slurm test cluster up: $(sinfo -h -o '%P %D %T %C')"
      return 0
    fi
    sleep 1
  done
  echo "test-cluster.sh: slurm did not become idle; see $dir/log" >&2
  exit 1
}

stop() {
  pkill -x slurmd || true
  pkill -x slurmctld || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) sinfo ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
