# test/t/009_wakeups.pl: a commit that makes n jobs ready wakes n waiting
# claims, not all of them, and no job is left waiting for a claim that
# sleeps.
#
# src/wake.c signals one claim per job instead of broadcasting.  Three
# things could then leave a job behind while claims sleep on: a commit
# waking fewer claims than it made jobs; a woken claim that fails before it
# takes the job (it must hand the wakeup on); and a wakeup that reaches a
# claim waiting on another queue whose wait slot is the same (such slots
# wake everyone).  Each case has its claims wait 30 s and expects the job
# taken within a few: a lost wakeup would leave it until a wait ends.  The
# worker's naptime is an hour, so that nothing else wakes the claims.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use QueueTest;

my $node = PostgreSQL::Test::Cluster->new('wakeups');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'queue'\nqueue.worker_naptime = '1h'");
$node->start;
$node->safe_psql('postgres', q{CREATE EXTENSION queue; SELECT queue.create('n');});
my $mon = QueueTestSession->new($node, 'postgres', 'monitor');

# Starts a claim of one job from $queue, waiting up to 30 s, in session $s,
# and returns once it sleeps.
sub start_waiting
{
	my ($s, $queue) = @_;
	$s->send(qq{SELECT payload->>'n' FROM queue.claim('$queue', 1, wait => '30 s')});
	ok( defined poll_for(
			$mon,
			qq{SELECT wait_event_type FROM pg_stat_activity WHERE pid = $s->{pid}},
			'Extension', 10),
		"$s->{app} is waiting on queue $queue");
	return;
}

# ------------------------------------------------ n jobs wake n claims

my @w = map { QueueTestSession->new($node, 'postgres', "w$_") } 1 .. 4;
start_waiting($_, 'n') for @w;

my $t0 = time;
$node->safe_psql('postgres',
	q{SELECT queue.enqueue_batch('n', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[])});
my (%got, @left, $last);
for my $s (@w)
{
	my ($out, $err, $at) = $s->wait(5 - (time - $t0));
	if (defined $out)
	{
		is($err, '', "$s->{app}: no error");
		$got{$out} = $s->{app};
		$last = $at if !defined $last || $at > $last;
	}
	else
	{
		push @left, $s;
	}
}
is_deeply([ sort keys %got ], [ 1, 2, 3 ],
	'a batch of 3 jobs: three waiting claims take one each, within 5 s');
is(scalar @left, 1, 'the fourth claim is still waiting');
note sprintf('the three claims returned within %.3f s', ($last // $t0) - $t0);

$t0 = time;
$node->safe_psql('postgres', q{SELECT queue.enqueue('n', '{"n": 4}')});
my ($out, $err) = $left[0]->wait(5);
is($out, '4', 'one more job: the fourth claim takes it');
note sprintf('taken after %.3f s', time - $t0);

# Three jobs in three transactions, back to back.
start_waiting($_, 'n') for @w[ 0 .. 2 ];
$t0 = time;
$node->safe_psql('postgres', qq{SELECT queue.enqueue('n', '{"n": $_}')}) for 5 .. 7;
%got = ();
for my $s (@w[ 0 .. 2 ])
{
	($out) = $s->wait(5 - (time - $t0));
	$got{ $out // 'none' } = 1;
}
is_deeply([ sort keys %got ], [ 5, 6, 7 ],
	'three jobs in three transactions: three waiting claims take one each');

# ------------------------------------ a woken claim that fails hands it on

# A trigger makes claims go through SPI, where its error fails the claim of
# session w1 after it was woken, before it took anything.
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION public.refuse_w1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('application_name') = 'w1' THEN
        RAISE EXCEPTION 'w1 may not claim';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_w1 BEFORE UPDATE ON queue.q_n
    FOR EACH ROW EXECUTE FUNCTION public.refuse_w1();
});
# w1 sleeps first, so the one wakeup of a single job goes to it.
start_waiting($w[0], 'n');
start_waiting($w[1], 'n');
$t0 = time;
$node->safe_psql('postgres', q{SELECT queue.enqueue('n', '{"n": 8}')});
($out, $err) = $w[0]->wait(5);
like($err, qr/w1 may not claim/, 'the woken claim fails');
($out) = $w[1]->wait(5 - (time - $t0));
is($out, '8', 'the other waiting claim takes the job');
ok(time - $t0 < 5, 'within 5 s (it waits 30)');
note sprintf('taken after %.3f s', time - $t0);
$node->safe_psql('postgres', q{DROP TRIGGER refuse_w1 ON queue.q_n});

# --------------------------------- two queues whose claims share a slot

# wake.c hashes (database, queue number) to one of 1024 slots.  Find a
# queue number past n's that lands in n's slot, and make the next queue
# take it.
my ($dboid, $qno) = split /\|/, $node->safe_psql('postgres',
	q{SELECT d.oid, c.qno FROM pg_database d, queue.queue_config c
	   WHERE d.datname = current_database() AND c.name = 'n'});
sub wait_slot_of
{
	my ($db, $q) = @_;
	my $h = ($db ^ (($q + 0x9e3779b9 + (($db << 6) & 0xffffffff) + ($db >> 2)) & 0xffffffff));
	$h = 1 if $h == 0;
	return $h % 1024;
}
my $other = $qno + 1;
$other++ while wait_slot_of($dboid, $other) != wait_slot_of($dboid, $qno);
$node->safe_psql('postgres',
	qq{SELECT setval('queue.queue_number_seq', $other - 1); SELECT queue.create('m');});
is($node->safe_psql('postgres', q{SELECT qno FROM queue.queue_config WHERE name = 'm'}),
	$other, 'queue m has a number that shares n\'s wait slot');

# A claim on m sleeps first: a single wakeup would reach it, not n's claim.
start_waiting($w[2], 'm');
start_waiting($w[0], 'n');
$t0 = time;
$node->safe_psql('postgres', q{SELECT queue.enqueue('n', '{"n": 9}')});
($out) = $w[0]->wait(5);
is($out, '9', 'a job of n reaches n\'s claim, though m\'s claim slept first');
note sprintf('taken after %.3f s', time - $t0);
$node->safe_psql('postgres', q{SELECT queue.enqueue('m', '{"n": 10}')});
($out) = $w[2]->wait(5);
is($out, '10', 'and a job of m reaches m\'s claim');

$_->close for @w, $mon;
$node->stop;

done_testing();
