# bench/tools.sh: what the standalone tools (due_stream.sh, waiters.sh)
# share: a cluster of their own with the benchmark's settings, and the CPU
# time of its processes.  Sourced; the caller sets ROOT, DIR and PORT, and
# PGBIN if not the default (and EXTRA_CONF, a line of postgresql.conf).

WANT_PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
source "$ROOT/test/lib.sh"
PGBIN=$WANT_PGBIN
TMP=$(mktemp -d)
trap 'queue_cluster_stop "$DIR"; rm -rf "$TMP"' EXIT
queue_cluster_start "$DIR" "$PORT" "fsync = on" "shared_buffers = 1GB" "max_wal_size = 8GB" \
	"checkpoint_timeout = 30min" ${EXTRA_CONF:+"$EXTRA_CONF"}
export PGDATABASE=postgres
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -c "CREATE EXTENSION queue" >/dev/null

# /proc/<pid>/stat after the command name: ppid is field 2, utime, stime,
# cutime and cstime 12 to 15
stat_of() { sed 's/^.*) //' "/proc/$1/stat"; }
ticks() { stat_of "$1" | awk '{print $12 + $13}'; }

# The queue's background worker in this database, once it has started.
worker_pid() {
	local pid=""
	for _ in $(seq 50); do
		pid=$(q -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'queue worker' AND datname = current_database()")
		[ -n "$pid" ] && break
		sleep 0.1
	done
	[ -n "$pid" ] || { echo "queue's background worker did not start in this database" >&2; exit 1; }
	echo "$pid"
}

# CPU ticks of the server's processes: the postmaster's own and reaped
# children's, and its live children's (as bench.py's server_cpu;
# /proc/stat's totals jumped around on this VM)
server() {
	local pm
	pm=$(head -1 "$DIR/data/postmaster.pid")
	{
		stat_of "$pm" | awk '{print $12 + $13 + $14 + $15}'
		for d in /proc/[0-9]*; do
			stat_of "${d#/proc/}" 2>/dev/null | awk -v pm="$pm" '$2 == pm {print $12 + $13}' || true
		done
	} | awk '{t += $1} END {print t}'
}
