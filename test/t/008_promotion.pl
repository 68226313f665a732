# test/t/008_promotion.pl: a claim's promotion of scheduled jobs and the
# queue's due time, which claims waiting on the queue sleep until.
#
# A claim that promotes the jobs falling due publishes the queue's next due
# time at once (src/xact.c, QueueXactNextDue), not when it commits: a claim
# waiting meanwhile takes the next job when it falls due, though the first
# claim's transaction is still open.  If that transaction rolls back, the
# job it promoted is due again, and a waiting claim takes it at once.  The
# worker's naptime is an hour, so that only these paths can deliver.  While
# the job is held, the worker must not spin, with claims waiting or not:
# its own look at the table still sees the held job as scheduled and due,
# and used to store that as the due time, look again at once, and so on
# until the holder committed.  Last, a due job that something else holds
# locked without making it ready is looked at again after a naptime.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use QueueTest;

my $node = PostgreSQL::Test::Cluster->new('promotion');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'\nqueue.worker_naptime = '1h'");
$node->start;
$node->safe_psql('postgres', q{CREATE EXTENSION queue; SELECT queue.create('p');});

my $a = QueueTestSession->new($node, 'postgres', 'holder');
my $w = QueueTestSession->new($node, 'postgres', 'waiter');

my $t0 = $a->query(q{SELECT extract(epoch FROM clock_timestamp())});
my $first = $a->query(qq{SELECT queue.enqueue('p', '{"n": 1}', run_at => to_timestamp($t0 + 1))});
my $second = $a->query(qq{SELECT queue.enqueue('p', '{"n": 2}', run_at => to_timestamp($t0 + 2))});

my $wpid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'postgres'});
my $cpu = sub { cpu_ticks($wpid) };

# The holder takes the first job in a transaction it keeps open.
is($a->query(q{BEGIN; SELECT id FROM queue.claim('p', wait => '5 s')}), $first,
	'a claim in an open transaction takes the first job when it falls due');

my $cpu_before = $cpu->();
$w->send(q{SELECT id FROM queue.claim('p', wait => '5 s')});
my ($got, $err, $at) = $w->wait(10);
my $cpu_after = $cpu->();
is($got, $second, 'a waiting claim takes the second job while that transaction is open');
my $late = $at - ($t0 + 2);
ok($late < 0.3, 'within 300 ms of its due time');
note sprintf('the second job was taken %.3f s after its due time', $late);
SKIP:
{
	skip 'no /proc to read the worker\'s CPU time from', 1 unless defined $cpu_before;
	cmp_ok($cpu_after - $cpu_before, '<', 20, 'the worker did not spin meanwhile (under 0.2 s of CPU)');
	note sprintf('the worker used %d clock ticks meanwhile', $cpu_after - $cpu_before);
}

# The holder rolls back: the first job is scheduled again, and due.
$w->send(q{SELECT id FROM queue.claim('p', wait => '5 s')});
my $sent = time;
$a->query('ROLLBACK');
my $rolled = time;
($got, $err, $at) = $w->wait(10);
is($got, $first, 'after the rollback a waiting claim takes the first job');
ok($at - $rolled < 1, 'within a second of the rollback (the worker sleeps for an hour)');
note sprintf('taken %.3f s after the rollback (claim sent %.3f s before it)', $at - $rolled, $rolled - $sent);

# The same hold with nobody waiting: the worker promotes the next job
# itself when it falls due, and must not then take the held job for the
# queue's due time (its look at the table still sees it scheduled).
$t0 = $a->query(q{SELECT extract(epoch FROM clock_timestamp())});
my $third = $a->query(qq{SELECT queue.enqueue('p', '{"n": 3}', run_at => to_timestamp($t0 + 1))});
my $fourth = $a->query(qq{SELECT queue.enqueue('p', '{"n": 4}', run_at => to_timestamp($t0 + 1.5))});
is($a->query(q{BEGIN; SELECT id FROM queue.claim('p', wait => '5 s')}), $third,
	'a claim in an open transaction takes the third job');
$cpu_before = $cpu->();
my $took = poll_for($w, qq{SELECT state FROM queue.jobs WHERE id = $fourth}, 'ready', 5);
ok(defined $took, 'with nobody waiting, the worker makes the fourth job ready');
sleep 1;
$cpu_after = $cpu->();
SKIP:
{
	skip 'no /proc to read the worker\'s CPU time from', 1 unless defined $cpu_before;
	cmp_ok($cpu_after - $cpu_before, '<', 20, 'and does not spin while the third is held');
	note sprintf('the worker used %d clock ticks meanwhile', $cpu_after - $cpu_before);
}
$a->query('COMMIT');
$a->query(qq{SELECT queue.complete($third)});
is($a->query(q{SELECT count(*) FROM queue.claim('p') c, queue.complete(c.id)}), 1,
	'the fourth job is claimed and completed: the queue is empty');

# A due job locked by something that leaves it scheduled (here a plain
# FOR UPDATE; a cancel or reschedule that rolls back does the same).  The
# promotions skip it, and the due time they stored no longer named it:
# only the worker's cleanup, every 10 s, found it again, and a waiting
# claim slept until then.  While such a job is there, the worker's look
# and a claim's promotion now store a due time a naptime on.  The sixth
# job falls due with the fifth: a claim waiting for it promotes it (the
# worker leaves due jobs to waiting claims for 10 ms), so the claim's due
# time is the one the next claim sleeps on.
$node->safe_psql('postgres', q{ALTER SYSTEM SET queue.worker_naptime = '1s'});
$node->safe_psql('postgres', q{SELECT pg_reload_conf()});
sleep 1;
$t0 = $a->query(q{SELECT extract(epoch FROM clock_timestamp())});
my $fifth = $a->query(qq{SELECT queue.enqueue('p', '{"n": 5}', run_at => to_timestamp($t0 + 2))});
my $sixth = $a->query(qq{SELECT queue.enqueue('p', '{"n": 6}', run_at => to_timestamp($t0 + 2))});
$a->query(qq{BEGIN; SELECT 1 FROM queue.q_p WHERE id = $fifth FOR UPDATE});
is($w->query(q{SELECT id FROM queue.claim('p', wait => '5 s')}), $sixth,
	'a waiting claim takes the due job that is not locked');
# (the jobs taken earlier hold leases: the due time was their expiry)
my $ahead = $w->query(
	q{SELECT extract(epoch FROM t.next_due - clock_timestamp())
	    FROM queue.queue_config c, queue._tick_queue(c, cleanup => false) t WHERE c.name = 'p'});
ok($ahead ne '' && $ahead > 0.5 && $ahead <= 1,
	'while the other is locked, the worker\'s look is due again a naptime on');
note "the look's due time was $ahead s ahead";
$w->send(q{SELECT id FROM queue.claim('p', wait => '20 s')});
sleep 0.5;
$a->query('ROLLBACK');
my $released = time;
($got, $err, $at) = $w->wait(30);
is($got, $fifth, 'a waiting claim takes the locked job once the lock is gone');
ok($at - $released < 1.6, 'within a naptime of that (the worker\'s cleanup comes every 10 s)');
note sprintf('taken %.3f s after the lock went', $at - $released);

$a->close;
$w->close;
$node->stop;

done_testing();
