# test/t/016_schedules.pl: periodic jobs fired by the worker, exactly one
# job per tick, whatever crashes.
#
#   1. Without shared_preload_libraries nothing fires by itself, and
#      queue.tick() fires the due ticks.
#   2. With the worker, a new schedule wakes it: an every-second schedule
#      (cron '* * * * * *') has its first job within a few seconds, in two
#      databases, each ticking on its own.
#   3. Meanwhile the worker is killed with SIGKILL (the postmaster restarts
#      every process), the server is stopped with -m immediate and started
#      again, and then it fails over to a streaming standby, which is
#      promoted and goes on ticking.
#   4. On the new primary, each database's jobs have one run_at per second
#      from the first tick to the last: no gap, no duplicate.
#   5. pg_dump / pg_restore keeps the schedules.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use QueueTest;

my $primary = PostgreSQL::Test::Cluster->new('sched_primary');
$primary->init(allows_streaming => 1);
$primary->start;

# ------------------------------------------------- 1. no worker: queue.tick()

$primary->safe_psql('postgres', q{CREATE DATABASE one; CREATE DATABASE two;});
for my $db ('one', 'two')
{
	$primary->safe_psql($db, q{CREATE EXTENSION queue; SELECT queue.create('ticks');});
}
$primary->safe_psql('one', q{SELECT queue.schedule('nopreload', 'ticks', every => '1 second')});
sleep 2.2;
is($primary->safe_psql('one', q{SELECT count(*) FROM queue.jobs}), '0',
	'without the worker no tick fires by itself');
ok($primary->safe_psql('one', q{SELECT count(*) FROM queue.tick()}) >= 0, 'queue.tick() runs');
my $fired = $primary->safe_psql('one', q{SELECT count(*) FROM queue.jobs});
ok($fired >= 2 && $fired <= 3, "queue.tick() fires the due ticks ($fired)");
$primary->safe_psql('one', q{SELECT count(*) FROM queue.tick()});
is($primary->safe_psql('one', q{SELECT count(*) FROM queue.jobs}), $fired,
	'a second tick() at once fires nothing more');
$primary->safe_psql('one', q{SELECT queue.unschedule('nopreload'); SELECT queue.purge('ticks')});

# ------------------------------------------------- 2. the worker fires them

$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'\nrestart_after_crash = on");
$primary->restart;
# Waits (through crash recovery: connections fail meanwhile) until $n
# workers other than $old_pid run.
sub workers_back
{
	my ($node, $n, $old_pid) = @_;
	my $t0 = time;
	local $SIG{PIPE} = 'IGNORE';
	while (time - $t0 < 60)
	{
		# psql may be gone before its input is written: IPC::Run dies then
		my ($ret, $out) = eval {
			$node->psql('postgres',
				qq{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker' AND pid <> $old_pid});
		};
		return 1 if defined $ret && $ret == 0 && $out eq $n;
		sleep 0.1;
	}
	return 0;
}

my $worker_pid = sub {
	my ($node, $db) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = '$db'});
};
ok(defined poll_for($primary, 'postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker'}, '2', 30),
	'a worker serves each database');

for my $db ('one', 'two')
{
	$primary->safe_psql($db, qq{SELECT queue.schedule('every-second', 'ticks', '* * * * * *',
		payload => '{"db": "$db"}')});
}
for my $db ('one', 'two')
{
	ok(defined poll_for($primary, $db, q{SELECT count(*) > 0 FROM queue.jobs}, 't', 5),
		"$db: the worker fires the new schedule's first tick");
}

my $standby = PostgreSQL::Test::Cluster->new('sched_standby');
$primary->backup('b');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
sleep 15;

# ------------------------------------------------- 3. crashes and a failover

my $pid = $worker_pid->($primary, 'one');
ok($pid, 'the worker of database one is running');
kill 'KILL', $pid;
ok(workers_back($primary, 2, $pid), 'after SIGKILL the workers are back');
sleep 15;

$primary->stop('immediate');
$primary->start;
ok(workers_back($primary, 2, 0), 'after an immediate stop and a start the workers are back');
sleep 15;

