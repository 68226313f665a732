# test/t/009_wakeups.pl: a commit that makes n jobs ready wakes n waiting
# claims, not all of them, and no job is left waiting for a claim that
# sleeps.
#
# src/wake.c signals one claim per job (and a spare) instead of
# broadcasting.  What could then leave a job behind while claims sleep on:
# a commit waking fewer claims than it made jobs; a woken claim that fails
# before it takes the job (it must hand the wakeup on); a wakeup that
# reaches claims waiting on another queue whose wait slot is the same, of
# this database or of another (such slots wake everyone), or claims that
# cannot see the job (REPEATABLE READ); and a freed max_running slot, which
# makes no job ready but must wake a claim that found none free.  Each
# case has its claims wait 30 s and expects the job taken within a few: a
# lost wakeup would leave it until a wait ends.  The
# worker's naptime is an hour, so that nothing else wakes the claims.
#
# Of the claims waiting for a scheduled job, only one sleeps until its due
# time.  With the worker stopped, the last part checks that no due time is
# left without one: jobs falling due one after another, a due time brought
# forward, a timed claim that leaves with a job that became ready, and a
# claim woken to be timed that cannot wait that long.

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
	my ($s, $queue, $wait) = @_;
	$wait //= '30 s';
	$s->send(qq{SELECT payload->>'n' FROM queue.claim('$queue', 1, wait => '$wait')});
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

