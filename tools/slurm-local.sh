#!/usr/bin/env bash
# A real single-node Slurm cluster (Debian's slurm-wlm + munge) on this machine, for `repro matrix
# run --backend slurm` in CI and on a developer's box. Needs root.
#
#   tools/slurm-local.sh start DIR     start munged, slurmctld and slurmd with everything under DIR;
#                                      prints `export SLURM_CONF=DIR/slurm.conf` (eval it)
#   tools/slurm-local.sh stop DIR      stop the daemons it started, by the pids in DIR
#   tools/slurm-local.sh install       apt-get install slurm-wlm munge (when missing)
#
# Only what `start` started is stopped: each daemon's pid is kept in DIR/*.pid. A munged that was
# already running is used and left alone. No accounting daemon (slurmdbd): sacct does not work, and
# `repro matrix` falls back to squeue and scontrol.
set -euo pipefail

log() { printf '[slurm-local] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

install() {
    local need=()
    command -v slurmctld >/dev/null || need+=(slurm-wlm)
    command -v munged >/dev/null || need+=(munge)
    [ ${#need[@]} -eq 0 ] && return
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

start() {
    local dir=$1 host cpus mem
    [ "$(id -u)" = 0 ] || die "needs root (slurmd runs jobs as their users; munged needs its key owned by munge)"
    command -v slurmctld >/dev/null && command -v munged >/dev/null || die "slurm-wlm and munge are not installed; run: $0 install"
    mkdir -p "$dir"/{state,spool,munge}
    dir=$(cd "$dir" && pwd)
    host=$(hostname -s)
    cpus=$(nproc)
    # Slurm refuses a node that claims more memory than it has; half of it leaves room for the rest.
    mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)

    # munge: the daemon every Slurm message is signed by. One already answering is used as it is.
    if munge -n </dev/null >/dev/null 2>&1; then
        log "using the munged that is already running"
    else
        [ -s /etc/munge/munge.key ] || { mkdir -p /etc/munge; dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none; }
        chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
        mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
        # --foreground under our own & so that $! is munged's pid, which `stop` kills.
        setsid runuser -u munge -- munged --foreground --force >"$dir/munged.log" 2>&1 &
        echo $! >"$dir/munged.pid"
        for _ in $(seq 40); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.25; done
        munge -n </dev/null >/dev/null 2>&1 || { tail "$dir/munged.log" >&2; die "munged did not start"; }
    fi

    # Addresses are 127.0.0.1: a CI machine's own name need not resolve.
    cat >"$dir/slurm.conf" <<EOF
ClusterName=gpurepro
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/munge
SlurmUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
MaxArraySize=10001
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    # -D: stay in the foreground, so the pid we record is the daemon's.
    setsid slurmctld -D -f "$dir/slurm.conf" >>"$dir/slurmctld.out" 2>&1 &
    echo $! >"$dir/slurmctld.run.pid"
    setsid slurmd -D -f "$dir/slurm.conf" >>"$dir/slurmd.out" 2>&1 &
    echo $! >"$dir/slurmd.run.pid"
    export SLURM_CONF=$dir/slurm.conf
    for _ in $(seq 120); do
        if sinfo -h -o '%t' 2>/dev/null | grep -qx 'idle'; then
            log "node $host idle ($cpus CPUs); SLURM_CONF=$SLURM_CONF"
            echo "export SLURM_CONF=$SLURM_CONF"
            return
        fi
        sleep 0.5
    done
    tail -5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
    die "the node did not become idle within 60 s"
}

stop() {
    local dir=$1 name pid
    for name in slurmd.run slurmctld.run munged; do
        [ -s "$dir/$name.pid" ] || continue
        pid=$(cat "$dir/$name.pid")
        if kill "$pid" 2>/dev/null; then
            for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
            log "stopped ${name%.run} (pid $pid)"
        fi
        rm -f "$dir/$name.pid"
    done
}

case "${1:-}" in
    start) [ $# -eq 2 ] || die "usage: $0 start DIR"; start "$2" ;;
    stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
    install) install ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
esac
