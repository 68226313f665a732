# test/t/004_standby.pl: the background worker on a standby and after promotion.
#
# A streaming standby of a primary that preloads queue runs no queue
# launcher or worker (and its queues can be read, not claimed from).  Jobs
# scheduled on the primary that come due while the standby is still in
# recovery stay scheduled there; once it is promoted a launcher and a worker
# appear within seconds, promote the overdue job at once, and promote and
# announce (NOTIFY) the jobs that come due later on time.  Batch leases
# (src/lease.c) live in shared memory, which replay does not update: a
# standby must not load them, and a promoted one loads them afresh.

use strict;
use warnings;

use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueTest;

# ---------------------------------------------------------------- helpers

my $workers_sql = q{SELECT count(*) FROM pg_stat_activity
	WHERE backend_type IN ('queue launcher', 'queue worker')};
my $app_worker_sql = q{SELECT count(*) FROM pg_stat_activity
	WHERE backend_type = 'queue worker' AND datname = 'app'};

# ---------------------------------------------------------------- setup

ok(system('python3', '-c', 'import psycopg2') == 0,
	'python3 with psycopg2 is available for the LISTEN session')
  or die 'python3 -c "import psycopg2" failed: install python3-psycopg2';

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'queue'
log_line_prefix = '%m [%p] [%b] %q%a '
});
$primary->start;
$primary->safe_psql('postgres', 'CREATE DATABASE app');
$primary->safe_psql('app', q{CREATE EXTENSION queue; SELECT queue.create('s')});
ok(defined poll_for($primary, 'postgres', $app_worker_sql, '1', 5),
	'the primary runs a worker for app');

$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;

# Two jobs scheduled on the primary: one comes due while the standby is
# still in recovery, the other after it has been promoted.
my ($overdue, $later) = split /\n/, $primary->safe_psql(
	'app', q{
SELECT queue.enqueue('s', '{"j": "overdue"}', run_at => clock_timestamp() + interval '2.5 s');
SELECT queue.enqueue('s', '{"j": "later"}', run_at => clock_timestamp() + interval '5 s');
});
my ($overdue_at, $later_at) = split /\n/, $primary->safe_psql('app',
	"SELECT extract(epoch FROM run_at) FROM queue._job WHERE id IN ($overdue, $later) ORDER BY id");

# Batch leases: s1 leases 3 jobs and the standby looks at them (queue.stats
# asks shared memory about leases); s1 leaves, so that the primary's worker
# returns them; s2 then leases the 3 others and is still connected when the
# primary stops.
$primary->safe_psql('app', q{SELECT queue.create('b', lease => '1 hour');
	SELECT count(queue.enqueue('b', jsonb_build_object('n', i))) FROM generate_series(1, 6) i});
my $s1 = QueueTestSession->new($primary, 'app', 'lease_s1');
is($s1->query(q{SELECT count(*) FROM queue.claim('b', 3)}), '3', 's1 takes a batch lease on 3 jobs');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('app', q{SELECT running, ready FROM queue.stats WHERE queue = 'b'}),
	'3|3', 'the standby sees them running');
$s1->close;
ok( defined poll_for($primary, 'app',
		q{SELECT count(*) FROM queue.jobs WHERE queue = 'b' AND state = 'ready' AND attempt = 1}, '3', 10),
	'the primary returns them once s1 has gone');
my $s2 = QueueTestSession->new($primary, 'app', 'lease_s2');
is($s2->query(q{SELECT string_agg(attempt::text, ',') FROM queue.claim('b', 3)}),
	'1,1,1', 's2 takes a batch lease on the 3 others');
$primary->wait_for_catchup($standby);
settle($primary, $s2->{pid});
$primary->stop;
# (the primary's worker would have promoted the job had it been running then)
my $stopped_in_time = time < $overdue_at - 0.1;
ok($stopped_in_time, 'the primary stopped before the first job came due')
  or diag(sprintf('stopped %.3f s after run_at: the machine is too slow for this test',
	time - $overdue_at));

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery');
is($standby->safe_psql('app', q{SELECT count(*) FROM queue.jobs WHERE queue = 's'}),
	'2', 'the standby has the jobs');
my ($ret, $out, $err) = $standby->psql('app', q{SELECT * FROM queue.claim('s')});
like($err, qr/read-only transaction/, 'a claim on the standby fails as read-only');

# wait until the first job is overdue; nothing may run on the standby
poll_for($standby, 'app',
	"SELECT run_at < clock_timestamp() - interval '300 ms' FROM queue._job WHERE id = $overdue",
	't', 5);
