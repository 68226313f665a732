# test/t/005_batch_lease.pl: batch leases (src/lease.c) across a crash.
#
# A claim of several jobs in a transaction of its own leaves their rows
# 'ready' and writes one lease row; shared memory is what keeps other
# claims off them.  After a crash shared memory is empty: the first claim
# on the queue must load the leases from their rows before it takes
# anything, and the leased jobs stay running (and completable with their
# token) until upkeep returns them as orphans, their lost attempt
# counted.  The worker is kept from starting (no free background worker
# slot), so that only the load stands between a claim and the leased
# jobs.  Also: queue.max_leased_jobs = 0 turns batch leases off.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use QueueTest;

my $node = PostgreSQL::Test::Cluster->new('lease');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'");
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION queue;
SELECT queue.create('bl', lease => '1 hour', max_attempts => 3);
SELECT count(queue.enqueue('bl', jsonb_build_object('n', i))) FROM generate_series(1, 10) i;
});

my $holder = QueueTestSession->new($node, 'postgres', 'lease_holder');
my $leased = $holder->query(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.claim('bl', 4)});
my @leased = split /,/, $leased;
is(scalar(@leased), 4, 'a session claims 4 jobs (autocommit)');
is( $node->safe_psql('postgres', q{SELECT count(*), sum(cardinality(ids)) FROM queue.l_bl}),
	'1|4', 'under one batch lease');
is( $node->safe_psql('postgres',
		qq{SELECT count(*) FROM queue.q_bl WHERE state = 'ready' AND id IN ($leased)}),
	'4', 'their rows are left ready');

# Crash, and come back without a worker: the launcher takes the only
# background worker slot.
$node->stop('immediate');
$holder->close;
$node->append_conf('postgresql.conf',
	"max_worker_processes = 1\nmax_logical_replication_workers = 0\nmax_parallel_workers = 0");
$node->start;
my $mon = QueueTestSession->new($node, 'postgres', 'lease_mon');
ok( defined poll_for(
		$mon, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue launcher'}, '1', 10),
	'the launcher runs');
$mon->close;
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker'}),
	'0', 'but no queue worker');

my $consumer = QueueTestSession->new($node, 'postgres', 'lease_consumer');
my $rest = $consumer->query(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.claim('bl', 100)});
my %is_leased = map { $_ => 1 } @leased;
is(scalar(grep { $is_leased{$_} } split /,/, $rest), 0,
	'after the crash a claim does not take the leased jobs');
is(scalar(split /,/, $rest), 6, 'it takes the 6 others');
is( $node->safe_psql('postgres',
		qq{SELECT state, attempt, count(*) FROM queue.jobs WHERE id IN ($leased) GROUP BY 1, 2}),
	'running|1|4', 'the leased jobs are running, at attempt 1');
is($consumer->query(qq{SELECT queue.complete($leased[0], 1)}),
	't', 'a leased job can still be completed with its token');
is($consumer->query(qq{SELECT count(*) FROM queue.claim('bl', 100)}),
	'0', 'nothing more to claim');

# Upkeep by hand: the lease's claimer is gone, so its jobs are orphans.
$node->safe_psql('postgres', q{SELECT queue.tick()});
my $returned = join(',', @leased[ 1 .. 3 ]);
is( $node->safe_psql('postgres',
		qq{SELECT state, attempt, last_error, count(*) FROM queue.jobs WHERE id IN ($returned) GROUP BY 1, 2, 3}),
	'ready|1|consumer disconnected|3', 'tick() returns the other 3, their attempt counted');
is( $node->safe_psql('postgres', qq{SELECT count(*) FROM queue.l_bl WHERE ids && '{$returned}'::bigint[]}),
	'0', 'and ends the lease');
is( $consumer->query(q{SELECT string_agg(attempt::text, ',') FROM queue.claim('bl', 100)}),
	'2,2,2', 'they are claimable again, at attempt 2');
is( $node->safe_psql('postgres', qq{SELECT event, attempt FROM queue.history($leased[1])}),
	"enqueued|0\nclaimed|1\nconsumer disconnected|1\nclaimed|2",
	'history of a returned job');
is( $node->safe_psql('postgres', qq{SELECT state, attempt FROM queue.archive WHERE id = $leased[0]}),
	'done|1', 'the job completed after the crash is archived at attempt 1');
$consumer->close;

# With the worker back: DROP EXTENSION takes what shared memory knew of
# the database's leases along, so that queues made again, or restored
# from a dump, whose jobs have the same ids are not held by leases of the
# dropped ones.
$node->append_conf('postgresql.conf', "max_worker_processes = 8");
$node->restart;
$node->safe_psql('postgres', 'CREATE DATABASE dx');
my $fill = q{SELECT string_agg(queue.enqueue('dx', jsonb_build_object('n', i))::text, ',' ORDER BY i)
	FROM generate_series(1, 3) i};
