# test/t/015_slow_owner_code.pl: code of one queue's owner does not stop
# the upkeep of the other queues.
#
# A role that owns queue so_slow (it has every right to put triggers on
# its tables) makes the promotion of its scheduled jobs sleep forever.
# The worker visits so_slow first (queues in the order they were made):
# its promotion used to sleep with it, so that so_fast's scheduled job
# stayed scheduled, and its listeners heard nothing, for as long as the
# owner liked (found by an attacker's review).  Now a queue's upkeep lasts
# at most queue.upkeep_timeout: the worker logs that it skipped so_slow,
# goes on, and so_fast's job is promoted when it falls due.  The same
# holds for the ticks of schedules, also when the owner's code catches the
# cancel.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use QueueTest;

my $node = PostgreSQL::Test::Cluster->new('slow_owner_code');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'queue'
queue.worker_naptime = 500
queue.upkeep_timeout = 300
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION queue;
CREATE ROLE so_owner LOGIN;
GRANT CREATE ON SCHEMA public TO so_owner;
SELECT queue.create('so_slow');
SELECT queue.set_owner('so_slow', 'so_owner');
SELECT queue.create('so_fast');
SET ROLE so_owner;
CREATE FUNCTION public.so_stall() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state = 'scheduled' AND NEW.state = 'ready' THEN
        PERFORM pg_sleep(1000000);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER so_stall BEFORE UPDATE ON queue.q_so_slow FOR EACH ROW EXECUTE FUNCTION public.so_stall();
});
my $slow_qno = $node->safe_psql('postgres',
	q{SELECT qno FROM queue.queue_config WHERE name = 'so_slow'});

$node->safe_psql('postgres',
	q{SELECT queue.enqueue('so_slow', '{}', run_at => now() + interval '500 ms')});
my $fast_job = $node->safe_psql('postgres',
	q{SELECT queue.enqueue('so_fast', '{}', run_at => now() + interval '2 seconds')});
my $due = time + 2;

# Due after 2 s; a pass gives up on so_slow after 0.3 s: 6 s is room
# enough on a loaded machine, and the owner's sleep never ends.
my $waited = poll_for($node, 'postgres',
	qq{SELECT state FROM queue.jobs WHERE id = $fast_job}, 'ready', 10);
ok(defined $waited && time - $due < 6,
	"so_fast's job is promoted while so_slow's owner's trigger sleeps in every upkeep of so_slow")
  or diag(sprintf('%.1f s after it fell due', time - $due));
ok( $node->log_contains(
		qr/queue worker skipped queue number $slow_qno: its upkeep took longer than queue.upkeep_timeout/),
	'the worker logs that it skipped so_slow');
is($node->safe_psql('postgres', q{SELECT state FROM queue.jobs WHERE queue = 'so_slow'}),
	'scheduled', "so_slow's job stays scheduled (its promotion rolled back)");

$node->safe_psql('postgres', q{SET lock_timeout = '5s'; DROP TRIGGER so_stall ON queue.q_so_slow});
ok( defined poll_for($node, 'postgres',
		q{SELECT state FROM queue.jobs WHERE queue = 'so_slow'}, 'ready', 10),
	"once the trigger is gone, so_slow's job is promoted too");

# A trigger that catches the cancel and goes on sleeping: a schedule's
# tick, which enqueues into so_slow, counts as having taken too long
# (it used to go through, 3 s late, holding up the other schedules), and
# the other schedule, on so_fast, ticks on meanwhile.
$node->safe_psql(
	'postgres', q{
SET ROLE so_owner;
CREATE FUNCTION public.so_swallow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('application_name', 'so_owner was here', false);
    BEGIN
        PERFORM pg_sleep(1000000);
    EXCEPTION WHEN query_canceled THEN
        PERFORM pg_sleep(3);
    END;
    RETURN NEW;
END
$$;
CREATE TRIGGER so_swallow BEFORE INSERT ON queue.q_so_slow FOR EACH ROW EXECUTE FUNCTION public.so_swallow();
RESET ROLE;
SELECT queue.schedule('so-slow', 'so_slow', every => '1 second');
SELECT queue.schedule('so-fast', 'so_fast', every => '1 second');
});
ok( defined poll_for($node, 'postgres',
		q{SELECT last_error FROM queue.schedules WHERE name = 'so-slow'},
		'firing the tick took longer than queue.upkeep_timeout', 20),
	"a tick of so_slow's schedule whose trigger catches the cancel fails");
is($node->safe_psql('postgres', q{SELECT count(*) FROM queue.jobs WHERE queue = 'so_slow'}),
	'1', 'and enqueues nothing (the one job is the scheduled one from before)');
is($node->safe_psql('postgres',
		q{SELECT string_agg(application_name, ',') FROM pg_stat_activity WHERE backend_type = 'queue worker'}),
	'queue worker', "the worker's application_name is its own again after the owner's code set it");
sleep 4;
my ($fast_ticks, $fast_late) = split /\|/, $node->safe_psql('postgres',
	q{SELECT count(*), max(enqueued_at - run_at) < interval '1 second' FROM queue.jobs
	   WHERE queue = 'so_fast' AND run_at > now() - interval '4 seconds'});
ok($fast_ticks >= 3 && $fast_late eq 't',
	"so_fast's schedule ticks on time meanwhile ($fast_ticks jobs in 4 s, each less than 1 s late)");
$node->safe_psql('postgres', q{SELECT queue.unschedule('so-slow'), queue.unschedule('so-fast')});

# Code that catches every cancel keeps the worker forever; SIGTERM (a
# shutdown, pg_terminate_backend) still ends it at once (it used to wait
# for the pass to end, which it never did).
$node->safe_psql(
	'postgres', q{
SELECT queue.create('so_stuck');
SELECT queue.set_owner('so_stuck', 'so_owner');
SET ROLE so_owner;
CREATE FUNCTION public.so_forever() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    LOOP
        BEGIN
            PERFORM pg_sleep(10);
        EXCEPTION WHEN query_canceled THEN
            NULL;
        END;
    END LOOP;
END
$$;
CREATE TRIGGER so_forever BEFORE INSERT ON queue.q_so_stuck FOR EACH ROW EXECUTE FUNCTION public.so_forever();
RESET ROLE;
SELECT queue.schedule('so-stuck', 'so_stuck', every => '1 second');
});
my $stuck_sql = q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker' AND wait_event = 'PgSleep'};
ok(defined poll_for($node, 'postgres', qq{SELECT count(*) FROM ($stuck_sql) w}, '1', 10),
	"the worker runs the owner's code that catches every cancel");
my $stuck_pid = $node->safe_psql('postgres', $stuck_sql);
# waits for the schedule's row, which the stuck worker holds
my $remover = QueueTestSession->new($node, 'postgres', 'remover');
$remover->send(q{SELECT queue.unschedule('so-stuck')});
sleep 0.5;
$node->safe_psql('postgres', qq{SELECT pg_terminate_backend($stuck_pid)});
ok(defined poll_for($node, 'postgres', qq{SELECT count(*) FROM pg_stat_activity WHERE pid = $stuck_pid}, '0', 5),
	'SIGTERM ends the worker at once');
my ($removed) = $remover->wait(10);
is($removed, 't', 'the schedule is removed once the worker is gone');
$remover->close;
$node->safe_psql('postgres', q{SET lock_timeout = '5s'; DROP TRIGGER so_forever ON queue.q_so_stuck});

settle($node);
$node->stop;
done_testing();
