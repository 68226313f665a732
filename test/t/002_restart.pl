# test/t/002_restart.pl: queue data is durable across restarts.
#
# With ready, running (claimed and committed), scheduled, retried and dead
# jobs and an archived one, restart the server cleanly (fast) and after an
# immediate stop (crash recovery): every job is still there in the same
# state with its attempts and payload, ids keep increasing, and a claim
# transaction that was in flight is rolled back without leaving its jobs
# behind the (fresh, empty) shared claim cursor: claims still find every
# ready job.  Also: without shared_preload_libraries the extension still
# works, without the cursor.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'");
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION queue;
SELECT queue.create('work', max_attempts => 2, lease => '1 hour');
});

my %id;
sub enqueue
{
	my ($label, $args) = @_;
	$args = defined $args ? ", $args" : '';
	$id{$label} = $node->safe_psql('postgres',
		qq{SELECT queue.enqueue('work', '{"job": "$label", "text": "h\\u00e9llo \\u2603", "nested": {"a": [1, 2.5, null, true]}}'$args)}
	);
	return $id{$label};
}

# running: claimed and committed
enqueue('running');
is($node->safe_psql('postgres', q{SELECT id FROM queue.claim('work')}),
	$id{running}, 'running job claimed');

# dead: two failed attempts
enqueue('dead');
for my $attempt (1 .. 2)
{
	is( $node->safe_psql(
			'postgres', qq{
SELECT id FROM queue.claim('work');
SELECT queue.fail($id{dead}, 'attempt $attempt failed', retry_in => '0');
}),
		"$id{dead}\n" . ($attempt == 1 ? 'retry' : 'dead'),
		"dead job: attempt $attempt");
}

# done (archived) and retried once (ready with attempt 1)
enqueue('done');
enqueue('retried');
is( $node->safe_psql(
		'postgres', qq{
SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.claim('work', 2);
SELECT queue.complete($id{done});
SELECT queue.fail($id{retried}, 'try again', retry_in => '0');
}),
	"$id{done},$id{retried}\nt\nretry",
	'one job completed, one failed for a retry');

enqueue('scheduled', q{run_at => now() + interval '1 hour'});
enqueue('grouped',   q{group_key => 'g', dedup_key => 'k', priority => 3});
enqueue('urgent',    'priority => 9');
my @batch = split /\n/,
  $node->safe_psql('postgres',
	q{SELECT queue.enqueue_batch('work', array_agg(jsonb_build_object('n', i, 'pad', repeat('x', i * 100)))) FROM generate_series(1, 20) i}
  );
is(scalar(@batch), 20, 'batch of 20 enqueued');

my $snapshot_sql = q{
SELECT queue, id, state, attempt, max_attempts, priority, payload, run_at,
       group_key, dedup_key, enqueued_at, claimed_at, lease_until, last_error
  FROM queue.jobs ORDER BY id;
SELECT * FROM queue._job ORDER BY id;
SELECT * FROM queue.archive ORDER BY id;
SELECT * FROM queue.queues;
SELECT j.id, h.* FROM (SELECT id FROM queue.jobs UNION ALL SELECT id FROM queue.archive) j,
       queue.history(j.id) h ORDER BY j.id, h.at, h.event, h.attempt;
};
my $states_sql =
  q{SELECT state, count(*), sum(attempt) FROM queue.jobs GROUP BY state ORDER BY state};

is( $node->safe_psql('postgres', $states_sql),
	"dead|1|2\nready|23|1\nrunning|1|1\nscheduled|1|0",
	'states before restarting');

# The order claims must take the ready jobs in: priority, then rank.
my $order_sql =
  q{SELECT string_agg(id::text, ',' ORDER BY priority DESC, rank) FROM queue._job WHERE state = 'ready'};

sub max_id
{
	return $node->safe_psql('postgres',
		'SELECT max(id) FROM (SELECT id FROM queue._job UNION ALL SELECT id FROM queue._archive) x'
	);
}

