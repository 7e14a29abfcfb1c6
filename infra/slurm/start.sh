#!/usr/bin/env bash
# A one-node Slurm cluster on loopback for the integration tests (and for trying the collector):
# munged, MariaDB, slurmdbd, slurmctld and one slurmd with 8 typed GPUs (gpu:h100, File= on plain
# files, AutoDetect=off), accounting on, JobRequeue=1, and the prolog/epilog that write the
# dcgm-exporter job mapping; with Debian's slurmrestd installed, slurmrestd on a unix socket
# ($D/run/slurmrestd.sock, local authentication by the caller's uid). Everything lives under
# $SLURM_DIR (default .gpuledger/slurm); the daemons run as the calling user on their own ports. Idempotent: a running cluster is left as is.
# Prints `export SLURM_CONF=…` and the versions found. Stop with infra/slurm/stop.sh.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
D="${SLURM_DIR:-$ROOT/.gpuledger/slurm}"
mkdir -p "$D"
D="$(cd "$D" && pwd)"
CLUSTER="${SLURM_CLUSTER:-gpuledger-it}"
NODE="${SLURM_NODE:-gpusim01}"
CTLD_PORT="${SLURM_CTLD_PORT:-16817}"
SLURMD_PORT="${SLURM_SLURMD_PORT:-16818}"
DBD_PORT="${SLURM_DBD_PORT:-16819}"
DB_PORT="${SLURM_DB_PORT:-13307}"
ME="$(id -un)"

for tool in munged slurmctld slurmd slurmdbd mariadbd mariadb-install-db; do
  command -v "$tool" >/dev/null || { echo "slurm: $tool not found (scripts/setup-tests.sh installs slurm-wlm, slurmdbd, munge, mariadb-server)" >&2; exit 1; }
