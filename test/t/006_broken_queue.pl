# test/t/006_broken_queue.pl: a queue whose upkeep fails.
#
# A queue's owner can make the worker's upkeep of it fail (here, a trigger
# that refuses to return expired jobs).  The worker must warn, keep
# maintaining the other queues, and try the broken one again after its
# naptime: not at once, which would spin a core and flood the log.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use QueueTest;

my $node = PostgreSQL::Test::Cluster->new('broken');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'\nqueue.worker_naptime = '1s'");
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION queue;
SELECT queue.create('broken', max_attempts => 3);
SELECT queue.create('fine', max_attempts => 3);
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'this queue keeps its expired jobs';
END $$;
CREATE TRIGGER refuse BEFORE UPDATE ON queue.q_broken FOR EACH ROW
	WHEN (OLD.state = 'running' AND NEW.state <> 'running') EXECUTE FUNCTION refuse();
SELECT queue.enqueue('broken', '{}');
SELECT queue.enqueue('fine', '{}');
});

my $mon = QueueTestSession->new($node, 'postgres', 'mon');
ok(defined poll_for($mon, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker'}, '1', 10),
	'the worker runs');

my $consumer = QueueTestSession->new($node, 'postgres', 'consumer');
is($consumer->query(q{SELECT count(*) FROM queue.claim('broken', lease => '100 ms')}),
	'1', 'a job of the broken queue is claimed, for 100 ms');
is($consumer->query(q{SELECT count(*) FROM queue.claim('fine', lease => '100 ms')}),
	'1', 'and one of another queue');

my $took = poll_for($mon, q{SELECT state FROM queue.jobs WHERE queue = 'fine'}, 'ready', 5);
ok(defined $took && $took < 2.5, 'the other queue\'s expired job is returned');
note sprintf('returned %.3f s after its claim', $took // -1);

# Count the warnings of 3 seconds, once the passes the claims caused are over.
sleep 1;
my $log_from = -s $node->logfile;
sleep 3;
is($mon->query(q{SELECT state FROM queue.jobs WHERE queue = 'broken'}),
	'running', 'the broken queue\'s job stays running (its upkeep fails)');
my $log = substr(slurp_file($node->logfile), $log_from);
my $warned = () = $log =~ /queue worker could not maintain queue number \d+: this queue keeps its expired jobs/g;
ok($warned >= 1, 'the worker warns about the broken queue');
ok($warned <= 5, 'about once per naptime, not in a loop');
note "$warned warnings in 3 s with a naptime of 1 s";

# Mended, the queue's job comes back.
$mon->query(q{DROP TRIGGER refuse ON queue.q_broken});
$took = poll_for($mon, q{SELECT state FROM queue.jobs WHERE queue = 'broken'}, 'ready', 5);
ok(defined $took && $took < 2.5, 'once mended, the broken queue\'s job is returned too');

$consumer->close;
$mon->close;
settle($node);
$node->stop;
done_testing();
