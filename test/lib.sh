# test/lib.sh: shared by test/run, examples/demo.sh and bench: installs what
# the extension needs from Debian, builds and installs it, and starts or
# stops a throwaway PostgreSQL cluster owned by the postgres OS user
# (initdb refuses root).  Source it; it defines functions only.

QUEUE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PGBIN=/usr/lib/postgresql/15/bin
DEB_PACKAGES="postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl libipc-run-perl make gcc python3-psycopg2 libpq-dev pgbouncer"

queue_install_deps() {
	local missing=""
	for p in $DEB_PACKAGES; do
		dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "== installing:$missing"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
	fi
	# Debian's package starts a cluster on 5432; ours run on their own ports.
}

queue_build() {
	echo "== building and installing the extension"
	make -C "$QUEUE_ROOT" -s clean >/dev/null
	make -C "$QUEUE_ROOT" -s PG_CONFIG=$PGBIN/pg_config >/dev/null
	make -C "$QUEUE_ROOT" -s PG_CONFIG=$PGBIN/pg_config install >/dev/null
}

# queue_cluster_start DIR PORT [extra postgresql.conf lines...]
queue_cluster_start() {
	local dir=$1 port=$2
	shift 2
	rm -rf "$dir"
	mkdir -p "$dir"
	chown postgres: "$dir"
	su postgres -c "$PGBIN/initdb -D '$dir/data' -A trust -U postgres --no-sync" >/dev/null
	cat >> "$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = 'queue'
fsync = off
max_prepared_transactions = 4
max_worker_processes = 32
log_line_prefix = '%m [%p] '
CONF
	for line in "$@"; do echo "$line" >> "$dir/data/postgresql.conf"; done
	su postgres -c "$PGBIN/pg_ctl -D '$dir/data' -l '$dir/log' -w start" >/dev/null
	export PGHOST=$dir PGPORT=$port PGUSER=postgres
}

queue_cluster_stop() {
	local dir=$1
	[ -f "$dir/data/postmaster.pid" ] && su postgres -c "$PGBIN/pg_ctl -D '$dir/data' -m fast -w stop" >/dev/null 2>&1
	true
}