done

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_for() {  # wait_for <what> <seconds> <command…>
  local what="$1" limit="$2"; shift 2
  for _ in $(seq 1 $((limit * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "slurm: $what did not come up; see $D/*.log" >&2; exit 1
}

mkdir -p "$D/state" "$D/spool" "$D/log" "$D/dev" "$D/run" "$D/job-mapping"
chmod 700 "$D/run"
for i in 0 1 2 3 4 5 6 7; do [ -e "$D/dev/nvidia$i" ] || : > "$D/dev/nvidia$i"; done

# --- munge ---------------------------------------------------------------------------------------
# Slurm 22.05 reaches munged for its slurmdbd connections only at the default socket, whatever
# AuthInfo says: use a munged already serving there, or start one there with this cluster's key.
SOCK=/run/munge/munge.socket.2
if ! munge -n -S "$SOCK" >/dev/null 2>&1; then
  mkdir -p /run/munge
  if [ ! -f "$D/run/munge.key" ]; then
    mungekey --create --keyfile "$D/run/munge.key" --force >/dev/null
    chmod 600 "$D/run/munge.key"
  fi
  rm -f "$SOCK" "$SOCK.lock"
  munged --force --key-file "$D/run/munge.key" --socket "$SOCK" --pid-file "$D/run/munged.pid" \
         --log-file "$D/log/munged.log" --seed-file "$D/run/munge.seed" --num-threads=10
fi
wait_for munged 10 munge -n -S "$SOCK"

# --- MariaDB for slurmdbd ------------------------------------------------------------------------
if [ ! -d "$D/mysql/mysql" ]; then
  mariadb-install-db --no-defaults --datadir="$D/mysql" --user="$ME" --auth-root-authentication-method=socket \
                     --skip-test-db >"$D/log/mariadb-install.log" 2>&1
fi
if ! alive "$D/run/mariadb.pid"; then
  mariadbd --no-defaults --datadir="$D/mysql" --socket="$D/run/mysql.sock" --port="$DB_PORT" \
           --bind-address=127.0.0.1 --pid-file="$D/run/mariadb.pid" --user="$ME" \
           --innodb-buffer-pool-size=64M --log-error="$D/log/mariadb.log" >/dev/null 2>&1 &
  disown
fi
wait_for MariaDB 30 mariadb --no-defaults --socket="$D/run/mysql.sock" -uroot -e "SELECT 1"
mariadb --no-defaults --socket="$D/run/mysql.sock" -uroot -e \
  "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm-it';
   GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"

# --- configuration -------------------------------------------------------------------------------
CPUS="$(nproc)"
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
cat > "$D/slurm.conf" <<CONF
ClusterName=$CLUSTER
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=$ME
SlurmdUser=$ME
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStorageTRES=gres/gpu,gres/gpu:h100
AccountingStorageEnforce=associations
JobCompType=jobcomp/none
JobRequeue=1
ReturnToService=2
MinJobAge=3600
Prolog=$D/prolog
Epilog=$D/epilog
PrologFlags=Alloc
NodeName=$NODE NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:h100:8 State=UNKNOWN
PartitionName=gpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
cat > "$D/gres.conf" <<CONF
AutoDetect=off
NodeName=$NODE Name=gpu Type=h100 File=$D/dev/nvidia[0-7]
CONF
cat > "$D/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=$ME
LogFile=$D/log/slurmdbd.log
PidFile=$D/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm-it
StorageLoc=slurm_acct_db
CONF
chmod 600 "$D/slurmdbd.conf"
for hook in prolog epilog; do
  printf '#!/bin/sh\nDCGM_JOB_MAP_DIR=%s exec %s "$@"\n' "$D/job-mapping" "$HERE/$hook.sh" > "$D/$hook"
  chmod 755 "$D/$hook"
done
cat > "$D/env.sh" <<CONF
export SLURM_CONF=$D/slurm.conf
export GPULEDGER_JOB_MAPPING_DIR=$D/job-mapping
CONF
export SLURM_CONF="$D/slurm.conf" GPULEDGER_JOB_MAPPING_DIR="$D/job-mapping"

# --- daemons -------------------------------------------------------------------------------------
if ! alive "$D/run/slurmdbd.pid"; then slurmdbd; fi  # reads slurmdbd.conf beside $SLURM_CONF
wait_for slurmdbd 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$DBD_PORT"
if ! sacctmgr -n -P list cluster format=cluster | grep -qw "$CLUSTER"; then
  sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi
for acct in llm vision; do
  sacctmgr -n -P list account "$acct" format=account | grep -qw "$acct" || sacctmgr -i add account "$acct" >/dev/null
  sacctmgr -n -P list association user="$ME" account="$acct" format=account | grep -qw "$acct" \
    || sacctmgr -i add user "$ME" account="$acct" >/dev/null
done
if ! alive "$D/run/slurmctld.pid"; then slurmctld -f "$D/slurm.conf"; fi
wait_for slurmctld 30 scontrol ping
if ! alive "$D/run/slurmd-$NODE.pid"; then slurmd -f "$D/slurm.conf" -N "$NODE"; fi
wait_for slurmd 30 bash -c "sinfo -h -n $NODE -o %t | grep -qE '^(idle|mix|alloc)'"
# --- slurmrestd (when installed): the REST API on a unix socket, local (peer uid) authentication --
if command -v slurmrestd >/dev/null && ! alive "$D/run/slurmrestd.pid"; then
  rm -f "$D/run/slurmrestd.sock"
  # it refuses to run as root unless told: a test cluster run by root says so
  SLURMRESTD_SECURITY="$([ "$(id -u)" = 0 ] && echo disable_user_check)" \
    slurmrestd -f "$D/slurm.conf" -a rest_auth/local "unix:$D/run/slurmrestd.sock" >"$D/log/slurmrestd.log" 2>&1 &
  echo $! > "$D/run/slurmrestd.pid"
  disown
fi
if command -v slurmrestd >/dev/null; then
  wait_for slurmrestd 30 curl -sf --unix-socket "$D/run/slurmrestd.sock" http://localhost/openapi/v3
  echo "export SLURMRESTD_SOCKET=$D/run/slurmrestd.sock"
fi
echo "export SLURM_CONF=$D/slurm.conf"
echo "slurm: $(slurmctld -V), $(munged --version 2>&1 | head -1), $(mariadbd --version | awk '{print $1, $2, $3}')"
