# test/t/003_worker.pl: the background worker, observed from outside.
#
# A launcher and one worker per database with the extension, started for a
# database created after server start as soon as CREATE EXTENSION commits
# (and for a database copied from a template that has the extension), none
# lasting elsewhere; orphaned claims (consumer session terminated) and
# expired leases returned without queue.tick(); the archive ring turned and
# segments past retention truncated; scheduled and backed-off
# jobs promoted on time, also among 100 queues, and announced with one
# coalesced NOTIFY per committing transaction (none for rolled back work,
# none while no session LISTENs on a queue channel);
# claim(wait =>) woken by a committing producer, with its xmin released
# while it sleeps, cancellable, and aware of pause and resume; jobs
# survive a fast restart and crash recovery; DROP EXTENSION, DROP
# DATABASE and CREATE DATABASE ... TEMPLATE are not blocked by the worker;
# a configuration reload reaches the worker, and leases that need
# nothing of it yet do not wake it;
# a terminated worker or a terminated or cancelled launcher comes back
# without duplicating workers; without shared_preload_libraries the
# extension says so and claim(wait =>) refuses.  Finally no worker or
# launcher logged an error.
#
# Times are measured with Time::HiRes; notifications are received by a small
# python3/psycopg2 listener that stamps each one with the time it arrived.

use strict;
use warnings;

use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueTest;

# ---------------------------------------------------------------- helpers

sub workers_sql
{
	my ($db) = @_;
	return qq{SELECT count(*) FROM pg_stat_activity
	           WHERE backend_type = 'queue worker' AND datname = '$db'};
}

my $launcher_sql =
  q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue launcher'};

# Client backends we terminate (or that a restart terminates): their
# "terminating connection due to administrator command" lines are expected.
my %terminated_pids;

# ---------------------------------------------------------------- setup

my $python_ok =
  system('python3', '-c', 'import psycopg2') == 0;
ok($python_ok, 'python3 with psycopg2 is available for the LISTEN session')
  or die 'python3 -c "import psycopg2" failed: install python3-psycopg2';

my $node = PostgreSQL::Test::Cluster->new('worker');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'queue'
log_line_prefix = '%m [%p] [%b] %q%a '
# hold_worker keeps the worker blocked on a row lock: no timeout ends the wait
queue.upkeep_lock_timeout = '1h'
});
$node->start;

my $mon = QueueTestSession->new($node, 'postgres', 'monitor');

# ---------------------------------------------------------------- 1. start

ok(defined poll_for($mon, $launcher_sql, '1', 10), 'the launcher runs');

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('postgres', 'CREATE DATABASE noext');

$node->safe_psql('app', 'CREATE EXTENSION queue');
my $took = poll_for($mon, workers_sql('app'), '1', 10);
ok(defined $took && $took < 2,
	'a worker serves a database created after server start, within 2 s of CREATE EXTENSION');
note sprintf('worker started %.3f s after CREATE EXTENSION returned', $took // -1);
is($mon->query(qq{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker'
	AND datname = 'app' AND application_name = 'queue worker'}),
	'1', 'the worker reports application_name "queue worker"');

# postgres got a worker when the launcher started (it asks every database);
# it must have left, and noext (created later, no extension) gets none.
ok(defined poll_for($mon, workers_sql('postgres'), '0', 10),
	'no worker stays in a database without the extension (postgres)');
sleep 1;
is( $mon->query(q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker'
	AND datname IS DISTINCT FROM 'app'}),
	'0', 'one second later, the only queue worker is the one of app');

my $app = QueueTestSession->new($node, 'app', 'app_monitor');

# ---------------------------------------------------------------- 2. orphans

$app->query(q{SELECT queue.create('orph', lease => '1 hour')});
$app->query(q{SELECT queue.enqueue('orph', jsonb_build_object('n', i)) FROM generate_series(1, 3) i});

my $listen = listener_start($node, 'app',
	qw(queue_orph queue_lease queue_sched queue_rb queue_sp1 queue_sp2 queue_many queue_back));

my $claimer = QueueTestSession->new($node, 'app', 'orphan_claimer');
is($claimer->query(q{SELECT count(*) FROM queue.claim('orph', 3)}),
	'3', 'a session claims 3 jobs (autocommit)');
is( $app->query(q{SELECT count(*) FROM queue.jobs WHERE queue = 'orph' AND state = 'running'
	AND attempt = 1 AND lease_until > now() + interval '50 minutes'}),
	'3', 'they are running under a lease of 1 hour');
listener_take($listen);

$terminated_pids{ $claimer->{pid} } = 1;
my $t0 = time;
is($mon->query("SELECT pg_terminate_backend($claimer->{pid})"),
	't', 'the claiming session is terminated');
$took = poll_for(
	$app, q{SELECT count(*) FROM queue.jobs WHERE queue = 'orph' AND state = 'ready'
	AND attempt = 1 AND last_error = 'consumer disconnected' AND lease_until IS NULL},
	'3', 10);
my $orphan_time = defined $took ? time - $t0 : -1;
ok(defined $took && $orphan_time < 2,
	'its 3 jobs are ready again within 2 s (attempt 1, consumer disconnected), without tick()');
note sprintf('orphans returned %.3f s after pg_terminate_backend', $orphan_time);
my ($orph_note) = listener_wait($listen, 'queue_orph', 2);
ok(defined $orph_note, 'listeners of the queue are notified of the returned jobs');
is( $app->query(q{SELECT string_agg(attempt::text, ',') FROM queue.claim('orph', 3)}),
	'2,2,2', 'the 3 jobs are claimable again (attempt 2)');
$claimer->close;

# Many claimers exit at once: their wakeups fold into one or two looks,
# and every job comes back.
$app->query(q{SELECT queue.enqueue('orph', jsonb_build_object('m', i)) FROM generate_series(1, 12) i});
my @claimers = map { QueueTestSession->new($node, 'app', "orphan_claimer_$_") } 1 .. 12;
is( join(',', map { scalar $_->query(q{SELECT count(*) FROM queue.claim('orph', 1)}) } @claimers),
	join(',', (1) x 12), '12 sessions claim a job each (autocommit)');
$terminated_pids{ $_->{pid} } = 1 for @claimers;
my $claimer_pids = join(',', map { $_->{pid} } @claimers);
$t0 = time;
is($mon->query("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM unnest('{$claimer_pids}'::int[]) pid"),
	'12', 'the 12 sessions are terminated at once');
$took = poll_for(
	$app, q{SELECT count(*) FROM queue.jobs WHERE queue = 'orph' AND state = 'ready'
	AND payload ? 'm' AND last_error = 'consumer disconnected'},
	'12', 10);
$orphan_time = defined $took ? time - $t0 : -1;
ok(defined $took && $orphan_time < 2, 'their 12 jobs are ready again within 2 s');
note sprintf('12 sessions\' orphans returned %.3f s after pg_terminate_backend', $orphan_time);
$_->close for @claimers;

# ---------------------------------------------------------------- 3. lease

$app->query(q{SELECT queue.create('lease', max_attempts => 2)});
my $lease_id = $app->query(q{SELECT queue.enqueue('lease', '{"l": 1}')});
my $leaser = QueueTestSession->new($node, 'app', 'leaser');
listener_take($listen);