# no wait for the standby to catch up: ticks it never saw are fired again
# by it, and their lost jobs with them
$primary->stop('immediate');
$standby->promote;
ok(workers_back($standby, 2, 0), 'the promoted standby runs a worker per database');
sleep 15;

# A due schedule whose row another transaction holds (an open tick(), a
# pause_schedule() not committed) is looked at again a while later: the
# worker used to look again at once, round and round, at 100% of a CPU.
my $holder = QueueTestSession->new($standby, 'one', 'holder');
$holder->query(q{BEGIN; SELECT name FROM queue.queue_schedules WHERE name = 'every-second' FOR UPDATE});
sleep 1.5;
my $wpid = $worker_pid->($standby, 'one');
my $cpu = sub { cpu_ticks($wpid) // 0 };
my $cpu0 = $cpu->();
sleep 2;
my $used = $cpu->() - $cpu0;
ok($used < 40, "the worker waits while a due schedule is held ($used of 200 CPU ticks in 2 s)");
$holder->query('COMMIT');
$holder->close;
sleep 3;

# ------------------------------------------------- 4. one job per second

for my $db ('one', 'two')
{
	$standby->safe_psql($db, q{SELECT queue.pause_schedule('every-second')});
	my ($n, $distinct, $span, $whole, $payload) = split /\|/, $standby->safe_psql($db, q{
		SELECT count(*), count(DISTINCT run_at), extract(epoch FROM max(run_at) - min(run_at))::int + 1,
		       bool_and(run_at = date_trunc('second', run_at)), bool_and(payload->>'db' = current_database())
		  FROM queue.jobs WHERE queue = 'ticks'});
	ok($n >= 60, "$db: the schedule ticked for a minute and more, through it all ($n jobs)");
	is($distinct, $n, "$db: no tick has two jobs");
	is($span, $n, "$db: no tick has none (one job per second from the first to the last)");
	is($whole, 't', "$db: each job's run_at is its tick, a whole second");
	is($payload, 't', "$db: each database fired its own schedule");
	my ($last_run, $last_job) = split /\|/, $standby->safe_psql($db, q{
		SELECT s.last_run_at = (SELECT max(run_at) FROM queue.jobs),
		       s.last_job_id = (SELECT id FROM queue.jobs ORDER BY run_at DESC LIMIT 1)
		  FROM queue.schedules s WHERE s.name = 'every-second'});
	is("$last_run|$last_job", 't|t', "$db: the schedule records its last tick and job");
}

# A worker that fails on every pass (here its schedules' table was changed
# by hand) starts again a second later, not at once, round and round.
my $log_offset = -s $standby->logfile;
$standby->safe_psql('two', q{ALTER TABLE queue.queue_schedules DROP COLUMN failures;
                              SELECT queue.resume_schedule('every-second')});
sleep 3;
my $failures = () = slurp_file($standby->logfile, $log_offset) =~ /column "failures" does not exist/g;
ok($failures >= 1 && $failures <= 6, "a worker failing on every pass starts at most every second ($failures failures in 3 s)");
$standby->safe_psql('postgres', 'DROP DATABASE two');

# ------------------------------------------------- 5. dump and restore

my $dump = $standby->basedir . '/one.dump';
$standby->command_ok([ 'pg_dump', '-Fc', '-d', $standby->connstr('one'), '-f', $dump ], 'pg_dump -Fc');
$standby->safe_psql('postgres', 'CREATE DATABASE restored');
$standby->command_ok([ 'pg_restore', '-d', $standby->connstr('restored'), $dump ], 'pg_restore');
my $cols = q{SELECT name, queue, cron, every, timezone, payload, next_run_at, last_run_at, last_job_id, paused,
	priority, group_key, overlap, catch_up FROM queue.schedules ORDER BY name};
is($standby->safe_psql('restored', $cols), $standby->safe_psql('one', $cols),
	'the schedules are restored as they were');
is($standby->safe_psql('restored', q{SELECT queue.resume_schedule('every-second') > now()}), 't',
	'a restored schedule can be resumed');

$standby->stop;
done_testing();
