# test/t/017_idle_after_restart.pl: after a restart, idle queues go back
# to costing the worker nothing.
#
# A restart empties shared memory, so the worker knows no queue's due
# time or counts: its first pass visits every queue.  A queue whose
# counts are unknown may have running jobs, and a cleanup (every 10 s)
# looks for orphans in every such queue.  The worker learned counts only
# from a session's queue.stats, so beside idle queues nobody looked at,
# every cleanup visited all of them, forever: 10,000 queues took 63% of a
# core.  Now the first visit counts the queue's jobs.
#
# pg_stat_statements (track = all) counts the worker's visits: each is
# one call of its tick statement.  20 queues, each with a job scheduled
# an hour out (a due time, not none); after a restart and the first
# pass, two cleanups must visit none of them.  A queue with a job that
# is running is still visited, and its orphan returned.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use QueueTest;

my $nqueues = 20;

my $node = PostgreSQL::Test::Cluster->new('idle_restart');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'queue, pg_stat_statements'
pg_stat_statements.track = all
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION queue; CREATE EXTENSION pg_stat_statements');
for my $i (1 .. $nqueues)
{
	$node->safe_psql('postgres',
		qq{SELECT queue.create('idle_$i'); SELECT queue.enqueue('idle_$i', '{}', run_at => now() + interval '1 hour')});
}

# A job claimed by a session that the restart ends: an orphan to return.
$node->safe_psql('postgres', q{SELECT queue.create('busy'); SELECT queue.enqueue('busy', '{"n": 1}')});
my $holder = QueueTestSession->new($node, 'postgres', 'holder');
is($holder->query(q{SELECT count(*) FROM queue.claim('busy')}), '1', 'a session claims the busy queue\'s job');
is($node->safe_psql('postgres', q{SELECT state FROM queue.jobs WHERE queue = 'busy'}),
	'running', 'the busy queue\'s job is running');

$node->restart;

my $visits = q{(SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
 WHERE query LIKE '%queue._tick_queue(c, cleanup%')};

# The first pass visits every queue (their due times are unknown).
ok(defined poll_for($node, 'postgres', "SELECT $visits >= $nqueues + 1", 't', 30),
	'after the restart, the worker visits every queue once');
ok( defined poll_for(
		$node, 'postgres', q{SELECT state || ' ' || attempt || ' ' || last_error FROM queue.jobs WHERE queue = 'busy'},
		'ready 1 consumer disconnected', 30),
	'and returns the orphan of the busy queue');

# Two cleanups (10 s apart) after that first pass.
$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
sleep 21;
is($node->safe_psql('postgres', "SELECT $visits"), '0',
	"two cleanups later, the worker has visited none of the $nqueues idle queues again");
is($node->safe_psql('postgres', q{SELECT count(*) FROM queue.jobs WHERE state = 'scheduled'}),
	$nqueues, 'their scheduled jobs are still there');

# A running job makes its queue a cleanup's business again.
$holder = QueueTestSession->new($node, 'postgres', 'holder');
is($holder->query(q{SELECT count(*) FROM queue.claim('busy')}), '1', 'the busy queue\'s job is claimed again');
$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
$holder->close;
ok( defined poll_for(
		$node, 'postgres', q{SELECT state || ' ' || attempt FROM queue.jobs WHERE queue = 'busy'},
		'ready 2', 30),
	'its consumer gone, the worker returns it');
cmp_ok($node->safe_psql('postgres', "SELECT $visits"), '<', $nqueues,
	'and visits that queue, not the idle ones');

$node->stop;
done_testing();