# Restart the node in the given way while a claim transaction is in flight;
# everything committed must be back as it was, and the claim undone.
sub restart_check
{
	my ($how, $restart) = @_;

	my $before = $node->safe_psql('postgres', $snapshot_sql);
	my $order = $node->safe_psql('postgres', $order_sql);
	my $max = max_id();

	# in flight: claims the first three ready jobs, moving the shared
	# cursor past them, and an enqueue; neither commits
	my $bg = $node->background_psql('postgres', on_error_stop => 0);
	my $inflight = $bg->query_safe(
		q{BEGIN; SELECT string_agg(id::text, ',') FROM queue.claim('work', 3);});
	my @front = (split /,/, $order)[ 0 .. 2 ];
	is($inflight, join(',', @front),
		"$how: in-flight claim took the first three ready jobs");
	$bg->query_safe(q{SELECT queue.enqueue('work', '{"uncommitted": true}')});

	$restart->();
	eval { $bg->quit; };

	is($node->safe_psql('postgres', $snapshot_sql),
		$before, "$how: every job, archived job and history is intact");
	is($node->safe_psql('postgres', $order_sql),
		$order, "$how: ready jobs keep their claim order");
	is( $node->safe_psql('postgres',
			q{SELECT count(*) FROM queue.jobs WHERE payload ? 'uncommitted'}),
		'0', "$how: the uncommitted enqueue is gone");

	# ids keep increasing
	my $new = $node->safe_psql('postgres',
		qq{SELECT queue.enqueue('work', '{"after": "$how"}')});
	ok($new > $max, "$how: new id $new is above every old id ($max)");
	is($new % 1000000, $max % 1000000, "$how: new id carries the queue number");
	return;
}

restart_check('fast restart', sub { $node->restart; });
is( $node->safe_psql('postgres', $states_sql),
	"dead|1|2\nready|24|1\nrunning|1|1\nscheduled|1|0",
	'states after the fast restart (one job added)');

restart_check(
	'immediate stop',
	sub {
		$node->stop('immediate');
		$node->start;
	});
is( $node->safe_psql('postgres', $states_sql),
	"dead|1|2\nready|25|1\nrunning|1|1\nscheduled|1|0",
	'states after crash recovery (one more job added)');
is( $node->safe_psql('postgres',
		qq{SELECT state, attempt, payload->>'text' = U&'h\\00e9llo \\2603', payload->'nested'
		     FROM queue.jobs WHERE id = $id{running}}),
	'running|1|t|{"a": [1, 2.5, null, true]}',
	'running job kept its attempt and payload');

# After the restart the shared cursor starts empty: claims find every ready
# job, those the crashed transaction had claimed included, in order.
my $expect = $node->safe_psql('postgres', $order_sql);
my $nready = scalar(split /,/, $expect);
is($nready, 25, '25 ready jobs');
my @claimed;
for (1 .. $nready + 1)
{
	my $got = $node->safe_psql('postgres', q{SELECT id FROM queue.claim('work')});
	last if $got eq '';
	push @claimed, $got;
}
is(scalar(@claimed), $nready, 'one claim at a time takes every ready job');
is(join(',', @claimed), $expect, 'in priority then FIFO order');
is( $node->safe_psql('postgres', $states_sql),
	"dead|1|2\nrunning|26|27\nscheduled|1|0",
	'all of them are running, the retried one at attempt 2');
is( $node->safe_psql('postgres', "SELECT queue.complete(ARRAY[" . join(',', @claimed) . "]::bigint[])"),
	$nready, 'and they can all be completed');
is( $node->safe_psql('postgres', "SELECT queue.complete($id{running})"),
	't', 'the job claimed before both restarts can be completed');

$node->stop;

# ---------------------------------------------------------------- no preload

my $plain = PostgreSQL::Test::Cluster->new('nopreload');
$plain->init;
$plain->start;

