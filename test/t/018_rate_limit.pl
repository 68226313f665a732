# test/t/018_rate_limit.pl: a queue's rate limit holds across consumers,
# and wakes them when tokens come back.
#
#   1. 8 pgbench clients claim (up to 3 at a time, claim(wait => '1 s'))
#      and complete jobs of a queue limited to 100 a second, for 10 s.
#      In every window of the claims' times, from one claim to another,
#      no more were claimed than the token bucket allows: its size (100,
#      the burst the README documents) plus 100 a second of the window.
#      And the limit is reached, not undershot: at least 85% of the
#      10 s × 100 the bucket gave out.
#   2. A LISTEN consumer that found the bucket empty is notified when the
#      next token comes, with no new job enqueued, and not before.
#   2b. Claims waiting on a limited queue with no job sleep, and do not
#      wake each other for the tokens they give back.
#   3. The bucket is in shared memory: after a restart it starts full.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use QueueTest;

my $node = PostgreSQL::Test::Cluster->new('rate_limit');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'\nmax_connections = 30");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION queue;
SELECT queue.create('rl', rate_limit => 100, rate_period => '1 s', retention => '1 hour');
SELECT count(*) FROM queue.enqueue_batch('rl', array_fill('{}'::jsonb, ARRAY[3000]));
});

# ---------------------------------------------------------------- 1. 8 consumers

my $script = "$PostgreSQL::Test::Utils::tmp_check/rl_claim.sql";
open my $fh, '>', $script or die $!;
print $fh "SELECT queue.complete(id) FROM queue.claim('rl', 3, wait => '1 s');\n";
close $fh;
my ($out, $err);
my $t0 = time;
IPC::Run::run([ 'pgbench', '-n', '-c', '8', '-j', '8', '-T', '10', '-f', $script, $node->connstr('postgres') ],
	'>', \$out, '2>', \$err)
  or die "pgbench failed: $err";
diag(sprintf('8 clients for %.1f s', time - $t0));

my $claimed = $node->safe_psql('postgres', q{SELECT count(*) FROM queue.archive WHERE queue = 'rl'});
my $span = $node->safe_psql('postgres',
	q{SELECT extract(epoch FROM max(claimed_at) - min(claimed_at)) FROM queue.archive WHERE queue = 'rl'});
diag("claimed $claimed jobs over $span s");
my $per_second = $node->safe_psql(
	'postgres', q{
SELECT string_agg(n::text, ' ' ORDER BY s) FROM (
  SELECT s, count(*) AS n FROM (
    SELECT floor(extract(epoch FROM claimed_at - min(claimed_at) OVER ())) AS s
      FROM queue.archive WHERE queue = 'rl') c
   GROUP BY s) w});
diag("claims per second from the first: $per_second");

# The most any window [a, b] of claim times exceeds the bucket's bound by:
# (claims in it) - (100 + 100 × (b - a)), over every pair of claims.
my $excess = $node->safe_psql(
	'postgres', q{
WITH c AS (
  SELECT claimed_at AS t, row_number() OVER (ORDER BY claimed_at, id) AS i
    FROM queue.archive WHERE queue = 'rl')
SELECT round(max((b.i - a.i + 1) - (100 + 100 * extract(epoch FROM b.t - a.t)))::numeric, 2)
  FROM c a JOIN c b ON b.i >= a.i});
diag("the most a window held over the bound: $excess");
cmp_ok($excess, '<=', 1,
	'1. no window of claims held more than the bucket (100) and 100 a second of its length');
cmp_ok($claimed, '<=', 100 + 100 * $span + 1, '1. in all, no more than 100 + 100 a second');
cmp_ok($claimed, '>=', int(0.85 * 100 * 10), '1. and the limit was reached: at least 850 in 10 s');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queue.jobs WHERE queue = 'rl' AND state = 'running'}),
	'0', '1. every claimed job was completed');

# ---------------------------------------------------------------- 2. LISTEN

$node->safe_psql('postgres',
	q{SELECT queue.create('rl_listen', rate_limit => 5, rate_period => '1 s')});
my $l = listener_start($node, 'postgres', 'queue_rl_listen');
$node->safe_psql('postgres',
	q{SELECT count(*) FROM queue.enqueue_batch('rl_listen', array_fill('{}'::jsonb, ARRAY[20]))});
ok(defined listener_wait($l, 'queue_rl_listen', 10), '2. the enqueue notifies the listener');
# (jobs are completed as they are claimed: the worker returning a gone
# session's jobs would notify too)
my $take = q{SELECT count(queue.complete(id)) FROM queue.claim('rl_listen', %d)};
is($node->safe_psql('postgres', sprintf($take, 10)), '5', '2. a claim of 10 gets the bucket\'s 5');
is($node->safe_psql('postgres', sprintf($take, 1)), '0', '2. the next finds it empty');
my $empty_at = time;
my $at = listener_wait($l, 'queue_rl_listen', 5);
ok(defined $at, '2. the listener is notified again, with no job enqueued');
cmp_ok($at - $empty_at, '>=', 0.1, '2. not before the next token (one per 200 ms)') if defined $at;
cmp_ok($at - $empty_at, '<', 2, '2. but when it comes') if defined $at;
is($node->safe_psql('postgres', sprintf($take, 1)), '1', '2. and its claim then gets a job');
listener_stop($l);

# ---------------------------------------------------------------- 2b. no spin
# Claims that get tokens and find no job give them back; that wakes other
# claims only if one found the bucket short.  Four claims wait on a limited
# queue; one job comes: one claim takes it, and the others go back to
# sleep, rather than waking each other in turn for the tokens given back.
$node->safe_psql('postgres', q{SELECT queue.create('rl_spin', rate_limit => 1000)});
my @waiters = map { QueueTestSession->new($node, 'postgres', "waiter$_") } 1 .. 4;
$_->send(q{SELECT count(*) FROM queue.claim('rl_spin', 5, wait => '4 s')}) for @waiters;
sleep 0.5;
$node->safe_psql('postgres', q{SELECT queue.enqueue('rl_spin', '{}')});
sleep 0.2;
my $c0 = cpu_ticks(map { $_->{pid} } @waiters);
sleep 1.5;
my $spent = cpu_ticks(map { $_->{pid} } @waiters) - $c0;
cmp_ok($spent, '<', 20, "2b. the claims left waiting sleep ($spent ticks of CPU in 1.5 s)");
my $got = 0;
for my $w (@waiters)
{
	my ($out) = $w->wait(10);
	$got += $out // 0;
	$w->close;
}
is($got, 1, '2b. one of them got the job');

# ---------------------------------------------------------------- 3. restart

$node->safe_psql('postgres', q{SELECT queue.alter('rl_listen', rate_period => '1 hour')});
$node->safe_psql('postgres', sprintf($take, 10));
is($node->safe_psql('postgres', sprintf($take, 10)), '0', '3. a bucket of 5 an hour, spent');
$node->restart;
is($node->safe_psql('postgres', sprintf($take, 10)), '5',
	'3. after a restart it is full again (it lives in shared memory)');

$node->stop;
done_testing();