$node->safe_psql('dx', q{CREATE EXTENSION queue; SELECT queue.create('dx', lease => '1 hour')});
my $dx_ids = $node->safe_psql('dx', $fill);
my $dump = PostgreSQL::Test::Utils::tempdir . '/dx.sql';
$node->command_ok([ 'pg_dump', '-d', $node->connstr('dx'), '-f', $dump ], 'dx dumped');
my $dx_holder = QueueTestSession->new($node, 'dx', 'dx_holder');
is($dx_holder->query(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.claim('dx', 3)}),
	$dx_ids, 'then a session takes a batch lease on the 3 jobs of queue dx');
$node->safe_psql('dx', q{DROP EXTENSION queue CASCADE; DROP SCHEMA queue});
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('dx'), '-f', $dump ],
	'the extension dropped and the dump restored');
is($node->safe_psql('dx', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.claim('dx', 10)}),
	$dx_ids, 'the restored jobs, with the ids of the leased ones, are claimable');
$dx_holder->query(q{SELECT count(*) FROM queue.claim('dx', 3)});
$node->safe_psql('dx', q{DROP EXTENSION queue CASCADE; CREATE EXTENSION queue; SELECT queue.create('dx')});
is($node->safe_psql('dx', $fill), $dx_ids, 'dropped and made again, the queue\'s new jobs have the same ids');
is($node->safe_psql('dx', q{SELECT count(*) FROM queue.claim('dx', 10)}),
	'3', 'and they are claimable');
$dx_holder->close;

# A consumer that finishes one job of a batch in a transaction it keeps
# open past the lease holds up neither the worker nor the lease's other
# jobs: the worker returns what it can and keeps the job being finished
# under the lease until the consumer is done.
$node->safe_psql('postgres', q{SELECT queue.create('st1'); SELECT queue.create('st2');
	SELECT count(queue.enqueue('st1', jsonb_build_object('n', i))) FROM generate_series(1, 2) i;
	SELECT queue.enqueue('st2', '{}')});
my $slow = QueueTestSession->new($node, 'postgres', 'slow_consumer');
my ($x1, $x2) = split /,/, $slow->query(
	q{SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.claim('st1', 2, lease => '500 ms')});
is($slow->query(qq{BEGIN; SELECT queue.complete($x1, 1)}), 't', 'the consumer completes one job, and keeps its transaction open');
my $other = QueueTestSession->new($node, 'postgres', 'other_consumer');
is($other->query(q{SELECT count(*) FROM queue.claim('st2', 5, lease => '500 ms')}), '1',
	'another consumer takes a batch lease on another queue');
my $st_mon = QueueTestSession->new($node, 'postgres', 'st_mon');
ok( defined poll_for($st_mon,
		q{SELECT count(*) FROM queue.jobs WHERE queue = 'st2' AND state = 'ready' AND last_error = 'lease expired'},
		'1', 10),
	'the other lease is returned when it runs out');
is( $node->safe_psql('postgres', qq{SELECT state, attempt, last_error FROM queue.jobs WHERE id = $x2}),
	'ready|1|lease expired', 'so is the job of the first lease nobody is finishing');
is($node->safe_psql('postgres', qq{SELECT state FROM queue.jobs WHERE id = $x1}),
	'running', 'the job being completed stays under the lease');
is($slow->query('COMMIT'), '', 'the consumer commits');
is($node->safe_psql('postgres', qq{SELECT state, attempt FROM queue.archive WHERE id = $x1}),
	'done|1', 'its job is done');
ok(defined poll_for($st_mon, q{SELECT count(*) FROM queue.l_st1}, '0', 10),
	'and the lease row goes at the worker\'s next pass');
$slow->close;
$other->close;
$st_mon->close;

# queue.max_leased_jobs = 0: claims mark each job running.
$node->append_conf('postgresql.conf', "queue.max_leased_jobs = 0");
$node->restart;
$node->safe_psql('postgres', q{SELECT queue.create('bm', lease => '1 hour');
	SELECT count(queue.enqueue('bm', jsonb_build_object('m', i))) FROM generate_series(1, 3) i});
$consumer = QueueTestSession->new($node, 'postgres', 'lease_consumer2');
is($consumer->query(q{SELECT count(*) FROM queue.claim('bm', 3)}), '3', 'with batch leases off, 3 jobs claimed');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queue.q_bm WHERE state = 'running'}),
	'3', 'their rows are running');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queue.l_bm}), '0', 'and no lease was written');
$consumer->close;

settle($node);
$node->stop;
done_testing();
