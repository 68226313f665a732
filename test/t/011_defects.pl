# test/t/011_defects.pl: defects found in review, each asserted as it
# should be.
#
# 1. DROP DATABASE (also WITH (FORCE)) frees the shared-memory entries
#    (claim cursor, counters) of the dropped database's queues, so that
#    queues made afterwards get them: queue.max_queues is the number of
#    queues the server keeps state for, not the number ever made since it
#    started.  A queue without an entry shows completed_last_minute NULL in
#    queue.stats.
#
#    The entries live in a shared hash table sized for queue.max_queues
#    (16 here).  Once its entries are taken it grows into the shared memory
#    the server keeps spare (which the lock table needs as it grows), so
#    the test first takes that spare memory with advisory locks (the lock
#    table keeps it once it has it): from then on the table has its 16
#    entries and no more, as it would with a table of fixed size.
#
# 2. DDL that stops a database's worker before it runs (ALTER DATABASE ...
#    RENAME here) waits for the worker on a condition variable
#    (wait_event_type 'Extension' in pg_stat_activity), not by sleeping in
#    pg_usleep with no wait event.  To make the wait last, the worker is
#    kept in an upkeep pass, blocked on the queue's queue_config row, which
#    a session holds FOR UPDATE; the worker looks at its shutdown flag only
#    between passes.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use QueueTest;

my $node = PostgreSQL::Test::Cluster->new('defects');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'queue'
queue.max_queues = 16
# (2. keeps the worker blocked on a row lock: no timeout ends the wait)
queue.upkeep_lock_timeout = '1h'
log_line_prefix = '%m [%p] [%b] %q%a '
});
$node->start;

# ---------------------------------------------------------------- helpers

# Take the server's spare shared memory: advisory locks until the lock
# table cannot grow.  Returns how many it took and the bytes left.
sub take_spare_shmem
{
	my $n = $node->safe_psql(
		'postgres', q{
DO $$
DECLARE n int := 0;
BEGIN
    BEGIN
        LOOP
            n := n + 1;
            PERFORM pg_advisory_xact_lock(n);
            EXIT WHEN n >= 2000000;
        END LOOP;
    EXCEPTION WHEN out_of_memory THEN
        NULL;
    END;
    PERFORM set_config('df.locks', n::text, false);
END
$$;
SELECT current_setting('df.locks')});
	my $left = $node->safe_psql('postgres',
		q{SELECT coalesce(sum(size), 0) FROM pg_shmem_allocations WHERE name IS NULL});
	return ($n, $left);
}

# In database $db: 4 queues, one job of each enqueued, claimed and
# completed.  Returns completed_last_minute of the 4, as "1,1,1,1" when
# each has shared state.
sub four_queues
{
	my ($db) = @_;
	return $node->safe_psql(
		$db, q{
SELECT count(*) FROM (SELECT queue.create('q' || i) FROM generate_series(1, 4) i) c;
SELECT count(*) FROM (SELECT queue.enqueue('q' || i, '{}') FROM generate_series(1, 4) i) e;
SELECT count(*) FILTER (WHERE queue.complete(c.id)) FROM generate_series(1, 4) i, LATERAL queue.claim('q' || i) c;
SELECT string_agg(coalesce(completed_last_minute::text, 'NULL'), ',' ORDER BY queue) FROM queue.stats;
});
}

