# test/t/002_restart.pl: queue data is durable across restarts.
#
# With ready, running (claimed and committed), scheduled, retried and dead
# jobs and an archived one, restart the server cleanly (fast) and after an
# immediate stop (crash recovery): every ready, scheduled, retried, dead and
# archived job is still there in the same state with its attempts, payload
# and history, ids keep increasing, and a claim transaction that was in
# flight is rolled back without leaving its jobs behind the (fresh, empty)
# shared claim cursor: claims still find every ready job.  A running job is
# not lost either: its consumer's session does not survive the restart, so
# the background worker returns it, ready again with the attempt counted
# and last_error 'consumer disconnected', and it is claimed and completed
# like any other.  Also: without shared_preload_libraries the extension
# still works, without the cursor.

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

# running: claimed and committed by a consumer that stays connected (until
# the fast restart ends its session): the worker returns the running jobs
# of a session that has exited
enqueue('running');
my $holder = $node->background_psql('postgres');
is($holder->query_safe(q{SELECT id FROM queue.claim('work')}),
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

# Everything there is to see of every job but $except (the running one,
# which a restart returns: restart_check looks at it on its own).
sub snapshot
{
	my ($except) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT queue, id, state, attempt, max_attempts, priority, payload, run_at,
       group_key, dedup_key, enqueued_at, claimed_at, lease_until, last_error
  FROM queue.jobs WHERE id <> $except ORDER BY id;
SELECT * FROM queue._job WHERE id <> $except ORDER BY id;
SELECT * FROM queue.archive ORDER BY id;
SELECT * FROM queue.queues;
SELECT j.id, h.* FROM (SELECT id FROM queue.jobs WHERE id <> $except UNION ALL SELECT id FROM queue.archive) j,
       queue.history(j.id) h ORDER BY j.id, h.at, h.event, h.attempt;
});
}
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

# What a restart may change of the running job $held (claimed by a session
# the restart ends), and what it may not.
my $held_sql = q{
SELECT queue, id, state, attempt, max_attempts, priority, payload, group_key,
       dedup_key, enqueued_at, claimed_at, lease_until IS NULL, last_error
  FROM queue.jobs WHERE id = %1$s;
SELECT state, attempt, uncounted, owner_pid IS NULL, owner_start IS NULL,
       rank > (SELECT max(rank) FROM queue._job WHERE id <> %1$s)
  FROM queue._job WHERE id = %1$s;
SELECT at, event, attempt, detail FROM queue.history(%1$s);
};