is($standby->safe_psql('postgres', $workers_sql),
	'0', 'no queue launcher or worker runs on the standby');
SKIP:
{
	skip 'the primary may have promoted the job itself', 1 unless $stopped_in_time;
	is($standby->safe_psql('app', "SELECT state FROM queue._job WHERE id = $overdue"),
		'scheduled', 'the overdue job is still scheduled on the standby');
}

# ---------------------------------------------------------------- promote

$standby->promote;
my $t_promoted = time;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	'f', 'the standby is promoted');
my $listen = listener_start($standby, 'app', 'queue_s');

my $took = poll_for($standby, 'postgres', $app_worker_sql, '1', 10);
ok(defined $took && time - $t_promoted < 5,
	'after promotion a worker serves app within 5 s');
note sprintf('worker running %.3f s after promotion', time - $t_promoted);
is( $standby->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue launcher'}),
	'1', 'and a launcher runs');

$took = poll_for($standby, 'app', "SELECT state FROM queue._job WHERE id = $overdue", 'ready', 10);
ok(defined $took && time - $t_promoted < 5,
	'the job that came due during recovery is made ready after promotion');
note sprintf('overdue job ready %.3f s after promotion', time - $t_promoted);

my $notified = listener_wait($listen, 'queue_s', 8);
# the first notification may be the overdue job's; wait for the later one
$notified = listener_wait($listen, 'queue_s', 8)
  if defined $notified && $notified < $later_at;
ok(defined $notified, 'the job scheduled for after the promotion is notified');
$notified //= 0;
ok( $notified >= $later_at && $notified - $later_at <= 0.2,
	'on time: after run_at and within 200 ms of it');
note sprintf('later job: notification %.1f ms after run_at', ($notified - $later_at) * 1000);
is($standby->safe_psql('app', "SELECT state FROM queue._job WHERE id = $later"),
	'ready', 'and it is ready');

# a job scheduled on the promoted node
my $new = $standby->safe_psql('app',
	q{SELECT queue.enqueue('s', '{"j": "new"}', run_at => clock_timestamp() + interval '1 s')});
my $new_at = $standby->safe_psql('app',
	"SELECT extract(epoch FROM run_at) FROM queue._job WHERE id = $new");
$notified = listener_wait($listen, 'queue_s', 5) // 0;
ok( $notified >= $new_at && $notified - $new_at <= 0.2,
	'a job scheduled on the promoted node is notified on time');
note sprintf('new job: notification %.1f ms after run_at', ($notified - $new_at) * 1000);
is( $standby->safe_psql('app',
		q{SELECT string_agg(payload->>'j', ',' ORDER BY id) FROM queue.claim('s', 10)}),
	'overdue,later,new', 'all three jobs are claimable on the promoted node');

# s2's lease outlived its claimer: the worker returns its jobs; s1's jobs,
# returned before, were never the standby's to hold on to
ok( defined poll_for($standby, 'app',
		q{SELECT count(*) FROM queue.jobs WHERE queue = 'b' AND state = 'ready'}, '6', 10),
	'after promotion all 6 batch jobs are ready');
is( $standby->safe_psql('app',
		q{SELECT string_agg(attempt::text, ',') FROM queue.claim('b', 10)}),
	'2,2,2,2,2,2', 'and claimable, each at its second attempt');

listener_stop($listen);
settle($standby);
$standby->stop;

# ---------------------------------------------------------------- logs

for my $n ($primary, $standby)
{
	my $name = $n->name;
	my @lines = split /\n/, slurp_file($n->logfile);
	is( join("\n", grep { /\[queue (?:worker|launcher)\].*\b(?:WARNING|ERROR|FATAL|PANIC):/ } @lines),
		'', "$name: no WARNING, ERROR or FATAL from a queue worker or launcher");
	is( join("\n", grep { /background worker "queue [a-z]+" \(PID \d+\) (?:exited with exit code [1-9]|was terminated by signal)/ } @lines),
		'', "$name: no queue worker or launcher exited abnormally");
	is(join("\n", grep { /PANIC|TRAP:|was terminated by signal/ } @lines),
		'', "$name: no PANIC, TRAP or crash");
	# (the standby's walreceiver complains when the primary goes away, and
	# is terminated at promotion; s2 is terminated with the primary)
	is(join("\n",
			grep { /\bFATAL:/ && !/\[walreceiver\] FATAL:  / && !/ lease_s2 FATAL:  / && !autovacuum_ended($_) }
			  @lines),
		'', "$name: no FATAL but the walreceiver's");
}

done_testing();
