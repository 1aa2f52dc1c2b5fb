#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, with accounting, for the tests marked `slurm`
# (tests/test_slurm.py). Root and Debian's packages (slurm-wlm, slurmdbd, munge, mariadb-server);
# no systemd: every daemon is started here and stopped by its PID.
#
#   .ci/slurm.sh install   # apt-get the packages (once per machine: .ci/services.sh install)
#   .ci/slurm.sh start     # munged, MariaDB, slurmdbd, slurmctld, slurmd; returns when the node is
#                          # idle (exit status 3: it was running already)
#   .ci/slurm.sh stop      # stops them, newest first, by the PIDs start wrote
#
# State (spool, logs, PID files, the accounting database) lives in $S2S_SLURM_DIR
# (/tmp/s2s-slurm by default). One partition, `debug`, and one account, `s2s`, this user's
# default: the tests submit to the default partition and account, as they would on a lab's.
set -euo pipefail

STATE="${S2S_SLURM_DIR:-/tmp/s2s-slurm}"
# The jobstep plugin of snakemake-executor-plugin-slurm drops SLURM_CONF before its inner srun,
# so the configuration must be where every SLURM command looks without it.
CONF=/etc/slurm/slurm.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
MARK="# written by s2s .ci/slurm.sh"
MYSQL_SOCKET=/run/mysqld/mysqld.sock  # the client library's default, which slurmdbd uses
PARTITION=debug
ACCOUNT=s2s
CLUSTER=s2s

log() { echo "slurm.sh: $*" >&2; }
trap 'log "failed at line $LINENO: $BASH_COMMAND (logs: $STATE/log)"' ERR
die() { log "$*"; exit 1; }

wait_for() {  # wait_for SECONDS WHAT COMMAND...: poll COMMAND until it succeeds
  local seconds=$1 what=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what did not come up within ${seconds}s (logs: $STATE/log)"
    sleep 0.2
  done
}

alive() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

install_packages() {  # every CI service's packages: .ci/services.sh says which are whose
  "$(dirname "$0")/services.sh" install
}

write_configs() {
  for f in "$CONF" "$DBD_CONF"; do  # never overwrite a site's own configuration
    if [[ -e $f ]] && ! grep -qF "$MARK" "$f"; then
      die "$f exists and was not written by this script: not touching a real cluster's config"
    fi
  done
  local host node
  host=$(hostname -s)
  # What slurmd finds on this machine (CPUs, sockets, RealMemory), as the node's definition.
  node=$(slurmd -C | head -n1)
  [[ $node == NodeName=* ]] || die "slurmd -C printed no node line: $node"
  mkdir -p /etc/slurm
  cat >"$CONF" <<EOF
$MARK; removed by '.ci/slurm.sh stop'
ClusterName=$CLUSTER
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
# No cgroups in a container: processes tracked by process group, no task binding. Not by parent
# PID (proctrack/linuxproc): at a time limit SIGTERM ends the batch shell (sbatch --wrap), the
# job-step Snakemake it started (which catches SIGTERM) is re-parented to PID 1, and the SIGKILL
# KillWait later never reached it, its srun or its stage, which outlived the job. The job's
# processes keep the batch shell's process group (nothing there starts a session of its own), so
# the signals reach every one of them wherever it is re-parented.
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without it a job that asks for no memory is given the whole node and runs alone.
DefMemPerCPU=1000
# A finished job stays visible to squeue this long; the executor's status checks are at most
# 180 s apart, so squeue works as a status command too.
MinJobAge=300
# At its time limit a job gets SIGTERM, then SIGKILL this many seconds later (SLURM's default):
# time for the trainer's final checkpoint.
KillWait=30
ReturnToService=2
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
$node State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$DBD_CONF" <<EOF
$MARK; removed by '.ci/slurm.sh stop'
DbdHost=localhost
SlurmUser=root
AuthType=auth/munge
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$DBD_CONF"  # slurmdbd refuses a config others can read (it may hold a password)
}

start() {
  [[ $EUID -eq 0 ]] || die "start needs root (daemons, /etc/slurm)"
  for d in munged mariadbd slurmdbd slurmctld slurmd; do
    command -v "$d" >/dev/null || die "$d not found: run '.ci/slurm.sh install' first"
  done
  if alive "$STATE/slurmctld.pid"; then
    log "already running (slurmctld PID $(cat "$STATE/slurmctld.pid")): using it"
    exit 3
  fi
  local t0=$SECONDS
  rm -rf "$STATE"
  mkdir -p "$STATE"/{ctld,d,log}
  write_configs

  # munged runs as its own user, with its key from the package.
  install -d -o munge -g munge -m 0755 /run/munge "$STATE/munge"
  runuser -u munge -- munged --pid-file="$STATE/munge/munged.pid" \
    --log-file="$STATE/munge/munged.log" --seed-file="$STATE/munge/munged.seed"
  wait_for 10 munged munge -n

  # MariaDB with its own data directory (its PID file and log there too: it runs as mysql), no
  # network, root by socket.
  install -d -o mysql -g mysql -m 0755 "$STATE/mysql"
  install -d -o mysql -g mysql -m 0755 "$(dirname "$MYSQL_SOCKET")"
  mariadb-install-db --user=mysql --datadir="$STATE/mysql" --skip-test-db \
    >"$STATE/log/mariadb-install.log" 2>&1
  setsid mariadbd --user=mysql --datadir="$STATE/mysql" --socket="$MYSQL_SOCKET" \
    --pid-file="$STATE/mysql/mariadbd.pid" --skip-networking --log-error="$STATE/mysql/error.log" \
    --innodb-buffer-pool-size=64M </dev/null >/dev/null 2>&1 &
  wait_for 60 MariaDB mariadb --socket="$MYSQL_SOCKET" -e "select 1"

  slurmdbd
  wait_for 30 slurmdbd sacctmgr -n list cluster
  # The cluster, one account, and this user in it: what the executor's account check asks.
  sacctmgr -i add cluster "$CLUSTER" >/dev/null
  sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description=ci Organization=ci >/dev/null
  sacctmgr -i add user "$(id -un)" Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null
  sacctmgr -i modify user "$(id -un)" set DefaultAccount="$ACCOUNT" >/dev/null

  slurmctld
  wait_for 30 slurmctld scontrol ping
  slurmd
  wait_for 60 "the node" bash -c "sinfo -h -N -o %t | grep -qx idle"
  log "one-node cluster up in $((SECONDS - t0))s: partition $PARTITION, account $ACCOUNT," \
    "state in $STATE"
}

stop_pid() {  # stop_pid NAME PIDFILE: SIGTERM, then SIGKILL after 20 s
  local name=$1 pidfile=$2 pid
  [[ -s $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (PID $pid) ignored SIGTERM: killed"
      kill -9 "$pid"
    fi
  fi
  rm -f "$pidfile"
}

stop() {
  [[ -d $STATE ]] || { log "nothing to stop ($STATE does not exist)"; return 0; }
  stop_pid slurmd "$STATE/slurmd.pid"
  stop_pid slurmctld "$STATE/slurmctld.pid"
  stop_pid slurmdbd "$STATE/slurmdbd.pid"
  stop_pid mariadbd "$STATE/mysql/mariadbd.pid"
  stop_pid munged "$STATE/munge/munged.pid"
  for f in "$CONF" "$DBD_CONF"; do
    if [[ -e $f ]] && grep -qF "$MARK" "$f"; then rm -f "$f"; fi
  done
  log "stopped (logs kept in $STATE/log)"
}

case "${1:-}" in
  install) install_packages ;;
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 install|start|stop" ;;
esac