for my $attempt (1, 2)
{
	my $claimed = $leaser->query(
		q{SELECT id || '|' || attempt || '|' || extract(epoch FROM lease_until) FROM queue.claim('lease', lease => '300 ms')});
	my ($cid, $catt, $lease_until) = split /\|/, $claimed;
	is("$cid|$catt", "$lease_id|$attempt", "lease: claim $attempt takes the job (300 ms lease, committed)");
	my $want = $attempt == 1 ? 'ready|1|lease expired' : 'dead|2|lease expired';
	$took = poll_for(
		$app, qq{SELECT state || '|' || attempt || '|' || last_error FROM queue.jobs WHERE id = $lease_id},
		$want, 10);
	ok(defined $took && $took < 1.5,
		"lease: after claim $attempt the job becomes " . (split /\|/, $want)[0]
		  . ' within 1.5 s without tick()');
	note sprintf('lease %d returned %.3f s after the claim', $attempt, $took // -1);
	ok( $app->query(qq{SELECT extract(epoch FROM (history->-1->>'at')::timestamptz) >= $lease_until
		FROM queue._job WHERE id = $lease_id}) eq 't',
		"lease: claim $attempt was not returned before its lease ran out");
	is($leaser->query('SELECT 1'), '1', 'lease: the claiming session is still connected');
	if ($attempt == 1)
	{
		my ($n) = listener_wait($listen, 'queue_lease', 2);
		ok(defined $n, 'lease: listeners are notified of the returned job');
	}
}
$leaser->close;

# ------------------------------------------------------- 3b. archive ring
# The worker's cleanup pass (every 10 s) turns a queue's archive ring and
# truncates segments past retention, without tick().  The segment's times
# are set back by hand rather than waited for.

$app->query(q{SELECT queue.create('ring', retention => '1 hour')});
$app->query(q{SELECT queue.enqueue('ring', jsonb_build_object('n', i)) FROM generate_series(1, 2) i});
is($app->query(q{SELECT count(*) FILTER (WHERE queue.complete(id)) FROM queue.claim('ring', 2)}),
	'2', 'ring: 2 jobs completed into the archive');
$app->query(q{UPDATE queue.queue_config SET archive_since[1] = now() - interval '21 minutes'
	WHERE name = 'ring'});
$took = poll_for($app, q{SELECT archive_seg FROM queue.queue_config WHERE name = 'ring'}, '1', 25);
ok(defined $took, 'ring: segment 0 took jobs for over retention / 3: the worker turns to segment 1');
is($app->query(q{SELECT count(*) FROM queue."a_ring$0"}), '2', 'ring: and removes nothing');
$app->query(q{SELECT queue.enqueue('ring', '{"n": 3}')});
$app->query(q{SELECT queue.complete(id) FROM queue.claim('ring')});
is($app->query(q{SELECT count(*) FROM queue."a_ring$1"}), '1',
	'ring: a job finished after the turn goes to segment 1');
$app->query(q{UPDATE queue.queue_config SET archive_since[2] = now() - interval '61 minutes'
	WHERE name = 'ring'});
$took = poll_for($app, q{SELECT count(*) FROM queue."a_ring$0"}, '0', 25);
ok(defined $took, 'ring: segment 0 stopped taking jobs over retention ago: the worker empties it');
is($app->query(q{SELECT string_agg(payload->>'n', ',') FROM queue.archive WHERE queue = 'ring'}),
	'3', 'ring: the job in segment 1 is kept');
$app->query(q{SELECT queue.drop('ring')});

# ------------------------------------ 3c. a queue owned by an ordinary role
# Upkeep runs as the owner of the queue's tables.  One that is not a
# superuser may read queue_config but not lock or change it, and cannot
# see other roles' sessions in pg_stat_activity: the worker must still
# return expired leases (and only those: the claimer is alive), promote
# scheduled jobs and turn the archive ring.

$app->query(q{CREATE ROLE queue_test_owner NOLOGIN});
$app->query(q{SELECT queue.create('owned', retention => '1 hour')});
$app->query(q{SELECT queue.set_owner('owned', 'queue_test_owner')});
is( $app->query(
		q{SELECT count(*) FILTER (WHERE relowner = 'queue_test_owner'::regrole) || '/' || count(*)
	FROM pg_class WHERE relnamespace = 'queue'::regnamespace AND relkind IN ('r', 'p', 'S')
	AND relname ~ '^[qas]_owned($|\$)'}),
	'8/8', 'owned: set_owner gives the queue\'s tables, segments and sequence to the role');
my $owned_id = $app->query(q{SELECT queue.enqueue('owned', '{"n": 1}')});
is($app->query(q{SELECT id FROM queue.claim('owned', lease => '500 ms')}),
	$owned_id, 'owned: a superuser session claims a job for 500 ms (committed)');
$took = poll_for(
	$app, qq{SELECT state || '|' || last_error FROM queue.jobs WHERE id = $owned_id},
	'ready|lease expired', 10);
ok(defined $took && $took < 3,
	'owned: the worker returns the job when its lease runs out, not before (the claimer is alive)');
my $owned_sched = $app->query(q{SELECT queue.enqueue('owned', '{"n": 2}', delay => '300 ms')});
$took = poll_for($app, qq{SELECT state FROM queue.jobs WHERE id = $owned_sched}, 'ready', 10);
ok(defined $took && $took < 3, 'owned: the worker promotes a scheduled job');
is($app->query(q{SELECT count(*) FILTER (WHERE queue.complete(id)) FROM queue.claim('owned', 2)}),
	'2', 'owned: 2 jobs completed into the archive');
$app->query(q{UPDATE queue.queue_config SET archive_since[1] = now() - interval '21 minutes'
	WHERE name = 'owned'});
$took = poll_for($app, q{SELECT archive_seg FROM queue.queue_config WHERE name = 'owned'}, '1', 25);
ok(defined $took, 'owned: the worker turns the archive ring');

# The owner's trigger changes settings during upkeep, so that the worker's
# own statements would afterwards resolve '=' to an operator of the owner's
# that makes the owner superuser.  The worker undoes the settings and pins
# its own search_path.
$app->query(q{CREATE SCHEMA queue_test_evil AUTHORIZATION queue_test_owner});
$app->query(
	q{SET ROLE queue_test_owner;
CREATE FUNCTION queue_test_evil.eq(int, int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE queue_test_owner SUPERUSER';
    END IF;
    RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR queue_test_evil.= (LEFTARG = int, RIGHTARG = int, FUNCTION = queue_test_evil.eq);
CREATE FUNCTION queue_test_evil.t() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'queue_test_evil, pg_catalog', false);
    RETURN NULL;
END $$;
CREATE TRIGGER evil BEFORE UPDATE ON queue.q_owned FOR EACH STATEMENT EXECUTE FUNCTION queue_test_evil.t();
RESET ROLE});
my $evil_id = $app->query(q{SELECT queue.enqueue('owned', '{"n": 3}', delay => '300 ms')});
$took = poll_for($app, qq{SELECT state FROM queue.jobs WHERE id = $evil_id}, 'ready', 10);
ok(defined $took, 'owned: upkeep runs with the owner\'s trigger in place');
sleep 2;    # more passes, over other queues too
is($app->query(q{SELECT rolsuper FROM pg_roles WHERE rolname = 'queue_test_owner'}),
	'f', 'owned: settings the owner\'s code changed during upkeep do not make it superuser');
$app->query(q{SELECT queue.drop('owned')});
$app->query(q{SET client_min_messages = warning; DROP SCHEMA queue_test_evil CASCADE; RESET client_min_messages});
$app->query(q{DROP ROLE queue_test_owner});

# ------------------------------------------------- 4. scheduled jobs, NOTIFY

# (Every upkeep pass visits every queue of the database, so how late a
# scheduled job is announced grows with their number: these measurements
# are made with 4 queues in app, and again below with 100.)
$app->query(q{SELECT queue.create(q) FROM unnest(ARRAY['sched', 'back']) q});
# (creating a queue may wake its listeners: let that pass)
listener_collect_until($listen, time + 0.3);

my $sched_id = $app->query(
	q{SELECT queue.enqueue('sched', '{"s": 1}', run_at => clock_timestamp() + interval '1 s')});
my $run_at = $app->query(qq{SELECT extract(epoch FROM run_at) FROM queue._job WHERE id = $sched_id});
my ($notified, $seen) = listener_wait($listen, 'queue_sched', 5);
my @early = grep { $_->[0] eq 'queue_sched' && $_->[1] < $run_at } @$seen;
ok(defined $notified, 'scheduled: a notification arrives for the scheduled job');
is(scalar(@early), 0, 'scheduled: no notification before run_at');
$notified //= 0;
my $lateness = $notified - $run_at;
ok($lateness >= 0, 'scheduled: the notification arrives after run_at');
ok($lateness <= 0.2, 'scheduled: the notification arrives within 200 ms of run_at');
note sprintf('scheduled job: notification %.1f ms after run_at', $lateness * 1000);
is( $app->query(qq{SELECT state FROM queue._job WHERE id = $sched_id}),
	'ready', 'scheduled: the worker made the job ready');
is($app->query(q{SELECT id FROM queue.claim('sched')}),
	$sched_id, 'scheduled: the job is claimable');

# a backed-off retry comes due and is announced like a scheduled job
$app->query(q{SELECT queue.enqueue('back', '{"b": 1}')});
listener_wait($listen, 'queue_back', 2);    # the enqueue's
my $back_id = $app->query(q{SELECT id FROM queue.claim('back')});
listener_take($listen);
is($app->query(qq{SELECT queue.fail($back_id, 'transient', retry_in => '500 ms')}),
	'retry', 'backoff: failed job will be retried');
my $back_at = $app->query(qq{SELECT extract(epoch FROM run_at) FROM queue._job WHERE id = $back_id});
($notified) = listener_wait($listen, 'queue_back', 5);
ok( defined $notified && $notified >= $back_at && $notified - $back_at <= 0.2,
	'backoff: notified when the retry comes due (within 200 ms)');
note sprintf('backoff retry: notification %.1f ms after run_at', (($notified // 0) - $back_at) * 1000);

# a database with 100 queues: one of them has a scheduled job (made 25 per
# transaction: one transaction may make only as many as half the lock
# table holds, 51 on this cluster)
$node->safe_psql('postgres', 'CREATE DATABASE wide');
$node->safe_psql('wide',
	join("\n", 'CREATE EXTENSION queue;',
		map { "SELECT count(queue.create('w' || i)) FROM generate_series($_ * 25 + 1, $_ * 25 + 25) i;" } 0 .. 3));
my $wide = QueueTestSession->new($node, 'wide', 'wide_monitor');
my $wide_listen = listener_start($node, 'wide', 'queue_w50');
for my $try (1, 2)
{
	# let the notifications of creating the queues pass: 1 s of quiet
	my $quiet_deadline = time + 10;
	while (time < $quiet_deadline
		&& listener_collect_until($wide_listen, time + 1))
	{
	}
	my $wid = $wide->query(
		q{SELECT queue.enqueue('w50', '{}', run_at => clock_timestamp() + interval '1 s')});
	my $wat = $wide->query(qq{SELECT extract(epoch FROM run_at) FROM queue._job WHERE id = $wid});
	# (the first notification from at or after run_at: a late one for
	# creating the queues may still come before)
	undef $notified;
	my $deadline = time + 5;
	while (!defined $notified && time < $deadline)
	{
		($notified) = map { $_->[1] }
		  grep { $_->[0] eq 'queue_w50' && $_->[1] >= $wat } listener_take($wide_listen);
		sleep 0.005;
	}
	$notified //= 0;
	ok( $notified >= $wat && $notified - $wat <= 0.2,
		"100 queues ($try): a scheduled job is announced within 200 ms of run_at");
	note sprintf('100 queues (%d): notification %.1f ms after run_at', $try, ($notified - $wat) * 1000);
}
listener_stop($wide_listen);

# Commits that mark many queues at once: 40 reach the worker as a list of
# marked queues, 100 overflow that list (64) and make the worker look at
# every queue.  The second and third commits mark queues whose last
# notification is less than queue.notify_busy_interval old with no claim
# since: those marks are kept, and sent a little later, from the worker's
# scan (100) or from its list of kept marks (the last 40).  Every queue is
# notified each time.
my $all_listen = listener_start($node, 'wide', map { "queue_w$_" } 1 .. 100);
for my $n (40, 100, 40)
{
	listener_take($all_listen);
	$wide->query(qq{SELECT count(queue.enqueue('w' || i, '{}')) FROM generate_series(1, $n) i});
	my %heard;
	my $deadline = time + 5;
	while (keys %heard < $n && time < $deadline)
	{
		$heard{ $_->[0] } = 1 for listener_take($all_listen);
		sleep 0.01;
	}
	is(scalar(grep { $heard{"queue_w$_"} } 1 .. $n), $n,
		"one commit enqueues into $n queues: each of their listeners is notified");
}
listener_stop($all_listen);
$wide->close;
# (its worker's passes would load the machine for the rest of the test)
$node->safe_psql('postgres', 'DROP DATABASE wide');

$app->query(q{SELECT queue.create(q) FROM unnest(ARRAY['rb', 'sp1', 'sp2', 'many']) q});
listener_collect_until($listen, time + 0.3);

# a rolled-back enqueue does not notify
listener_take($listen);
$app->query(q{BEGIN; SELECT queue.enqueue('rb', '{"rb": 1}'); ROLLBACK});
my @got = grep { $_->[0] eq 'queue_rb' } listener_collect_until($listen, time + 0.5);
is(scalar(@got), 0, 'rollback: no notification within 500 ms');
$app->query(q{SELECT queue.enqueue('rb', '{"rb": 2}')});
($notified) = listener_wait($listen, 'queue_rb', 2);
ok(defined $notified, 'rollback: (control) a committed enqueue on the same queue notifies');

# an enqueue in a rolled back savepoint does not notify, even though the
# transaction commits another queue's job
listener_take($listen);
$app->query(
	q{BEGIN; SAVEPOINT s; SELECT queue.enqueue('sp1', '{"sp": 1}'); ROLLBACK TO SAVEPOINT s;
	  SELECT queue.enqueue('sp2', '{"sp": 2}'); COMMIT});
($notified, $seen) = listener_wait($listen, 'queue_sp2', 2);
ok(defined $notified, 'savepoint: the committed queue is notified');
push @$seen, listener_collect_until($listen, time + 0.5);
is(scalar(grep { $_->[0] eq 'queue_sp1' } @$seen),
	0, 'savepoint: the rolled back enqueue is not notified');
is($app->query(q{SELECT count(*) FROM queue.jobs WHERE queue = 'sp1'}),
	'0', 'savepoint: and its job does not exist');

# 100 enqueues in one transaction: one notification
listener_take($listen);
$app->query(join("\n", 'BEGIN;',
	(map { "SELECT queue.enqueue('many', '{\"m\": $_}');" } 1 .. 100), 'COMMIT;'));
($notified, $seen) = listener_wait($listen, 'queue_many', 2);
push @$seen, listener_collect_until($listen, time + 0.7);
my $nmany = grep { $_->[0] eq 'queue_many' } @$seen;
is($nmany, 1, 'a transaction enqueuing 100 jobs sends exactly one notification');

# --------------------------------------- 4a. no NOTIFY for busy consumers
#
# A consumer waits for a notification only after a claim that came back
# short.  So while every claim of a queue has come back full since its last
# notification, its listeners are notified at most once per
# queue.notify_busy_interval; a claim that comes back short has the worker
# notify at once.  With the interval at an hour, what is held back stays
# held back for the whole test.
$node->append_conf('postgresql.conf', "queue.notify_busy_interval = '1h'");
$node->reload;
my $busy_listen = listener_start($node, 'app', 'queue_busy');
$app->query(q{SELECT queue.create('busy')});
listener_collect_until($busy_listen, time + 1);    # the reload reached the worker
listener_take($busy_listen);
is($app->query(q{SELECT count(*) FROM queue.claim('busy')}), '0', 'busy: a consumer finds the queue empty');
$app->query(q{SELECT queue.enqueue('busy', '{"b": 0}')});
ok(defined listener_wait($busy_listen, 'queue_busy', 5), 'busy: so the next commit is notified at once');
$app->query(qq{SELECT queue.enqueue('busy', '{"b": $_}')}) for 1 .. 20;
is($app->query(q{SELECT count(*) FROM queue.claim('busy', 5)}), '5', 'busy: a claim comes back full');
@got = grep { $_->[0] eq 'queue_busy' } listener_collect_until($busy_listen, time + 1);
is(scalar(@got), 0, 'busy: no notification while no claim came back short');
my $short_at = time;
is($app->query(q{SELECT count(*) FROM queue.claim('busy', 100)}), '16', 'busy: a claim comes back short');
($notified) = listener_wait($busy_listen, 'queue_busy', 5);
ok(defined $notified && $notified >= $short_at,
	'busy: the notification held back is sent when a claim comes back short');
is($app->query(q{SELECT count(*) FROM queue.claim('busy', 10)}), '0', 'busy: the queue is drained');
listener_take($busy_listen);
$app->query(q{SELECT queue.enqueue('busy', '{"b": 21}')});
ok(defined listener_wait($busy_listen, 'queue_busy', 5),
	'busy: after an empty claim the next commit is notified at once');
$app->query(q{SELECT queue.enqueue('busy', '{"b": 22}')});
@got = grep { $_->[0] eq 'queue_busy' } listener_collect_until($busy_listen, time + 1);
is(scalar(@got), 0, 'busy: and the one after that, with no claim between, is held back');
$node->append_conf('postgresql.conf', "queue.notify_busy_interval = 0");
$node->reload;
sleep 1;
listener_take($busy_listen);
$app->query(qq{SELECT queue.enqueue('busy', '{"b": $_}'); SELECT pg_sleep(0.1)}) for 23 .. 25;
@got = grep { $_->[0] eq 'queue_busy' } listener_collect_until($busy_listen, time + 1);
ok(@got >= 3, 'notify_busy_interval = 0: every commit is notified (' . scalar(@got) . ')');
$node->append_conf('postgresql.conf', "queue.notify_busy_interval = '20ms'");
$node->reload;
listener_stop($busy_listen);

# ------------------------------------------- 4b. NOTIFY only with listeners
#
# A NOTIFY transaction takes an xid, so the worker's notifications show in
# the xids consumed while a session commits N single-job enqueues: exactly
# N when nobody in the database LISTENs on a queue channel, more when
# somebody does.  (xids are cluster-wide: the rest of the cluster is idle
# here, and a stray xid would make "exactly" fail, never pass.)
$node->safe_psql('postgres', 'CREATE DATABASE quiet');
$node->safe_psql('quiet', q{CREATE EXTENSION queue; SELECT queue.create('qq')});
ok(defined poll_for($mon, workers_sql('quiet'), '1', 10), 'quiet: its worker runs');
my $qp = QueueTestSession->new($node, 'quiet', 'quiet_producer');
my $ql = QueueTestSession->new($node, 'quiet', 'quiet_listener');

# xids consumed by others while $qp commits 20 enqueues: the fewest of
# three tries (a stray xid elsewhere in the cluster, say a worker's first
# pass, must not fail a test of "none")
sub worker_xids
{
	my $fewest;
	for (1 .. 3)
	{
		my $x0 = $qp->query('SELECT txid_current()');
		# a commit every 25 ms: more than queue.notify_busy_interval apart,
		# so that each is notified though nobody claims
		$qp->query(q{SELECT queue.enqueue('qq', '{}'); SELECT pg_sleep(0.025)}) for 1 .. 20;
		sleep 0.3;
		my $x1 = $qp->query('SELECT txid_current()');
		$fewest = $x1 - $x0 - 21 if !defined $fewest || $x1 - $x0 - 21 < $fewest;
		last if $fewest == 0;
	}
	return $fewest;
}
is(worker_xids(), 0, 'no listener: the worker sends no NOTIFY');
$ql->query('LISTEN other_channel');
is(worker_xids(), 0, 'a listener on a channel that is not a queue\'s: no NOTIFY');
$ql->query('LISTEN queue_qq');
ok(worker_xids() >= 3, 'a listener on queue_qq: the worker sends NOTIFYs');
like(scalar($ql->query('SELECT 1')), qr/Asynchronous notification "queue_qq"/,
	'and the listener receives them');
$ql->query('BEGIN; UNLISTEN queue_qq; ROLLBACK');
ok(worker_xids() >= 3, 'UNLISTEN rolled back: still notified');
$ql->query('BEGIN; SAVEPOINT s; UNLISTEN *; ROLLBACK TO SAVEPOINT s; COMMIT');
ok(worker_xids() >= 3, 'UNLISTEN in a rolled back savepoint: still notified');
$ql->query('UNLISTEN queue_qq');
is(worker_xids(), 0, 'UNLISTEN queue_qq committed: no more NOTIFY');
$ql->query('BEGIN; UNLISTEN *; LISTEN queue_qq; COMMIT');
ok(worker_xids() >= 3, 'UNLISTEN * then LISTEN in one transaction: notified');
$ql->query('SELECT 1');    # (let psql print what arrived)
$ql->query('DISCARD ALL');
is(worker_xids(), 0, 'DISCARD ALL: no more NOTIFY');
$ql->query('BEGIN; LISTEN queue_qq; ROLLBACK');
is(worker_xids(), 0, 'a rolled back LISTEN: no NOTIFY');
$ql->query('BEGIN; SAVEPOINT s; LISTEN queue_qq; ROLLBACK TO SAVEPOINT s; COMMIT');
is(worker_xids(), 0, 'a LISTEN in a rolled back savepoint: no NOTIFY');
$ql->query('LISTEN queue_qq');
ok(worker_xids() >= 3, 'LISTEN again: notified again');
my $ql_pid = $ql->{pid};
$ql->close;
ok(defined poll_for($mon, "SELECT count(*) FROM pg_stat_activity WHERE pid = $ql_pid", '0', 10),
	'the listener disconnected');
is(worker_xids(), 0, 'the listener gone: no more NOTIFY');
$qp->close;
$node->safe_psql('postgres', 'DROP DATABASE quiet');

# ---------------------------------------------------------------- 5. wait

$app->query(q{SELECT queue.create('w')});
my $waiter = QueueTestSession->new($node, 'app', 'waiter');
my $wait_state_sql = qq{SELECT wait_event_type || '|' || coalesce(backend_xmin::text, 'null')
	FROM pg_stat_activity WHERE pid = $waiter->{pid}};

$t0 = time;
$waiter->send(q{SELECT payload FROM queue.claim('w', 1, wait => '5 s')});
$took = poll_for($mon, qq{SELECT wait_event_type FROM pg_stat_activity WHERE pid = $waiter->{pid}},
	'Extension', 3);
ok(defined $took, 'wait: the waiting claim shows wait_event_type Extension');
is($mon->query($wait_state_sql), 'Extension|null',
	'wait: a plain SELECT from claim(wait) holds no xmin while it sleeps');
sleep(0.3 - (time - $t0)) if time - $t0 < 0.3;
my $t_enq0 = time;
my $w1 = $node->safe_psql('app', q{SELECT queue.enqueue('w', '{"w": 1}')});
my $t_enq1 = time;
my $enq_at = $app->query(qq{SELECT extract(epoch FROM enqueued_at) FROM queue.jobs WHERE id = $w1});
my ($wout, $werr, $wdone) = $waiter->wait(6);
is($wout, '{"w": 1}', 'wait: the waiting claim returns the new job');
ok(defined $wdone && $wdone - $t_enq0 < 1,
	'wait: it returns less than 1 s after the enqueue');
my $claimed_at = $app->query(qq{SELECT extract(epoch FROM claimed_at) FROM queue.jobs WHERE id = $w1});
is($app->query(q{SELECT count(*) FROM queue.jobs WHERE queue = 'w' AND state <> 'running'}),
	'0', 'wait: nothing else is left in the queue');
note sprintf('claim(wait) woke %.1f ms after the enqueue returned (%.1f ms after it started;'
	  . ' server side claimed_at - enqueued_at = %.1f ms)',
	(($wdone // 0) - $t_enq1) * 1000, (($wdone // 0) - $t_enq0) * 1000,
	($claimed_at - $enq_at) * 1000);

# inside a transaction block the snapshot stays (documented limitation)
$waiter->send(q{BEGIN; SELECT payload FROM queue.claim('w', 1, wait => '3 s')});
$took = poll_for($mon, qq{SELECT wait_event_type FROM pg_stat_activity WHERE pid = $waiter->{pid}},
	'Extension', 3);
ok(defined $took, 'wait in BEGIN: the claim is waiting');
like($mon->query($wait_state_sql), qr/^Extension\|\d+$/,
	'wait in BEGIN: backend_xmin is kept (documented limitation)');
$app->query(q{SELECT queue.enqueue('w', '{"w": 2}')});
($wout, $werr) = $waiter->wait(4);
is($wout, '{"w": 2}', 'wait in BEGIN: the claim returns the new job');
is(scalar($waiter->query('COMMIT')), '', 'wait in BEGIN: commit');

# A waiting claim wakes when a scheduled job falls due and promotes it
# itself, without waiting for the worker: here the worker is held up on
# another queue's config row, which its upkeep locks.  The promotion also
# learns when the next job falls due, so the next claim wakes for that one
# too, still without the worker.
# The worker is held up on queue $name's config row: its upkeep of a job
# due there waits for the lock, and it does nothing else meanwhile.
sub hold_worker
{
	my ($name) = @_;
	$app->query(qq{SELECT queue.create('$name')});
	my $blocker = QueueTestSession->new($node, 'app', 'blocker');
	$blocker->query(qq{BEGIN; SELECT 1 FROM queue.queue_config WHERE name = '$name' FOR UPDATE});
	$app->query(qq{SELECT queue.enqueue('$name', '{}', run_at => now() + interval '0.2 s')});
	return $blocker;
}

sub release_worker
{
	my ($blocker, $name) = @_;
	$blocker->query('ROLLBACK');
	$blocker->close;
	$app->query(qq{SELECT queue.drop('$name')});
}

my $blocker = hold_worker('wb');
my $worker_wait_sql = q{SELECT wait_event_type FROM pg_stat_activity
	WHERE backend_type = 'queue worker' AND datname = 'app'};
ok(defined poll_for($mon, $worker_wait_sql, 'Lock', 5),
	'wait for a scheduled job: the worker is held up on another queue');
$waiter->send(q{SELECT payload FROM queue.claim('w', 1, wait => '6 s')});
$took = poll_for($mon, qq{SELECT wait_event_type FROM pg_stat_activity WHERE pid = $waiter->{pid}},
	'Extension', 3);
ok(defined $took, 'wait for a scheduled job: the claim is waiting');
$t0 = time;
my $due_id = $app->query(q{SELECT queue.enqueue('w', '{"w": 3}', run_at => now() + interval '1.5 s')});
my $due_id2 = $app->query(q{SELECT queue.enqueue('w', '{"w": 4}', run_at => now() + interval '3 s')});
($wout, $werr, $wdone) = $waiter->wait(8);
is($wout, '{"w": 3}', 'wait for a scheduled job: the claim returns it');
ok(defined $wdone && $wdone - $t0 >= 1.4 && $wdone - $t0 < 2.5,
	'wait for a scheduled job: at its due time, not at the end of the wait');
note sprintf('a waiting claim took a job scheduled 1.5 s ahead %.1f ms after its due time',
	(($wdone // 0) - $t0 - 1.5) * 1000);
$waiter->send(q{SELECT payload FROM queue.claim('w', 1, wait => '6 s')});
($wout, $werr, $wdone) = $waiter->wait(8);
is($wout, '{"w": 4}', 'wait for the next scheduled job: the claim returns it');
ok(defined $wdone && $wdone - $t0 >= 2.9 && $wdone - $t0 < 4,
	'wait for the next scheduled job: at its due time, which the first promotion found');
is($mon->query($worker_wait_sql), 'Lock',
	'wait for a scheduled job: meanwhile the worker was still held up');
note sprintf('the next claim took a job scheduled 3 s ahead %.1f ms after its due time',
	(($wdone // 0) - $t0 - 3) * 1000);
release_worker($blocker, 'wb');
$app->query(qq{SELECT queue.complete(ARRAY[$due_id, $due_id2])});

# empty queue: returns nothing after the wait
($wout, $werr) = $waiter->query(
	q{SELECT clock_timestamp() AS t0 \gset
SELECT count(*) FROM queue.claim('w', wait => '300 ms');
SELECT extract(epoch FROM clock_timestamp() - :'t0')});
my ($wcount, $welapsed) = split /\n/, $wout;
is($wcount, '0', 'wait on an empty queue: no rows');
ok($welapsed >= 0.3, 'wait on an empty queue: returns after at least 300 ms');
ok($welapsed < 1.5, 'wait on an empty queue: and not much later');
note sprintf('claim(wait => 300 ms) on an empty queue took %.1f ms', $welapsed * 1000);

# With max_running full, a waiting claim leaves a due job alone: promoting
# it would keep it locked, and out of everyone else's sight, for as long as
# the claim waits.  The worker is held up again, so that the claim alone
# wakes at the due time; it must not have locked the job.  Once the
# worker is free it promotes the job, and the claim takes it when the
# running job finishes.
$app->query(q{SELECT queue.create('wm', max_running => 1)});
$app->query(q{SELECT queue.enqueue('wm', '{"m": 1}')});
my $m1 = $app->query(q{SELECT id FROM queue.claim('wm', 1)});
sleep(1.5);    # a worker pass: the queue's due time is known from then on
$blocker = hold_worker('wb2');
ok(defined poll_for($mon, $worker_wait_sql, 'Lock', 5), 'max_running full: the worker is held up');
my $m2 = $app->query(q{SELECT queue.enqueue('wm', '{"m": 2}', run_at => now() + interval '0.3 s')});
$waiter->send(q{SELECT payload FROM queue.claim('wm', 1, wait => '6 s')});
sleep(1);
my $probe = QueueTestSession->new($node, 'app', 'probe');
my (undef, $lock_err) = $probe->query(
	qq{BEGIN; SELECT 1 FROM queue.q_wm WHERE id = $m2 FOR UPDATE NOWAIT; ROLLBACK});
is($lock_err, '', 'max_running full: the waiting claim did not lock the due job');
is($mon->query(qq{SELECT wait_event_type FROM pg_stat_activity WHERE pid = $waiter->{pid}}),
	'Extension', 'max_running full: the claim is still waiting');
release_worker($blocker, 'wb2');
ok(defined poll_for($app, qq{SELECT state FROM queue.jobs WHERE id = $m2}, 'ready', 3),
	'max_running full: the worker made the due job ready');
$app->query(qq{SELECT queue.complete($m1)});
($wout, $werr) = $waiter->wait(6);
is($wout, '{"m": 2}', 'max_running full: the waiting claim takes the job once a slot is free');
$probe->close;
$app->query(q{SELECT queue.drop('wm')});

# statement_timeout cancels the wait
$waiter->query(q{SET statement_timeout = '200ms'});
$t0 = time;
($wout, $werr, $wdone) = $waiter->query(q{SELECT payload FROM queue.claim('w', 1, wait => '5 s')});
my $cancel_time = time - $t0;
like($werr, qr/ERROR:\s+57014: canceling statement due to statement timeout/,
	'wait: statement_timeout cancels the claim with SQLSTATE 57014');
ok($cancel_time >= 0.2 && $cancel_time < 1.5, 'wait: cancelled after about 200 ms');
note sprintf('statement_timeout 200ms: claim(wait) ended after %.1f ms', $cancel_time * 1000);
$waiter->query(q{RESET statement_timeout});

# Pausing and resuming reach a claim that is already waiting: a job
# enqueued into the paused queue wakes it, but it must see the pause and
# leave the job alone; resume wakes it again, and then it takes the job.
$app->query(q{SELECT queue.create('wp')});
$waiter->send(q{SELECT payload FROM queue.claim('wp', 1, wait => '6 s')});
ok(defined poll_for($mon, qq{SELECT wait_event_type FROM pg_stat_activity WHERE pid = $waiter->{pid}},
	'Extension', 3), 'pause: the claim is waiting');
$app->query(q{SELECT queue.pause('wp')});
my $wp1 = $app->query(q{SELECT queue.enqueue('wp', '{"p": 1}')});
sleep(0.5);
is($mon->query(qq{SELECT wait_event_type FROM pg_stat_activity WHERE pid = $waiter->{pid}}),
	'Extension', 'pause: the claim, woken by the enqueue, is still waiting');
is($app->query(qq{SELECT state FROM queue.jobs WHERE id = $wp1}), 'ready',
	'pause: it left the job of the paused queue alone');
$t0 = time;
$app->query(q{SELECT queue.resume('wp')});
($wout, $werr, $wdone) = $waiter->wait(8);
is($wout, '{"p": 1}', 'resume: the waiting claim takes the job');
ok(defined $wdone && $wdone - $t0 < 1, 'resume: less than 1 s after the resume');
$app->query(q{SELECT queue.drop('wp')});
$waiter->close;

# ---------------------------------------------------------------- 6. restart

# rr: a ready job; rs: a running job and a scheduled one; rd: a dead job
$app->query(q{SELECT queue.create('rr');
	SELECT queue.create('rs', max_attempts => 5, lease => '1 hour');
	SELECT queue.create('rd', max_attempts => 1)});
my %rid;
$rid{ready} = $app->query(q{SELECT queue.enqueue('rr', '{"r": "ready"}')});
$rid{running} = $app->query(q{SELECT queue.enqueue('rs', '{"r": "running"}')});
$rid{sched} = $app->query(q{SELECT queue.enqueue('rs', '{"r": "sched"}', run_at => now() + interval '1 hour')});
$rid{dead} = $app->query(q{SELECT queue.enqueue('rd', '{"r": "dead"}')});
is($app->query(qq{SELECT id FROM queue.claim('rd'); SELECT queue.fail($rid{dead}, 'fatal')}),
	"$rid{dead}\ndead", 'restart: a dead job');
my $rclaimer = QueueTestSession->new($node, 'app', 'restart_claimer');
is($rclaimer->query(q{SELECT id FROM queue.claim('rs')}),
	$rid{running}, 'restart: a job claimed by a connected session');

my $keep_sql = qq{SELECT id, state, attempt, run_at, last_error, payload FROM queue.jobs
	WHERE id IN ($rid{ready}, $rid{sched}, $rid{dead}) ORDER BY id};
my $running_sql = qq{SELECT state || '|' || attempt || '|' || coalesce(last_error, '') FROM queue.jobs WHERE id = $rid{running}};
my $keep = $app->query($keep_sql);
is( $app->query(qq{SELECT string_agg(state, ',' ORDER BY payload->>'r') FROM queue.jobs
	WHERE id IN ($rid{ready}, $rid{sched}, $rid{dead})}),
	'dead,ready,scheduled', 'restart: a dead, a ready and a scheduled job');
is($app->query($running_sql), 'running|1|', 'restart: the running job');

sub restart_checks
{
	my ($how, $attempt) = @_;
	$mon = QueueTestSession->new($node, 'postgres', 'monitor');
	$app = QueueTestSession->new($node, 'app', 'app_monitor');
	ok(defined poll_for($mon, $launcher_sql, '1', 10), "$how: the launcher runs again");
	ok(defined poll_for($mon, workers_sql('app'), '1', 10), "$how: the worker of app runs again");
	is($app->query($keep_sql), $keep, "$how: ready, scheduled and dead jobs unchanged");
	my $took = poll_for($app, $running_sql, "ready|$attempt|consumer disconnected", 10);
	ok(defined $took, "$how: the job whose session is gone is ready again (consumer disconnected)");
	note sprintf('%s: running job returned %.3f s after the monitor connected', $how, $took // -1);
	is($app->query(q{SELECT count(*) FROM queue.jobs WHERE queue IN ('rr', 'rs', 'rd')}),
		'4', "$how: no job lost");
	ok(defined poll_for($mon, q{SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'queue worker' AND datname IN ('postgres', 'noext')}, '0', 10),
		"$how: no worker stays in databases without the extension");
	return;
}

$mon->close;
$app->close;
listener_stop($listen);
$terminated_pids{ $rclaimer->{pid} } = 1;
settle($node, $rclaimer->{pid});
$node->restart;
$rclaimer->close;
restart_checks('fast restart', 1);

# claim it again from a session that is alive during the crash
$rclaimer = QueueTestSession->new($node, 'app', 'restart_claimer2');
is($rclaimer->query(q{SELECT id FROM queue.claim('rs', 1)}),
	$rid{running}, 'immediate stop: the job is claimable and claimed again');
$terminated_pids{ $rclaimer->{pid} } = 1;
$mon->close;
$app->close;
$node->stop('immediate');
$rclaimer->close;
$node->start;
restart_checks('crash recovery', 2);

# ------------------------------------------------ 7. DROP EXTENSION, DATABASE

$node->safe_psql('postgres', 'CREATE DATABASE dropext');
$node->safe_psql('postgres', 'CREATE DATABASE dropdb');
$node->safe_psql('dropext', q{CREATE EXTENSION queue; SELECT queue.create('x');
	SELECT queue.enqueue('x', '{}')});
$node->safe_psql('dropdb', q{CREATE EXTENSION queue; SELECT queue.create('y');
	SELECT queue.enqueue('y', '{}', run_at => now() + interval '1 hour')});
ok(defined poll_for($mon, workers_sql('dropext'), '1', 5), 'dropext has a worker');
ok(defined poll_for($mon, workers_sql('dropdb'), '1', 5), 'dropdb has a worker');
# Their first passes over: a worker stopped while it runs a queue owner's
# code leaves at once, with a FATAL (dbworker.c, worker_sigterm), which the
# log checks at the end would count; these commands find them idle.
ok( defined poll_for(
		$mon, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker'
		         AND datname IN ('dropext', 'dropdb') AND state = 'idle'}, '2', 10),
	'both are idle after their first pass');

# a template with the extension: the copy has the extension, so it must be
# served too (CREATE DATABASE must also not be blocked by the worker)
$t0 = time;
my ($ret, $out, $err) = $node->psql('postgres', 'CREATE DATABASE fromtpl TEMPLATE dropdb');
is($ret, 0, 'CREATE DATABASE ... TEMPLATE a served database succeeds') or diag($err);
ok(time - $t0 < 5, 'and promptly');
ok(defined poll_for($mon, workers_sql('fromtpl'), '1', 3),
	'a database created from a template with the extension is served by a worker');

$t0 = time;
($ret, $out, $err) = $node->psql('dropext', 'DROP EXTENSION queue CASCADE');
my $drop_time = time - $t0;
is($ret, 0, 'DROP EXTENSION queue CASCADE succeeds') or diag($err);
ok($drop_time < 5, 'DROP EXTENSION completes promptly');
note sprintf('DROP EXTENSION took %.3f s', $drop_time);
$took = poll_for($mon, workers_sql('dropext'), '0', 10);
ok(defined $took && $took < 3, 'the worker of dropext exits within 3 s');
note sprintf('worker left %.3f s after DROP EXTENSION', $took // -1);

$t0 = time;
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE dropdb');
my $dropdb_time = time - $t0;
is($ret, 0, 'DROP DATABASE of a served database succeeds') or diag($err);
ok($dropdb_time < 5, 'DROP DATABASE completes promptly');
note sprintf('DROP DATABASE took %.3f s', $dropdb_time);

$node->safe_psql('dropext', q{CREATE EXTENSION queue});
$took = poll_for($mon, workers_sql('dropext'), '1', 10);
ok(defined $took && $took < 3, 'after CREATE EXTENSION again the worker comes back');
note sprintf('worker back %.3f s after CREATE EXTENSION', $took // -1);
$node->safe_psql('dropext', q{SELECT queue.create('x2');
	SELECT queue.enqueue('x2', '{}', run_at => clock_timestamp() + interval '300 ms')});
my $dmon = QueueTestSession->new($node, 'dropext', 'dropext_mon');
ok(defined poll_for($dmon, q{SELECT state FROM queue._job}, 'ready', 3),
	'and it promotes scheduled jobs there');
$dmon->close;

# ---------------------------------------------------------------- 8. SIGHUP

my $wpid = $mon->query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'app'});
my $lpid = $mon->query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue launcher'});
$mon->query(q{ALTER SYSTEM SET queue.worker_naptime = '200ms'});
$mon->query(q{SELECT pg_reload_conf()});
is($node->safe_psql('app', 'SHOW queue.worker_naptime'), '200ms',
	'SIGHUP: a new session sees queue.worker_naptime = 200ms');
sleep 1.2;    # the worker's current sleep used the old naptime
# with a 200 ms naptime, a lease of 100 ms is returned within ~300 ms
$app->query(q{SELECT queue.create('nap', max_attempts => 3)});
my $nap_id = $app->query(q{SELECT queue.enqueue('nap', '{}')});
my $napper = QueueTestSession->new($node, 'app', 'napper');
$napper->query(q{SELECT id FROM queue.claim('nap', lease => '100 ms')});
$took = poll_for($app, qq{SELECT state FROM queue.jobs WHERE id = $nap_id}, 'ready', 5);
ok(defined $took && $took < 0.7, 'SIGHUP: the worker uses the new naptime');
note sprintf('with naptime 200ms a 100 ms lease came back after %.3f s', $took // -1);
$napper->close;
is($mon->query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'app'}),
	$wpid, 'SIGHUP: the worker keeps running (same pid)');
is($mon->query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue launcher'}),
	$lpid, 'SIGHUP: the launcher keeps running (same pid)');

# ------------------------------------------- 8a. a lease that ends quietly

# Completing a batch lease's jobs ends it (its row is deleted) in the
# completing transaction: nothing is left for the worker, and waking it
# for every lease, hundreds of times a second, would cost a pass each.
# With a long naptime, the worker's last pass (pg_stat_activity's
# state_change) must not move while consumers go through leases.
$mon->query(q{ALTER SYSTEM SET queue.worker_naptime = '1h'});
$mon->query(q{SELECT pg_reload_conf()});
$app->query(q{SELECT queue.create('quiet', lease => '1 hour')});
$app->query(q{SELECT count(*) FROM queue.enqueue_batch('quiet', array_fill('{}'::jsonb, ARRAY[200]))});
my $last_pass = qq{SELECT state_change FROM pg_stat_activity WHERE pid = $wpid};
my ($before, $quiet);
for (1 .. 40)
{
	$before = $mon->query($last_pass);
	sleep 0.5;
	$quiet = $mon->query(qq{SELECT state = 'idle' FROM pg_stat_activity WHERE pid = $wpid}) eq 't'
	  && $mon->query($last_pass) eq $before;
	last if $quiet;
}
ok($quiet, 'the worker goes quiet with a naptime of 1 hour');
my $ended = 0;
for (1 .. 20)
{
	my $ids = $app->query(q{SELECT array_agg(id) FROM queue.claim('quiet', 10)});
	$ended++ if $app->query(q{SELECT count(*) FROM queue.l_quiet}) eq '1'
	  && $app->query(qq{SELECT queue.complete('$ids'::bigint[])}) eq '10'
	  && $app->query(q{SELECT count(*) FROM queue.l_quiet}) eq '0';
}
is($ended, 20, 'completing batches of 10 ends their leases');
sleep 0.3;
is($mon->query($last_pass), $before, 'and the worker was not woken for any of them');

# A job claimed alone is leased in its row, and the claim's commit tells
# the worker when that lease runs out.  A time after the worker's own
# wake-up must not wake it: doing so for every claim cost it a few
# percent of a CPU in a busy drain.  Its voluntary context switches
# (each return from its sleep is one) show whether it woke.
my $switches = sub {
	open my $fh, '<', "/proc/$wpid/status" or return undef;
	my ($n) = map { /^voluntary_ctxt_switches:\s+(\d+)/ ? $1 : () } <$fh>;
	return $n;
};
$app->query(q{SELECT count(*) FROM queue.enqueue_batch('quiet', array_fill('{}'::jsonb, ARRAY[50]))});
my $switches_before = $switches->();
my $single = 0;
for (1 .. 50)
{
	my $id = $app->query(q{SELECT id FROM queue.claim('quiet')});
	$single++ if $app->query(qq{SELECT queue.complete($id)}) eq 't';
}
is($single, 50, '50 jobs claimed one at a time (each leased in its row) and completed');
SKIP:
{
	skip 'no /proc to read the worker\'s context switches from', 1 unless defined $switches_before;
	my $woken = $switches->() - $switches_before;
	cmp_ok($woken, '<', 10, 'and the worker was not woken for their leases');
	note "the worker's voluntary context switches meanwhile: $woken";
}
$app->query(q{SELECT queue.drop('quiet')});
$mon->query(q{ALTER SYSTEM RESET queue.worker_naptime});
$mon->query(q{SELECT pg_reload_conf()});

# ------------------------------------------ 8b. worker and launcher terminated

# Background workers we terminate: their exit may be logged.
my %terminated_bgw_pids;

# An administrator may terminate the worker (as a DROP DATABASE script
# would) or the launcher: both must come back, and the launcher's
# bookkeeping must stay right (one worker per database, stoppable).
$wpid = $mon->query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'app'});
$terminated_bgw_pids{$wpid} = 1;
$mon->query("SELECT pg_terminate_backend($wpid)");
$took = poll_for($mon, qq{SELECT count(*) FROM pg_stat_activity
	WHERE backend_type = 'queue worker' AND datname = 'app' AND pid <> $wpid}, '1', 10);
ok(defined $took && $took < 2, 'a terminated worker is replaced within 2 s');
note sprintf('worker replaced %.3f s after pg_terminate_backend', $took // -1);
$wpid = $mon->query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'app'});

# Cancelling the launcher (as a "cancel every query" script would) does
# nothing: it runs no query.  Terminating it makes it exit cleanly; the
# database workers start a new one (see worker.c).  The new launcher must
# not start a second worker for databases that have one: both would serve
# the database, and the one it does not know of would block DROP DATABASE.
my %cancelled_launchers;
$lpid = $mon->query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue launcher'});
$mon->query("SELECT pg_cancel_backend($lpid)");
sleep 0.5;
is($mon->query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue launcher'}),
	$lpid, 'a cancelled launcher keeps running (same pid)');
$terminated_bgw_pids{$lpid} = 1;
$mon->query("SELECT pg_terminate_backend($lpid)");
$took = poll_for($mon, qq{SELECT count(*) FROM pg_stat_activity
	WHERE backend_type = 'queue launcher' AND pid <> $lpid}, '1', 5);
ok(defined $took && $took < 3, 'a terminated launcher is running again within 3 s');
my %seen_pids;
my $t_end = time + 1.5;
while (time < $t_end)
{
	$seen_pids{$_} = 1 for split /\n/, $mon->query(q{SELECT pid FROM pg_stat_activity
		WHERE backend_type = 'queue worker' AND datname = 'app'});
	sleep 0.02;
}
is(join(',', sort keys %seen_pids), $wpid,
	'after the launcher was replaced, app is still served by its one worker');
is($mon->query(q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker'
	GROUP BY datname ORDER BY count(*) DESC LIMIT 1}),
	'1', 'no database has two workers');
ok(defined poll_for($mon, 'SELECT (' . workers_sql('dropext') . ') > 0', 't', 3), 'dropext is served');
$t0 = time;
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE dropext');
$dropdb_time = time - $t0;
is($ret, 0, 'after the launcher was replaced, DROP DATABASE of a served database succeeds')
  or diag($err);
ok($dropdb_time < 5, 'and promptly');

# Terminating the launcher: it must come back too.
$lpid = $mon->query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue launcher'});
$terminated_bgw_pids{$lpid} = 1;
$mon->query("SELECT pg_terminate_backend($lpid)");
$took = poll_for($mon, qq{SELECT count(*) FROM pg_stat_activity
	WHERE backend_type = 'queue launcher' AND pid <> $lpid}, '1', 5);
ok(defined $took && $took < 3, 'a terminated launcher is restarted within 3 s');
$node->safe_psql('postgres', 'CREATE DATABASE late');
$node->safe_psql('late', 'CREATE EXTENSION queue');
$took = poll_for($mon, workers_sql('late'), '1', 3);
ok(defined $took && $took < 2,
	'after the launcher was terminated, a new CREATE EXTENSION still gets a worker');

$mon->close;
$app->close;

# ---------------------------------------------------------------- 9. no preload

my $plain = PostgreSQL::Test::Cluster->new('nopreload');
$plain->init;
$plain->append_conf('postgresql.conf', q{log_line_prefix = '%m [%p] [%b] %q%a '
max_prepared_transactions = 2});
$plain->start;

($ret, $out, $err) = $plain->psql('postgres', 'CREATE EXTENSION queue');
is($ret, 0, 'no preload: CREATE EXTENSION succeeds');
# (a NOTICE raised inside an extension script is hidden by CREATE EXTENSION,
# which runs it with client_min_messages at least WARNING: INFO or WARNING
# are what reach the user)
like($err, qr/(?:NOTICE|INFO|WARNING):.*background worker is not running/,
	'no preload: a NOTICE says the background worker is not running');
like($err, qr/queue\.tick\(\)/, 'no preload: and that queue.tick() must be called');
is( $plain->safe_psql(
		'postgres', q{SELECT queue.create('p');
	SELECT queue.enqueue('p', '{"p": 1}') > 0;
	SELECT payload FROM queue.claim('p');
	SELECT queue.complete(id) FROM queue.archive UNION ALL SELECT queue.complete(id) FROM queue.jobs WHERE queue = 'p'}),
	qq{\nt\n{"p": 1}\nt},
	'no preload: enqueue, claim and complete work');
$t0 = time;
($ret, $out, $err) = $plain->psql('postgres', q{SELECT * FROM queue.claim('p', wait => '1 s')});
isnt($ret, 0, 'no preload: claim(wait =>) fails');
like($err, qr/ERROR:.*claim with wait needs queue in shared_preload_libraries/,
	'no preload: with a clear error');
ok(time - $t0 < 1, 'no preload: at once, not after waiting');
is($plain->safe_psql('postgres', q{SELECT count(*) FROM queue.claim('p', wait => '0 s')}),
	'0', 'no preload: claim with a zero wait is a plain claim');
$plain->safe_psql('postgres', q{SELECT queue.enqueue('p', '{"p": 2}')});
($ret, $out, $err) = $plain->psql('postgres',
	q{BEGIN; SELECT count(*) FROM queue.claim('p'); PREPARE TRANSACTION 'held_claim'});
like($err, qr/ERROR:.*cannot PREPARE a transaction that claimed jobs/,
	'no preload: PREPARE TRANSACTION of a transaction holding claims is refused');
is($plain->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}),
	'0', 'no preload: nothing was prepared');
is($plain->safe_psql('postgres', q{SELECT state FROM queue.jobs WHERE payload = '{"p": 2}'}),
	'ready', 'no preload: the job is still ready, not lost');
settle($plain);
$plain->stop;

# ---------------------------------------------------------------- 10. logs

settle($node);
$node->stop;

sub check_log
{
	my ($n) = @_;
	my $log = slurp_file($n->logfile);
	my $name = $n->name;
	my @worker_errors = grep {
		my ($pid) = /\[(\d+)\] \[queue (?:worker|launcher)\].*\b(?:ERROR|FATAL|PANIC):/;
		defined $pid
		  && !($cancelled_launchers{$pid}
			&& /\[queue launcher\] ERROR:  canceling statement due to user request$/)
	} split /\n/, $log;
	is(join("\n", @worker_errors), '', "$name: no ERROR or FATAL from a queue worker or launcher");
	my @worker_warnings = grep { /\[queue (?:worker|launcher)\].*\bWARNING:/ } split /\n/, $log;
	is(join("\n", @worker_warnings), '', "$name: no WARNING from a queue worker or launcher");
	my @exits = grep {
		my ($pid, $how) =
		  /background worker "queue [a-z]+" \(PID (\d+)\) (exited with exit code [1-9]\d*|was terminated by signal \d+)/;
		defined $pid
		  && !($terminated_bgw_pids{$pid} && $how eq 'exited with exit code 1');
	} split /\n/, $log;
	is(join("\n", @exits), '', "$name: no queue worker or launcher exited abnormally");
	my @panic = grep { /PANIC|TRAP:|was terminated by signal/ } split /\n/, $log;
	is(join("\n", @panic), '', "$name: no PANIC, TRAP or crash");
	my @fatal = grep {
		my ($pid) = /\[(\d+)\] \[client backend\] .*FATAL:  terminating connection due to administrator command$/;
		/\bFATAL:/ && !(defined $pid && $terminated_pids{$pid}) && !autovacuum_ended($_)
	} split /\n/, $log;
	is(join("\n", @fatal), '', "$name: no FATAL but those of the sessions we terminated");
	return;
}
check_log($node);
check_log($plain);

done_testing();