is($plain->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	'', 'second node does not preload queue');
# Loading the library outside shared_preload_libraries must work: the
# extension is documented to run without it (queue.tick() is for that).
my ($ret, $out, $err) = $plain->psql(
	'postgres', q{
CREATE EXTENSION queue;
SELECT queue.create('jobs', max_attempts => 2);
});
is($ret, 0, 'no preload: CREATE EXTENSION queue and queue.create work')
  or diag($err);

SKIP:
{
	skip 'the extension could not be created without preloading', 14
	  if $ret != 0;

	my @ids = split /\n/, $plain->safe_psql(
		'postgres', q{
	SELECT queue.enqueue('jobs', '{"n": 1}');
	SELECT queue.enqueue('jobs', '{"n": 2}', priority => 5);
	SELECT queue.enqueue('jobs', '{"n": 3}');
	SELECT queue.enqueue('jobs', '{"n": 4}', delay => '1 hour');
	});
	is(scalar(@ids), 4, 'no preload: enqueue');
	ok($ids[0] < $ids[1] && $ids[1] < $ids[2] && $ids[2] < $ids[3],
		'no preload: ids increase');

	# a rolled-back claim leaves its jobs claimable
	is( $plain->safe_psql(
			'postgres', q{BEGIN; SELECT id FROM queue.claim('jobs', 2); ROLLBACK;}),
		"$ids[1]\n$ids[0]",
		'no preload: claim in priority order (rolled back)');
	is($plain->safe_psql('postgres', q{SELECT id, payload, attempt FROM queue.claim('jobs')}),
		"$ids[1]|{\"n\": 2}|1", 'no preload: claim after rollback takes the same job');
	is($plain->safe_psql('postgres', "SELECT queue.complete($ids[1])"),
		't', 'no preload: complete');
	is($plain->safe_psql('postgres', q{SELECT id FROM queue.claim('jobs')}),
		$ids[0], 'no preload: next claim');
	is( $plain->safe_psql('postgres',
			"SELECT queue.fail($ids[0], 'oops', retry_in => '0')"),
		'retry', 'no preload: fail with retry');
	is( $plain->safe_psql('postgres',
			q{SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.claim('jobs', 10)}),
		"$ids[0],$ids[2]",
		'no preload: the retried job and the other ready job are claimed');
	is( $plain->safe_psql('postgres',
			"SELECT queue.complete(ARRAY[$ids[0], $ids[2]]::bigint[])"),
		'2', 'no preload: complete both');
	is( $plain->safe_psql('postgres',
			q{SELECT state, count(*) FROM queue.jobs GROUP BY state ORDER BY state}),
		'scheduled|1', 'no preload: only the scheduled job is left');
	is( $plain->safe_psql('postgres',
			q{SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.archive}),
		"$ids[0],$ids[1],$ids[2]",
		'no preload: completed jobs are archived');
	is( $plain->safe_psql('postgres',
			q{SELECT ready, scheduled, running, dead, completed_last_minute IS NULL FROM queue.stats}),
		'0|1|0|0|t', 'no preload: stats (recent counts unknown without shared memory)');

	# a scheduled job coming due is claimable without the worker (tick)
	$plain->safe_psql('postgres', "SELECT queue.reschedule($ids[3], now())");
	is($plain->safe_psql('postgres', q{SELECT id FROM queue.claim('jobs')}),
		$ids[3], 'no preload: rescheduled job is claimed');
	$plain->safe_psql('postgres',
		q{SELECT queue.enqueue('jobs', '{"n": 5}', run_at => now() + interval '200 ms')});
	$plain->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM queue.jobs WHERE state = 'ready'})
	  or die 'scheduled job never became due';
	is( $plain->safe_psql('postgres',
			q{SELECT payload FROM queue.claim('jobs')}),
		'{"n": 5}', 'no preload: a scheduled job that came due is claimed');
}

$plain->stop;
done_testing();