# A trigger makes claims go through SPI, where its error fails the claims
# of sessions w1 and w2 after they were woken, before they took anything.
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION public.refuse_w1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('application_name') IN ('w1', 'w2') THEN
        RAISE EXCEPTION '% may not claim', current_setting('application_name');
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_w1 BEFORE UPDATE ON queue.q_n
    FOR EACH ROW EXECUTE FUNCTION public.refuse_w1();
});
# w1 and w2 sleep first, so the wakeups of a single job (one and a spare)
# go to them.  At least one of them fails (the other may find the job
# locked by the first, and sleep again); only handed on can the wakeup
# reach w3.
start_waiting($_, 'n') for @w[ 0 .. 2 ];
$t0 = time;
$node->safe_psql('postgres', q{SELECT queue.enqueue('n', '{"n": 8}')});
($out) = $w[2]->wait(5);
is($out, '8', 'the third waiting claim takes the job');
ok(time - $t0 < 5, 'within 5 s (it waits 30)');
note sprintf('taken after %.3f s', time - $t0);
my $failed = 0;
for my $s (@w[ 0 .. 1 ])
{
	$node->safe_psql('postgres', qq{SELECT pg_cancel_backend($s->{pid})});
	($out, $err) = $s->wait(5);
	$failed++ if ($err // '') =~ /may not claim/;
}
ok($failed >= 1, 'a woken claim of w1 or w2 failed');
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

# ------------------------- a claim of another database in the same slot

# Tags are exact (database, queue) pairs: their 32-bit hashes collide
# across databases.  Find queue numbers for a second database whose pair
# hashes exactly like one of this database's, and have claims there sleep
# first, two of them, as many as a single job wakes.
# Two new databases get neighbouring oids, whose pairs collide easily.
$node->safe_psql('postgres', q{CREATE DATABASE one});
$node->safe_psql('postgres', q{CREATE DATABASE other});
my ($dboid1, $dboid2) = split /\n/, $node->safe_psql('postgres',
	q{SELECT oid FROM pg_database WHERE datname IN ('one', 'other') ORDER BY datname});
sub hash_combine
{
	my ($db, $q) = @_;
	return $db ^ (($q + 0x9e3779b9 + (($db << 6) & 0xffffffff) + ($db >> 2)) & 0xffffffff);
}
my ($q1, $q2);
for my $cand (2 .. 999999)
{
	my $c2 = (0x9e3779b9 + (($dboid2 << 6) & 0xffffffff) + ($dboid2 >> 2)) & 0xffffffff;
	my $x = ((hash_combine($dboid1, $cand) ^ $dboid2) - $c2) & 0xffffffff;
	if ($x >= 2 && $x <= 999999)
	{
		($q1, $q2) = ($cand, $x);
		last;
	}
}
ok(defined $q1, 'found queue numbers whose pairs hash alike in the two databases');
$node->safe_psql('one',
	qq{CREATE EXTENSION queue; SELECT setval('queue.queue_number_seq', $q1 - 1); SELECT queue.create('x');});
$node->safe_psql('other',
	qq{CREATE EXTENSION queue; SELECT setval('queue.queue_number_seq', $q2 - 1); SELECT queue.create('y');});
is(hash_combine($dboid2, $node->safe_psql('other', q{SELECT qno FROM queue.queue_config WHERE name = 'y'})),
	hash_combine($dboid1, $node->safe_psql('one', q{SELECT qno FROM queue.queue_config WHERE name = 'x'})),
	'queues x and y hash alike');
my @o = map { QueueTestSession->new($node, 'other', "o$_") } 1 .. 2;
my $x = QueueTestSession->new($node, 'one', 'x1');
start_waiting($_, 'y') for @o;
start_waiting($x, 'x');
$t0 = time;
$node->safe_psql('one', q{SELECT queue.enqueue('x', '{"n": 11}')});
($out) = $x->wait(5);
is($out, '11', 'a job of x reaches x\'s claim, though two claims of y slept first');
note sprintf('taken after %.3f s', time - $t0);
$node->safe_psql('other', q{SELECT queue.enqueue('y', '{"n": 12}'), queue.enqueue('y', '{"n": 13}')});
my %o = map { ($_->wait(5))[0] // 'none' => 1 } @o;
is_deeply([ sort keys %o ], [ 12, 13 ], 'and jobs of y reach y\'s claims');

# ------------------------------ claims that cannot see the job sleep first

# Two claims in REPEATABLE READ transactions cannot see a job committed
# after their snapshot; woken for it, they would sleep again.
$node->safe_psql('postgres', q{SELECT queue.create('rr')});
$_->query(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM queue.jobs})
  for @w[ 1 .. 2 ];
start_waiting($_, 'rr', '4 s') for @w[ 1 .. 2 ];
start_waiting($w[3], 'rr');
$t0 = time;
$node->safe_psql('postgres', q{SELECT queue.enqueue('rr', '{"n": 14}')});
($out) = $w[3]->wait(3);
is($out, '14', 'a job reaches the claim that can see it, though two that cannot slept first');
note sprintf('taken after %.3f s', time - $t0);
for my $s (@w[ 1 .. 2 ])
{
	($out) = $s->wait(10);
	is($out, '', "$s->{app}: its REPEATABLE READ claim found nothing at its deadline");
	$s->query('COMMIT');
}

# ---------------------------------------------- a max_running slot frees

# A claim that found no free slot sleeps; the commit that frees one wakes
# it.
$node->safe_psql('postgres', q{SELECT queue.create('mr', max_running => 1)});
$node->safe_psql('postgres',
	q{SELECT queue.enqueue('mr', '{"n": 15}'); SELECT queue.enqueue('mr', '{"n": 16}')});
# (claimed by a session that stays: a claimer that exits is an orphan)
my $running = $w[3]->query(q{SELECT id FROM queue.claim('mr', 1)});
start_waiting($w[0], 'mr');
$t0 = time;
$w[3]->query(qq{SELECT queue.complete($running)});
($out) = $w[0]->wait(5);
is($out, '16', 'completing the running job wakes the claim waiting for a slot');
note sprintf('taken after %.3f s', time - $t0);

# ------------------------------------- scheduled jobs: one claim is timed

# One waiting claim per queue sleeps until the queue's due time, the others
# until woken (QueueWaitTimed).  The worker is stopped (SIGSTOP) for this
# part, since it steps in 10 ms after a due time that waiting claims left:
# here a due time nobody was timed to would leave its job until a deadline.
$node->safe_psql('postgres', q{SELECT queue.create('s')});
my $wpid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'postgres'});
# First the worker's look makes the new queue's due time known (nothing
# scheduled): a due time is only lowered from a known one.
$node->safe_psql('postgres',
	q{SELECT queue.enqueue('s', '{"n": 20}', run_at => clock_timestamp() + interval '0.2 s')});
is($w[0]->query(q{SELECT payload->>'n' FROM queue.claim('s', 1, wait => '10 s')}), '20',
	'the worker promotes the first scheduled job of a new queue');
ok(kill('STOP', $wpid), 'the worker is stopped');
# (a stopped worker would hold up the node's shutdown if a test died)
END { kill('CONT', $wpid) if $wpid; }

# Collects the jobs the claims of sessions @s return within $secs, or
# until job $want is among them: a hash of job (payload n) => session name.
sub collect
{
	my ($secs, $want, @s) = @_;
	my (%by, %done);
	my $deadline = time + $secs;
	while (keys %done < @s && time < $deadline && !(defined $want && defined $by{$want}))
	{
		for my $s (grep { !$done{ $_->{app} } } @s)
		{
			my ($out) = $s->wait(0.05);
			next unless defined $out;
			$done{ $s->{app} } = 1;
			$by{$out} = $s->{app} if $out ne '';
		}
	}
	return %by;
}

# The sessions of @s that took none of the jobs in %$by (from collect).
sub idle_of
{
	my ($by, @s) = @_;
	my %took = map { $_ => 1 } values %$by;
	return grep { !$took{ $_->{app} } } @s;
}