sub new_db
{
	my ($db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION queue');
	return;
}

# Cycles of CREATE DATABASE, 4 queues with a completed job each, DROP
# DATABASE (with a session connected and WITH (FORCE) if $force); then 4
# queues in a database of their own.
sub cycles
{
	my ($tag, $force) = @_;
	my ($locks, $left) = take_spare_shmem();
	note "$tag: took $locks advisory locks; $left bytes of spare shared memory left";

	my @seen;
	for my $i (1 .. 6)
	{
		my $db = "df_${tag}_$i";
		new_db($db);
		my $got = (split /\n/, four_queues($db))[-1];
		push @seen, $got;
		if ($force)
		{
			my $s = QueueTestSession->new($node, $db, "connected_$i");
			$node->safe_psql('postgres', "DROP DATABASE $db WITH (FORCE)");
			$s->close;
		}
		else
		{
			$node->safe_psql('postgres', "DROP DATABASE $db");
		}
	}
	my $drop = $force ? 'DROP DATABASE ... WITH (FORCE)' : 'DROP DATABASE';
	is(join(' ', @seen), join(' ', ('1,1,1,1') x 6),
		"$drop: each of 6 databases made one after the other gets shared state for its 4 queues (max_queues 16)");

	new_db("df_${tag}_fresh");
	is((split /\n/, four_queues("df_${tag}_fresh"))[-1], '1,1,1,1',
		"$drop: after 6 databases with 4 queues each were dropped, 4 new queues have shared state (completed_last_minute 1)");
	$node->safe_psql('postgres', "DROP DATABASE df_${tag}_fresh");
	return;
}

# ------------------------------------------- 1. DROP DATABASE frees slots

cycles('drop', 0);

# A restart empties shared memory: the same again, WITH (FORCE).
$node->restart;
cycles('force', 1);

# ------------------------------------- 2. worker stop waits on a CV

my $mon = QueueTestSession->new($node, 'postgres', 'monitor');
my $worker_sql = q{SELECT count(*) FROM pg_stat_activity
                    WHERE backend_type = 'queue worker' AND datname = 'df_wait'};

new_db('df_wait');
$node->safe_psql('df_wait', q{SELECT queue.create('w')});
defined poll_for($mon, $worker_sql, '1', 10) or die 'no worker in df_wait';

my $holder = QueueTestSession->new($node, 'df_wait', 'config_holder');
$holder->query(q{BEGIN; SELECT qno FROM queue.queue_config WHERE name = 'w' FOR UPDATE});
$node->safe_psql('df_wait', q{SELECT queue.enqueue('w', '{}', delay => '1 second')});
my $blocked = poll_for(
	$mon, q{SELECT wait_event_type FROM pg_stat_activity
	         WHERE backend_type = 'queue worker' AND datname = 'df_wait'}, 'Lock', 10);
defined $blocked or die 'the worker of df_wait did not block on the queue_config row';
note sprintf('the worker waits for the queue_config row lock after %.2f s', $blocked);

my $worker_pid = $mon->query(q{SELECT pid FROM pg_stat_activity
                                 WHERE backend_type = 'queue worker' AND datname = 'df_wait'});
my $renamer = QueueTestSession->new($node, 'postgres', 'renamer');
my $t0 = time;
$renamer->send('ALTER DATABASE df_wait RENAME TO df_wait2');
my (%samples, %worker_states);
while (time - $t0 < 4)
{
	my ($ev, $wk) = split /\|/, $mon->query(qq{
		SELECT coalesce((SELECT coalesce(wait_event_type, 'NULL') || '/' || state
		                   FROM pg_stat_activity WHERE pid = $renamer->{pid}
		                    AND query LIKE 'ALTER DATABASE%'), 'gone'),
		       coalesce((SELECT string_agg(coalesce(wait_event_type, 'NULL'), ',')
		                   FROM pg_stat_activity
		                  WHERE backend_type = 'queue worker' AND datname = 'df_wait'), 'none')});
	if (time - $t0 > 0.2)
	{
		$samples{$ev}++;
		$worker_states{$wk}++;
	}
	sleep 0.02;
}
my $summary = sub {
	my ($h) = @_;
	return join(', ', map { "$_ x $h->{$_}" } sort keys %$h);
};
note 'the worker meanwhile: ' . $summary->(\%worker_states);
my $nsamples = 0;
$nsamples += $_ for values %samples;
is($summary->(\%samples), "Extension/active x $nsamples",
	'while ALTER DATABASE ... RENAME waits for the worker to exit (0.2 s to 4 s), pg_stat_activity shows it waiting on an Extension event');

# Let the worker go; the rename then ends, one way or the other.
my $t1 = time;
$holder->query('COMMIT');
$holder->close;
my $gone = poll_for($mon, "SELECT count(*) FROM pg_stat_activity WHERE pid = $worker_pid", '0', 30);
note(defined $gone
	? sprintf('the worker exited %.2f s after the row lock was released', time - $t1)
	: 'the worker did not exit within 30 s of the row lock being released');
my ($out, $err) = $renamer->wait(30);
note 'ALTER DATABASE ... RENAME ended after '
  . sprintf('%.2f s', time - $t0)
  . (defined $err && $err ne '' ? ": $err" : ': renamed');
$renamer->close;
$mon->close;

settle($node);
$node->stop;
done_testing();
