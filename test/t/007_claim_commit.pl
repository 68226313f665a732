# test/t/007_claim_commit.pl: which commits wait for their WAL flush.
#
# With queue.synchronous_claims off, a transaction that only claimed jobs
# in place commits without waiting for its flush (src/flush.c); every
# other write waits as configured, and so do claims by default.  To see
# which commits wait, the server asks for a synchronous standby that never
# connects: a commit that waits for its flush then also waits for that
# standby, until it is cancelled, while one that does not returns at once.
# Cancelling the wait leaves the transaction committed, with a warning.
#
# Waits: a claim in a transaction of its own (one job, and a batch under a
# batch lease) does not wait, nor after WAL that is not the transaction's;
# the same by default (synchronous_claims on), a claim whose statement
# also inserts a row, one after the transaction's own WAL, an enqueue,
# and complete() all wait.  Finally, a crash right
# after claims that did not wait loses no job: each is claimable again,
# or still claimed, and none is both.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use QueueTest;

my $node = PostgreSQL::Test::Cluster->new('claim_commit');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'queue'\nsynchronous_standby_names = 'nobody'");
$node->start;

# Setting up must not wait for the missing standby.
$node->safe_psql(
	'postgres', q{
SET synchronous_commit = local;
CREATE EXTENSION queue;
SELECT queue.create('cc');
SELECT count(*) FROM queue.enqueue_batch('cc', array_fill('{}'::jsonb, ARRAY[50]));
CREATE TABLE seen (id bigint);
});

my $s = QueueTestSession->new($node, 'postgres', 'claimer');
$s->query('SET queue.synchronous_claims = off');
my $mon = QueueTestSession->new($node, 'postgres', 'mon');
$mon->query('SET synchronous_commit = local');

# Runs $sql in the claimer's session; returns whether it finished within
# $secs without waiting for the standby.  If it waits, cancels the wait.
sub finishes
{
	my ($sql, $secs) = @_;
	$s->send($sql);
	my ($out, $err) = $s->wait($secs);
	return (1, $out) if defined $out && $err !~ /synchronous replication/;
	$mon->query("SELECT pg_cancel_backend($s->{pid})") unless defined $out;
	($out, $err) = $s->wait(10);
	die "the claimer's statement did not end after a cancel" unless defined $out;
	like($err, qr/canceling wait for synchronous replication/, 'the cancelled wait was the synchronous standby\'s');
	return (0, $out);
}

my ($fast, $out) = finishes(q{SELECT id FROM queue.claim('cc')}, 5);
ok($fast, 'a claim in a transaction of its own commits without waiting for its flush');
is($mon->query(qq{SELECT state FROM queue.jobs WHERE id = $out}), 'running', 'and its job is running');

($fast, $out) = finishes(q{SELECT count(*) FROM queue.claim('cc', 10)}, 5);
ok($fast, 'so does a claim of 10 jobs under a batch lease');
is($out, '10', 'which took 10 jobs');

($fast) = finishes(q{RESET queue.synchronous_claims; SELECT id FROM queue.claim('cc')}, 1);
ok(!$fast, 'by default (queue.synchronous_claims = on) the claim waits');
$s->query('SET queue.synchronous_claims = off');

($fast) = finishes(q{WITH c AS (SELECT id FROM queue.claim('cc')) INSERT INTO seen SELECT id FROM c}, 1);
ok(!$fast, 'a claim whose statement also inserts a row waits');

($fast) = finishes(q{BEGIN; SELECT queue.enqueue('cc', '{}'); COMMIT;}, 1);
ok(!$fast, 'an enqueue waits');

# A new session's first statement may prune catalog pages, which writes
# WAL that is not the transaction's: a non-transactional message stands
# for it (CI once saw a first claim wait for that alone).  The message is
# written first, as the claim's argument depends on it.
my $after_message = q{SELECT c.id FROM (SELECT pg_logical_emit_message(%s, 'queue', 'x') AS lsn) m,
 LATERAL queue.claim(CASE WHEN m.lsn IS NOT NULL THEN 'cc' END) c};
($fast) = finishes(sprintf($after_message, 'false'), 5);
ok($fast, 'WAL written before the claim, not under the transaction\'s id, does not make it wait');
($fast) = finishes(sprintf($after_message, 'true'), 1);
ok(!$fast, 'WAL the transaction wrote before the claim does');

($fast, $out) = finishes(q{SELECT id FROM queue.claim('cc')}, 5);
ok($fast, 'a claim on its own does not (again)');
($fast) = finishes(qq{SELECT queue.complete($out)}, 1);
ok(!$fast, 'complete() waits');
is($mon->query(qq{SELECT count(*) FROM queue.jobs WHERE id = $out}), '0', 'and the job is complete');

# A crash right after claims that did not wait for their flush: whatever
# reached disk, every job is either claimable or still running (to be
# returned by the worker, its claimer gone), once.
my $before = $mon->query(q{SELECT count(*) FROM queue.jobs WHERE queue = 'cc'});
($fast) = finishes(q{SELECT count(*) FROM queue.claim('cc', 5)}, 5);
ok($fast, 'five more claimed without waiting');
$s->close;
$mon->close;
$node->stop('immediate');
$node->start;
$mon = QueueTestSession->new($node, 'postgres', 'mon');
$mon->query('SET synchronous_commit = local');
is($mon->query(q{SELECT count(*) FROM queue.jobs WHERE queue = 'cc'}), $before,
	'after a crash every job is still there');
is( $mon->query(q{SELECT count(*) FROM queue.jobs WHERE queue = 'cc' AND state NOT IN ('ready', 'running')}),
	'0', 'each ready or running');
my $took = poll_for($mon, q{SELECT count(*) FROM queue.jobs WHERE queue = 'cc' AND state = 'running'}, '0', 30);
ok(defined $took, 'the worker returns the claims whose sessions the crash ended');
is( $mon->query(
		q{SELECT count(*) = count(DISTINCT id) FROM (SELECT id FROM queue.claim('cc', 1000)) c}),
	't', 'and each job is claimed once');
$mon->close;
$node->stop;

done_testing();