# How late (s) the claim of job n (payload) came: its claimed_at - run_at.
sub late
{
	my ($n) = @_;
	return $mon->query(
		qq{SELECT extract(epoch FROM claimed_at - run_at) FROM queue.jobs WHERE queue = 's' AND payload->>'n' = '$n'});
}

# Three jobs due 0.3 s apart, three claims waiting: the claim timed to each
# due time takes the job and, promoting it, publishes the next due time and
# wakes one claim to be timed to it.
$node->safe_psql('postgres',
	q{SELECT queue.enqueue('s', jsonb_build_object('n', 20 + i), run_at => clock_timestamp() + interval '2 s' + i * interval '0.3 s')
	    FROM generate_series(1, 3) i});
start_waiting($_, 's') for @w[ 0 .. 2 ];
my %by = collect(10, undef, @w[ 0 .. 2 ]);
is_deeply([ sort keys %by ], [ 21, 22, 23 ], 'three jobs falling due one after another are taken');
for my $n (21 .. 23)
{
	my $late = late($n);
	ok($late ne '' && $late < 0.5, "job $n within 0.5 s of its due time");
	note "job $n was taken $late s after its due time";
}

# A due time brought forward wakes a claim to be timed to it: the claim
# timed to the later one must not sleep through it.
$node->safe_psql('postgres',
	q{SELECT queue.enqueue('s', '{"n": 24}', run_at => clock_timestamp() + interval '10 min')});
start_waiting($_, 's') for @w[ 0 .. 1 ];
$node->safe_psql('postgres',
	q{SELECT queue.enqueue('s', '{"n": 25}', run_at => clock_timestamp() + interval '1 s')});
%by = collect(4, 25, @w[ 0 .. 1 ]);
is_deeply([ keys %by ], [25], 'a job due before the queue\'s due time is taken, by one claim');
my $late = late(25);
ok($late ne '' && $late < 0.5, 'within 0.5 s of its due time');
note "taken $late s after its due time";
$node->safe_psql('postgres', q{SELECT queue.enqueue('s', '{"n": 26}')});
%by = (%by, collect(4, 26, @w[ 0 .. 1 ]));
ok(defined $by{26}, 'the other claim takes a ready job');

# The timed claim leaves early, with a job that became ready: it wakes
# another claim to be timed in its stead.  The first claim to sleep is the
# timed one, and the first the commit wakes (with a spare); it usually
# takes the job.  Five rounds.
for my $round (1 .. 5)
{
	my $n = 30 + $round;
	my $ready = 40 + $round;
	$node->safe_psql('postgres',
		qq{SELECT queue.enqueue('s', '{"n": $n}', run_at => clock_timestamp() + interval '2 s')});
	start_waiting($_, 's') for @w[ 1 .. 3 ];
	$node->safe_psql('postgres', qq{SELECT queue.enqueue('s', '{"n": $ready}')});
	%by = collect(2, $ready, @w[ 1 .. 3 ]);
	ok(defined $by{$ready}, "round $round: a claim takes the job that became ready");
	my @still = idle_of(\%by, @w[ 1 .. 3 ]);
	%by = (%by, collect(4, $n, @still));
	ok(defined $by{$n}, "round $round: another takes the scheduled one");
	$late = late($n);
	ok($late ne '' && $late < 0.5, "round $round: within 0.5 s of its due time");
	note "round $round: the ready job went to $by{$ready}, the scheduled one to "
	  . ($by{$n} // 'nobody') . ", $late s after its due time";
	@still = idle_of(\%by, @w[ 1 .. 3 ]);
	$node->safe_psql('postgres', qq{SELECT queue.enqueue('s', '{"n": 50}')}) for @still;
	collect(4, undef, @still);
}
# A due time brought forward wakes one claim, the one that slept longest.
# Here that claim's wait ends before the new due time, so it cannot be
# timed to it: it must wake another, or the claim timed to the later due
# time would sleep through the earlier one.
$node->safe_psql('postgres',
	q{SELECT queue.enqueue('s', '{"n": 60}', run_at => clock_timestamp() + interval '20 s')});
start_waiting($w[1], 's', '1.5 s');
start_waiting($w[2], 's');
$node->safe_psql('postgres',
	q{SELECT queue.enqueue('s', '{"n": 61}', run_at => clock_timestamp() + interval '2 s')});
%by = collect(5, 61, @w[ 1 .. 2 ]);
is($by{61}, 'w3', 'the claim that can wait takes a job brought forward past the first claim\'s wait');
$late = late(61);
ok($late ne '' && $late < 0.5, 'within 0.5 s of its due time');
note "taken $late s after its due time";

ok(kill('CONT', $wpid), 'the worker goes on');

$_->close for @w, @o, $x, $mon;
$node->stop;

done_testing();
