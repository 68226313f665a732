#!/bin/bash
# bench/before_after.sh: does a change slow anything down?  Runs bench/run.sh
# for two builds of the extension, interleaved (before, after, before,
# after, ...), each against the baseline of its own run, and writes a table
# of queue's ratios to the baseline, per run, for both builds.
#
#   bash bench/before_after.sh REV            REV against the working tree
#   bash bench/before_after.sh REV1 REV2      two commits
#
# Each build is installed into a relocated copy of the system's PostgreSQL
# (/tmp/queue_ba/<label>), so the system's stays as it is.  Environment:
#   PAIRS=2                          rounds of (before, after)
#   BENCH_ONLY=enqueue,drain         the workloads (bench/run.sh's BENCH_ONLY)
#   BENCH_SYSTEMS=queue,baseline     the systems (the baseline must be one)
#   BENCH_ENQ1_REPS=3                single-job enqueue repetitions per run
# Other bench/run.sh settings pass through.  The table goes to
# bench/results/<UTC timestamp>-before-after.md, and the runs to
# bench/results/ as usual.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//; /^set -e/d'; exit 2; }
BEFORE=$1
AFTER=${2:-}
PAIRS=${PAIRS:-2}
export BENCH_ONLY=${BENCH_ONLY:-enqueue,drain}
export BENCH_SYSTEMS=${BENCH_SYSTEMS:-queue,baseline}
export BENCH_ENQ1_REPS=${BENCH_ENQ1_REPS:-3}
WORK=/tmp/queue_ba
STAMP=$(date -u +%Y%m%dT%H%M%SZ)

# install LABEL REV: the build of REV (empty: the working tree) into its own tree
install_build() {
	local label=$1 rev=$2 tree=$WORK/$1 src=$WORK/$1.src
	rm -rf "$tree" "$src"
	mkdir -p "$tree/usr/lib/postgresql" "$tree/usr/share/postgresql" "$tree/usr/include" "$src"
	cp -a /usr/lib/postgresql/15 "$tree/usr/lib/postgresql/"
	cp -a /usr/share/postgresql/15 "$tree/usr/share/postgresql/"
	cp -a /usr/include/postgresql "$tree/usr/include/"
	if [ -n "$rev" ]; then
		git -C "$ROOT" archive "$rev" | tar -x -C "$src"
	else
		(cd "$ROOT" && git ls-files -co --exclude-standard | tar -c -T - | tar -x -C "$src")
	fi
	make -C "$src" -s PG_CONFIG="$tree/usr/lib/postgresql/15/bin/pg_config" >/dev/null
	make -C "$src" -s PG_CONFIG="$tree/usr/lib/postgresql/15/bin/pg_config" install >/dev/null
	if [ -n "$rev" ]; then
		git -C "$ROOT" rev-parse --short "$rev"
	else
		echo "$(git -C "$ROOT" rev-parse --short HEAD) and the working tree"
	fi
}

# shellcheck source=../test/lib.sh
source "$ROOT/test/lib.sh"
queue_install_deps
before_desc=$(install_build before "$BEFORE")
after_desc=$(install_build after "$AFTER")

runs=()
for ((p = 1; p <= PAIRS; p++)); do
	for label in before after; do
		echo "== round $p: $label" >&2
		latest=$(ls -d "$HERE"/results/*/ 2>/dev/null | sort | tail -1)
		QUEUE_SKIP_BUILD=1 PGBIN=$WORK/$label/usr/lib/postgresql/15/bin bash "$HERE/run.sh"
		new=$(ls -d "$HERE"/results/*/ | sort | tail -1)
		[ "$new" != "$latest" ] || { echo "bench/run.sh wrote no run" >&2; exit 1; }
		runs+=("$label=$(basename "$new")")
	done
done

/usr/bin/python3 "$HERE/before_after.py" "$HERE/results" "$before_desc" "$after_desc" "${runs[@]}" \
	>"$HERE/results/$STAMP-before-after.md"
echo "== $HERE/results/$STAMP-before-after.md" >&2
