# test/t/013_lock_table.pl: no number of queues exhausts the server's
# shared lock table.
#
# The lock table is shared by every session and has room for about
# max_locks_per_transaction * (max_connections + background processes)
# locks, here 10 * 35.  A worker pass that visited every queue in one
# transaction held the locks of all of them (a queue's upkeep locks about
# ten relations): with enough queues it failed with "out of shared
# memory", and while it held what it got, so did queue.create, and even
# unrelated sessions (SELECT FROM pg_stat_activity).  queue.stats read
# every queue's table in one statement, with the same effect, and so did
# the views queue.jobs and queue.archive (over the parents of every
# queue's tables: the planner locked them all) up to 0.5.  A transaction
# making many queues filled the lock table too: it is now refused with an
# error naming the setting before it gets there.
#
# Here 150 queues, made one per transaction, each with a job whose lease
# runs out at about the same time, so that one pass has every queue to
# visit.  The worker must return all 150 jobs; meanwhile an unrelated
# session and queue.stats keep working, a queue can still be created, and
# the log has no "out of shared memory".  The build before this test
# failed at about 40 queues.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use QueueTest;

my $nqueues = 150;

my $node = PostgreSQL::Test::Cluster->new('lock_table');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'queue'
max_locks_per_transaction = 10
max_connections = 10
log_line_prefix = '%m [%p] [%b] %q%a '
});
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION queue');
my $made = 0;
for my $i (1 .. $nqueues)
{
	my ($rc) = $node->psql('postgres',
		qq{SELECT queue.create('lt_$i', lease => '3 seconds')}, on_error_stop => 1);
	$made++ if $rc == 0;
}
is($made, $nqueues, "$nqueues queues are made, one per transaction");

# A job in each, claimed by a consumer that stays connected: every lease
# ends about 3 s after the last claim.
my $consumer = QueueTestSession->new($node, 'postgres', 'consumer');
$consumer->query(join("\n", map { "SELECT queue.enqueue('lt_$_', '{}');" } 1 .. $nqueues));
my $claims = join("\n", map { "SELECT count(*) FROM queue.claim('lt_$_');" } 1 .. $nqueues);
$consumer->query($claims);
is( $node->safe_psql('postgres', q{SELECT sum(running) FROM queue.stats}),
	$nqueues, 'every queue has its job running');

# While the worker returns them: an unrelated session, queue.stats and
# queue.create keep working.
my $other = QueueTestSession->new($node, 'postgres', 'other');
my ($failures, $rounds, $returned) = (0, 0, 0);
my $deadline = time + 30;
while (time < $deadline)
{
	for my $sql (
		q{SELECT count(*) FROM pg_stat_activity},
		q{SELECT sum(ready) FROM queue.stats},
		q{SELECT count(*) FROM queue.jobs},
		q{SELECT count(*) FROM queue.archive})
	{
		my ($out, $err) = $other->query($sql);
		if ($err ne '')
		{
			$failures++;
			diag("$sql: $err");
		}
		$returned = $out if $sql =~ /stats/;
	}
	$rounds++;
	last if $returned eq $nqueues;
	sleep 0.05;
}
is($returned, $nqueues, "the worker returns all $nqueues expired jobs");
is($failures, 0, "an unrelated session and queue.stats never failed ($rounds rounds)");
my ($rc, $out, $err) = $node->psql('postgres', q{SELECT queue.create('lt_after')});
is($rc, 0, 'a queue can be created afterwards') or diag($err);

# The views read every queue, one at a time.
is( $node->safe_psql('postgres',
		q{SELECT count(*) || ' ' || count(DISTINCT queue) FROM queue.jobs WHERE state = 'ready'}),
	"$nqueues $nqueues", "queue.jobs shows the $nqueues returned jobs, one per queue");
$node->safe_psql('postgres',
	join("\n", map { "SELECT queue.complete(id) FROM queue.claim('lt_$_');" } 1 .. $nqueues));
is($node->safe_psql('postgres', q{SELECT count(DISTINCT queue) FROM queue.archive WHERE state = 'done'}),
	$nqueues, "queue.archive shows a finished job of each of the $nqueues queues");

# Making queues in one transaction stops at half the lock table, with an
# error that names the setting; nothing of it is left, and others go on.
my $limit = $node->safe_psql('postgres',
	q{SELECT current_setting('max_locks_per_transaction')::int
	       * (current_setting('max_connections')::int + current_setting('autovacuum_max_workers')::int + 1
	          + current_setting('max_worker_processes')::int + current_setting('max_wal_senders')::int
	          + current_setting('max_prepared_transactions')::int) / 2 / 70});
($rc, $out, $err) = $node->psql('postgres',
	qq{BEGIN; SELECT count(queue.create('lt_many_' || i)) FROM generate_series(1, $limit) i; COMMIT;});
is($rc, 0, "a transaction can make $limit queues") or diag($err);
($rc, $out, $err) = $node->psql('postgres',
	qq{BEGIN; SELECT count(queue.create('lt_more_' || i)) FROM generate_series(1, $limit + 1) i; COMMIT;});
like($err, qr/ERROR:  a transaction can create at most $limit queues at max_locks_per_transaction = 10/,
	'one more is refused, naming the setting');
like($err, qr/HINT:  Commit after every $limit queues, or raise max_locks_per_transaction/,
	'the hint says what to do');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queue.queue_config WHERE name LIKE 'lt_more_%'}),
	0, 'none of the refused transaction is left');
($rc, $out, $err) = $node->psql('postgres', q{SELECT count(*) FROM pg_stat_activity});
is($rc, 0, 'another session still works') or diag($err);
ok(!$node->log_contains(qr/out of shared memory/),
	'the server log has no "out of shared memory"');

$consumer->close;
$other->close;
settle($node);
$node->stop;
done_testing();
