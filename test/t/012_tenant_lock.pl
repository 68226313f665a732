# test/t/012_tenant_lock.pl: one tenant's locks do not stop the upkeep of
# the other queues.
#
# A role with the README's grants on queue tl_a takes LOCK TABLE
# queue.q_tl_a IN SHARE MODE and keeps its transaction open, while a job
# of tl_a falls due (scheduled) and a job of tl_b, claimed by a consumer
# that stays connected, reaches the end of its lease.  The worker visits
# tl_a first (queues in the order they were made), and its promotion
# there waits for the lock: it used to wait as long as the tenant liked,
# and tl_b's expired job stayed running 9 s and more.  Now it waits at
# most queue.upkeep_lock_timeout, logs that it skipped tl_a, and returns
# tl_b's job; tl_a's job is promoted once the lock is gone.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use QueueTest;

my $node = PostgreSQL::Test::Cluster->new('tenant_lock');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'queue'
queue.worker_naptime = 500
log_line_prefix = '%m [%p] [%b] %q%a '
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION queue;
SELECT queue.create('tl_a');
SELECT queue.create('tl_b', lease => '1 second');
CREATE ROLE tl_tenant LOGIN;
GRANT USAGE ON SEQUENCE queue."q_tl_a$seq" TO tl_tenant;
GRANT SELECT, INSERT, UPDATE, DELETE ON queue.q_tl_a TO tl_tenant;
GRANT INSERT ON queue.a_tl_a TO tl_tenant;
});
my $a_qno = $node->safe_psql('postgres',
	q{SELECT qno FROM queue.queue_config WHERE name = 'tl_a'});

my $a_job = $node->safe_psql('postgres',
	q{SELECT queue.enqueue('tl_a', '{}', run_at => now() + interval '1 second')});
my $tenant = QueueTestSession->new($node, 'postgres', 'tenant');
$tenant->query(q{SET ROLE tl_tenant});
$tenant->query(q{BEGIN; LOCK TABLE queue.q_tl_a IN SHARE MODE});
my $b_job = $node->safe_psql('postgres', q{SELECT queue.enqueue('tl_b', '{}')});
my $consumer = QueueTestSession->new($node, 'postgres', 'consumer');
is($consumer->query(q{SELECT id FROM queue.claim('tl_b')}),
	$b_job, "tl_b's job is claimed, with a lease of 1 s");
my $lease_end = time + 1;

# Its lease is over after 1 s; the worker notices within a naptime (0.5 s)
# and a lock timeout (0.1 s): 5 s is room enough on a loaded machine, and
# far less than the tenant keeps its lock.
my $waited = poll_for($node, 'postgres',
	qq{SELECT state || ' ' || attempt FROM queue.jobs WHERE id = $b_job},
	'ready 1', 6);
ok(defined $waited && time - $lease_end < 5,
	"tl_b's expired job is ready again while a tenant keeps tl_a's table locked")
  or diag(sprintf('%.1f s after its lease ended', time - $lease_end));
is( $node->safe_psql('postgres', qq{SELECT state FROM queue.jobs WHERE id = $a_job}),
	'scheduled', "tl_a's due job is not promoted while its table is locked");
ok( $node->log_contains(
		qr/queue worker skipped queue number $a_qno: another session holds a lock its upkeep needs/),
	'the worker logs that it skipped tl_a');

$tenant->query('COMMIT');
ok( defined poll_for($node, 'postgres',
		qq{SELECT state FROM queue.jobs WHERE id = $a_job}, 'ready', 10),
	"tl_a's job is promoted once the lock is gone");

$tenant->close;
$consumer->close;
settle($node);
$node->stop;
done_testing();