# Restart the node in the given way while a claim transaction is in flight
# and job $held is running, claimed by the connected session $holder;
# everything committed must be back as it was, the claim undone, and $held
# ready again (never lost), its attempt counted.
sub restart_check
{
	my ($how, $restart, $held, $holder) = @_;

	is( $node->safe_psql('postgres',
			"SELECT state, attempt, last_error FROM queue.jobs WHERE id = $held"),
		'running|1|', "$how: job $held is running before");
	my $before = snapshot($held);
	my $held_before = $node->safe_psql('postgres', sprintf($held_sql, $held));
	my $run_at_before = $node->safe_psql('postgres',
		"SELECT run_at FROM queue.jobs WHERE id = $held");
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
	eval { $holder->quit; };

	# The holder's session is gone: the worker returns its job (it checks
	# when it starts).
	ok( $node->poll_query_until(
			'postgres',
			"SELECT state = 'ready' FROM queue.jobs WHERE id = $held"),
		"$how: the job claimed by a session the restart ended is ready again");
	my @want = split /\n/, $held_before, -1;
	# jobs: running -> ready, attempt kept (1: the claim counted), lease
	# gone, last_error set; _job: claimer cleared, a new rank behind every
	# other job; history: the claim, then its end
	$want[0] =~ s/^(\w+\|$held\|)running\|1\|(.*)\|f\|$/$1ready|1|$2|t|consumer disconnected/
	  or die "unexpected held job row: $want[0]";
	$want[1] =~ s/^running\|1\|0\|f\|f\|[tf]$/ready|1|0|t|t|t/
	  or die "unexpected held _job row: $want[1]";
	my $got = $node->safe_psql('postgres', sprintf($held_sql, $held));
	my @got = split /\n/, $got, -1;
	is(join("\n", @got[ 0 .. 1 ]), join("\n", @want[ 0 .. 1 ]),
		"$how: the returned job is ready, attempt 1 counted, last_error 'consumer disconnected', payload and all else kept");
	is(join("\n", @got[ 2 .. $#got - 1 ]), join("\n", @want[ 2 .. $#want ]),
		"$how: its history up to the claim is intact");
	like($got[-1], qr/^[^|]+\|consumer disconnected\|1\|$/,
		"$how: and ends with 'consumer disconnected' at attempt 1");
	is( $node->safe_psql('postgres',
			"SELECT run_at >= '$run_at_before' FROM queue.jobs WHERE id = $held"),
		't', "$how: the returned job is due (run_at not earlier than before)");

	is(snapshot($held), $before,
		"$how: every other job, archived job and history is intact");
	# (the returned job has kept its priority and has the newest rank, see
	# above: it comes after every ready job of its priority)
	is( join(',',
			grep { $_ != $held } split /,/,
			$node->safe_psql('postgres', $order_sql)),
		$order,
		"$how: the other ready jobs keep their claim order");
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

restart_check('fast restart', sub { $node->restart; }, $id{running}, $holder);
# one job added, and the running one returned (ready, attempt 1)
is( $node->safe_psql('postgres', $states_sql),
	"dead|1|2\nready|25|2\nscheduled|1|0",
	'states after the fast restart (one job added, the running one returned)');

# A running job for the crash: the first in line, claimed by a consumer
# that stays connected until the immediate stop.
enqueue('running2', 'priority => 10');
$holder = $node->background_psql('postgres');
is($holder->query_safe(q{SELECT id FROM queue.claim('work')}),
	$id{running2}, 'second running job claimed');

restart_check(
	'immediate stop',
	sub {
		$node->stop('immediate');
		$node->start;
	},
	$id{running2},
	$holder);
is( $node->safe_psql('postgres', $states_sql),
	"dead|1|2\nready|27|3\nscheduled|1|0",
	'states after crash recovery (one more job added, the running one returned)'
);
for my $l (qw(running running2))
{
	is( $node->safe_psql('postgres',
			qq{SELECT state, attempt, last_error, payload->>'text' = U&'h\\00e9llo \\2603', payload->'nested'
			     FROM queue.jobs WHERE id = $id{$l}}),
		'ready|1|consumer disconnected|t|{"a": [1, 2.5, null, true]}',
		"$l job: ready again, its attempt counted, payload intact");
}

# After the restart the shared cursor starts empty: claims find every ready
# job, those the crashed transaction had claimed and those returned by the
# worker included, in order.  The claims are made by one session that stays
# connected, so that the worker leaves the claimed jobs running.
my $expect = $node->safe_psql('postgres', $order_sql);
my $nready = scalar(split /,/, $expect);
is($nready, 27, '27 ready jobs');
my $consumer = $node->background_psql('postgres');
my @claimed;
for (1 .. $nready + 1)
{
	my $got = $consumer->query_safe(q{SELECT id FROM queue.claim('work')});
	last if $got eq '';
	push @claimed, $got;
}
is(scalar(@claimed), $nready, 'one claim at a time takes every ready job');
is(join(',', @claimed), $expect, 'in priority then FIFO order');
ok((grep { $_ == $id{running} } @claimed) && (grep { $_ == $id{running2} } @claimed),
	'the returned jobs are among them');
is( $node->safe_psql('postgres', $states_sql),
	"dead|1|2\nrunning|27|30\nscheduled|1|0",
	'all of them are running, the retried and the two returned ones at attempt 2');
is( $node->safe_psql('postgres', "SELECT queue.complete(ARRAY[" . join(',', @claimed) . "]::bigint[])"),
	$nready, 'and they can all be completed');
is( $node->safe_psql('postgres',
		"SELECT id, state, attempt FROM queue.archive WHERE id IN ($id{running}, $id{running2}) ORDER BY id"),
	"$id{running}|done|2\n$id{running2}|done|2",
	'the jobs returned after the restarts are done at their second attempt');
is( $node->safe_psql('postgres',
		"SELECT event, attempt, detail FROM queue.history($id{running})"),
	"enqueued|0|\nclaimed|1|\nconsumer disconnected|1|\nclaimed|2|\ncompleted|2|",
	'history of the job claimed before the fast restart');
$consumer->quit;

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
			q{SELECT ready, scheduled, running, dead, waiting, completed_last_minute IS NULL, failed_last_minute IS NULL FROM queue.stats}),
		'0|1|0|0|0|t|t', 'no preload: stats (recent counts unknown without shared memory)');

	# a scheduled job coming due is claimable without the worker (tick)
	$plain->safe_psql('postgres', "SELECT queue.reschedule($ids[3], now())");
	is($plain->safe_psql('postgres', q{SELECT id FROM queue.claim('jobs')}),
		$ids[3], 'no preload: rescheduled job is claimed');
	$plain->safe_psql('postgres',
		q{SELECT queue.enqueue('jobs', '{"n": 5}', run_at => now() + interval '200 ms')});
	# without the worker nothing promotes it when it comes due: the claim does
	$plain->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM queue.jobs WHERE state = 'scheduled' AND run_at <= now()})
	  or die 'scheduled job never became due';
	is( $plain->safe_psql('postgres',
			q{SELECT payload FROM queue.claim('jobs')}),
		'{"n": 5}', 'no preload: a scheduled job that came due is claimed');
}

$plain->stop;
done_testing();
