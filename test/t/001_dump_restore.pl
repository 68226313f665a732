# test/t/001_dump_restore.pl: queue data survives pg_dump and restore.
#
# Queue definitions (queue_config, queue_grants and queue_number_seq are
# extension config objects), the per-queue job, archive and lease tables
# with their data, and the per-queue id sequences.  Grants keep working,
# and keep their roles from being dropped, in every restored database.  Checked with a custom-format dump through
# pg_restore and a plain-format dump piped through psql.  Also: DROP
# EXTENSION without CASCADE refuses while queues exist, and with CASCADE
# removes everything of the extension.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'queue'");
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');

# ---------------------------------------------------------------- source data

$node->safe_psql(
	'src', q{
CREATE EXTENSION queue;
SELECT queue.create('emails');
SELECT queue.create('sms', max_attempts => 3, lease => '10 s', retention => '0');
-- a queue made and dropped, so that queue_number_seq is ahead of every qno
SELECT queue.create('gone');
SELECT queue.drop('gone');
SELECT queue.create('batch', lease => '1 hour');
});
# roles are the cluster's, outside the dumps
$node->safe_psql('postgres', 'CREATE ROLE app; CREATE ROLE lead');
$node->safe_psql(
	'src', q{
SELECT queue.grant('emails', 'app', 'produce');
SELECT queue.grant('sms', 'app', 'all');
SELECT queue.grant('batch', 'lead', 'read');
});

# Labels to job ids; each enqueue is its own transaction.
my %id;
sub enqueue
{
	my ($label, $queue, $args) = @_;
	$args = defined $args ? ", $args" : '';
	$id{$label} = $node->safe_psql('src',
		"SELECT queue.enqueue('$queue', '{\"job\": \"$label\"}'$args)");
	return $id{$label};
}

# emails: one job claimed and committed first (so it is the one taken),
# one failed once and ready again, one completed (archive row).  The
# claiming session stays connected until the end, so that the running job
# is nobody's orphan (the background worker may return those).
enqueue('e_running', 'emails');
my $consumer = $node->background_psql('src');
is( $consumer->query_safe(
		q{SELECT id FROM queue.claim('emails', lease => '1 hour')}),
	$id{e_running},
	'claim takes the only ready job');

# batch: two jobs under one batch lease (src/lease.c), taken by the same
# consumer; their rows stay 'ready', the lease row lists them.
my @batch = split /\n/, $node->safe_psql('src',
	q{SELECT queue.enqueue('batch', jsonb_build_object('b', i)) FROM generate_series(1, 2) i});
is( $consumer->query_safe(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.claim('batch', 2)}),
	join(',', @batch), 'a batch lease takes both batch jobs');
is($node->safe_psql('src', q{SELECT count(*) FROM queue.l_batch}), '1', 'one lease row');

# Claim and complete in one session: once a session that committed claims
# exits, the worker returns its running jobs ('consumer disconnected').
enqueue('e_done', 'emails');
is( $node->safe_psql(
		'src', qq{
SELECT id FROM queue.claim('emails');
SELECT queue.complete($id{e_done});
}),
	"$id{e_done}\nt",
	'claim takes the job to complete, and complete');

enqueue('e_ready1', 'emails');
enqueue('e_retried', 'emails');
enqueue('e_sched', 'emails', q{run_at => now() + interval '1 hour'});
enqueue('e_prio10', 'emails', 'priority => 10');
enqueue('e_dedup', 'emails', q{dedup_key => 'd1'});
enqueue('e_group', 'emails', q{group_key => 'g1'});
enqueue('e_prio5', 'emails', 'priority => 5');
enqueue('e_ready2', 'emails',
	q{priority => 0, group_key => 'g2', dedup_key => 'd2'});

# Claim the four jobs in front (prio10, prio5, ready1, retried), fail
# e_retried for an immediate retry and give the other three back: each
# gets a new rank, behind the jobs that were waiting.  attempt counts
# claims, so all four are at attempt 1 afterwards (a release does not
# lower it; released attempts just don't count toward max_attempts).
my $out = $node->safe_psql(
	'src', qq{
BEGIN;
SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.claim('emails', 4);
SELECT queue.fail($id{e_retried}, 'transient', retry_in => '0');
SELECT count(*) FROM (SELECT queue.release(i) FROM unnest(ARRAY[$id{e_prio10}, $id{e_prio5}, $id{e_ready1}]::bigint[]) i) r;
COMMIT;
});
is( $out,
	join(',', sort { $a <=> $b } @id{qw(e_ready1 e_retried e_prio10 e_prio5)})
	  . "\nretry\n3",
	'claimed four, failed one for retry, released three');

# sms: one job failed to death, one completed (retention 0: no archive),
# ready jobs left behind a pause.
enqueue('s_dead', 'sms');
for my $attempt (1 .. 3)
{
	my $want = $attempt < 3 ? 'retry' : 'dead';
	is( $node->safe_psql(
			'src', qq{
SELECT id FROM queue.claim('sms');
SELECT queue.fail($id{s_dead}, 'boom $attempt', retry_in => '0');
}),
		"$id{s_dead}\n$want",
		"sms attempt $attempt fails with $want");
}
enqueue('s_done', 'sms');
is( $node->safe_psql(
		'src', qq{
SELECT id FROM queue.claim('sms');
SELECT queue.complete($id{s_done});
}),
	"$id{s_done}\nt",
	'sms job completed');
enqueue('s_ready1', 'sms', 'priority => 1');
enqueue('s_ready2', 'sms');
$node->safe_psql('src', q{SELECT queue.pause('sms')});
enqueue('s_ready3', 'sms', 'priority => 2');

# Sanity of the source state.
my @expect = (
	[ 'emails', 'e_running', 'running',   1 ],
	[ 'emails', 'e_ready1',  'ready',     1 ],
	[ 'emails', 'e_retried', 'ready',     1 ],
	[ 'emails', 'e_sched',   'scheduled', 0 ],
	[ 'emails', 'e_prio10',  'ready',     1 ],
	[ 'emails', 'e_dedup',   'ready',     0 ],
	[ 'emails', 'e_group',   'ready',     0 ],
	[ 'emails', 'e_prio5',   'ready',     1 ],
	[ 'emails', 'e_ready2',  'ready',     0 ],
	[ 'sms',    's_dead',    'dead',      3 ],
	[ 'sms',    's_ready1',  'ready',     0 ],
	[ 'sms',    's_ready2',  'ready',     0 ],
	[ 'sms',    's_ready3',  'ready',     0 ]);
is( $node->safe_psql(
		'src', q{SELECT queue, id, state, attempt FROM queue.jobs WHERE queue <> 'batch' ORDER BY id}),
	join("\n",
		map { "$_->[0]|$id{$_->[1]}|$_->[2]|$_->[3]" }
		sort { $id{ $a->[1] } <=> $id{ $b->[1] } } @expect),
	'source jobs are in the expected states');
is( $node->safe_psql('src', q{SELECT queue, id, state FROM queue.archive}),
	"emails|$id{e_done}|done",
	'source archive holds the completed emails job only (sms retention 0)');

# The claim order src would use: priority first, then FIFO by the time a
# job (last) became ready: the retried and the released jobs come last.
my @ready_order =
  @id{qw(e_prio10 e_prio5 e_dedup e_group e_ready2 e_retried e_ready1)};
is( $node->safe_psql(
		'src', q{
BEGIN;
SELECT id FROM queue.claim('emails');
SELECT id FROM queue.claim('emails');
SELECT id FROM queue.claim('emails');
SELECT id FROM queue.claim('emails');
SELECT id FROM queue.claim('emails');
SELECT id FROM queue.claim('emails');
SELECT id FROM queue.claim('emails');
SELECT count(*) FROM queue.claim('emails');
ROLLBACK;
}),
	join("\n", @ready_order, 0),
	'claim order in src (rolled back)');

# What must survive.
my %queries = (
	jobs => 'SELECT * FROM queue.jobs ORDER BY id',
	archive => 'SELECT * FROM queue.archive ORDER BY id',
	queues => 'SELECT * FROM queue.queues ORDER BY queue',
	# the underlying rows, with rank (claim order), uncounted (released)
	# attempts, the claimer (owner_pid, owner_start) and history
	rows => 'SELECT * FROM queue._job ORDER BY id',
	leases => 'SELECT * FROM queue._lease ORDER BY lease',
	arows => 'SELECT * FROM queue._archive ORDER BY id',
	history =>
	  'SELECT j.id, h.* FROM (SELECT id FROM queue.jobs UNION ALL SELECT id FROM queue.archive) j,'
	  . ' queue.history(j.id) h ORDER BY j.id, h.at, h.event',
	config => 'SELECT * FROM queue.queue_config ORDER BY qno',
	grants => 'SELECT * FROM queue.grants ORDER BY queue, role::text, privilege',
	# ids and ranks are drawn from these: same position after a restore
	sequences => q{
SELECT 'queue_number_seq', last_value, is_called FROM queue.queue_number_seq
UNION ALL SELECT 'q_emails$seq', last_value, is_called FROM queue."q_emails$seq"
UNION ALL SELECT 'q_sms$seq', last_value, is_called FROM queue."q_sms$seq"
UNION ALL SELECT 'q_batch$seq', last_value, is_called FROM queue."q_batch$seq"},
	# Every column but these three, which legitimately differ:
	# oldest_ready_age is measured from now(), and completed_last_minute
	# and failed_last_minute are counted in shared memory per database as
	# jobs finish (src has had completions and failures, the restored
	# databases have had none).
	stats =>
	  'SELECT queue, ready, scheduled, running, dead, waiting FROM queue.stats ORDER BY queue',);
my %before;
$before{$_} = $node->safe_psql('src', $queries{$_}) for keys %queries;

like($before{history}, qr/\|failed\|3\|boom 3/,
	'source history has the last failure');

my $qnos = $node->safe_psql('src',
	q{SELECT string_agg(qno::text, ',' ORDER BY qno) FROM queue.queue_config});
my $qno_seq = $node->safe_psql('src',
	q{SELECT last_value FROM queue.queue_number_seq});
is($qnos, '1,2,4', 'queue numbers of emails, sms and batch');
is($qno_seq, '4', 'queue_number_seq is past the dropped queue');

# ---------------------------------------------------------------- dumps

my $tempdir = PostgreSQL::Test::Utils::tempdir;
my $dumpfile = "$tempdir/src.dump";

$node->command_ok(
	[ 'pg_dump', '-Fc', '-d', $node->connstr('src'), '-f', $dumpfile ],
	'pg_dump -Fc');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
$node->command_ok(
	[
		'pg_restore', '--exit-on-error', '-d', $node->connstr('dst'),
		$dumpfile
	],
	'pg_restore into dst');

# Plain format, piped through psql.
$node->safe_psql('postgres', 'CREATE DATABASE plain');
{
	my ($dump_err, $psql_out, $psql_err) = ('', '', '');
	my $ok = IPC::Run::run(
		[ 'pg_dump', '-d', $node->connstr('src') ],
		'2>', \$dump_err, '|',
		[
			'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d',
			$node->connstr('plain')
		],
		'>', \$psql_out, '2>', \$psql_err);
	ok($ok, 'pg_dump | psql into plain');
	is($dump_err . $psql_err, '', 'plain dump and restore print no errors');
}

# ---------------------------------------------------------------- checks

sub check_restored
{
	my ($db) = @_;

	for my $k (sort keys %queries)
	{
		is($node->safe_psql($db, $queries{$k}),
			$before{$k}, "$db: $k identical to src");
	}
	is( $node->safe_psql($db,
			"SELECT event, attempt, detail FROM queue.history($id{s_dead})"),
		"enqueued|0|\nclaimed|1|\nfailed|1|boom 1\n"
		  . "claimed|2|\nfailed|2|boom 2\nclaimed|3|\nfailed|3|boom 3",
		"$db: history of the dead job is intact")
	  or diag($node->safe_psql($db,
			"SELECT * FROM queue.history($id{s_dead})"));

	# dedup index restored: the unfinished job keeps its key
	is( $node->safe_psql($db,
			q{SELECT queue.enqueue('emails', '{"dup": true}', dedup_key => 'd1')}),
		$id{e_dedup},
		"$db: dedup_key still maps to the restored job");

	# sequences restored: new ids come after every restored id of their queue
	# (every id src ever handed out, the deleted s_done included)
	my %max = (emails => 0, sms => 0);
	for my $l (keys %id)
	{
		my $q = $l =~ /^e_/ ? 'emails' : 'sms';
		$max{$q} = $id{$l} if $id{$l} > $max{$q};
	}
	my @new_emails = split /\n/,
	  $node->safe_psql(
		$db, q{
SELECT queue.enqueue('emails', '{"new": 1}');
SELECT queue.enqueue_batch('emails', ARRAY['{"new": 2}', '{"new": 3}']::jsonb[]);
});
	my @new_sms = split /\n/,
	  $node->safe_psql($db,
		q{SELECT queue.enqueue('sms', '{"new": 1}', priority => 3)});
	is(scalar(@new_emails), 3, "$db: three new emails jobs");
	ok((!grep { $_ <= $max{emails} } @new_emails),
		"$db: new emails ids are above every restored emails id");
	ok((!grep { $_ <= $max{sms} } @new_sms),
		"$db: new sms id is above every restored sms id");
	is( $node->safe_psql($db,
			'SELECT count(*), count(DISTINCT id) FROM queue.jobs'),
		'19|19', "$db: no id collides");
	ok( (!grep { $_ % 1000000 != 1 } @new_emails)
		  && (!grep { $_ % 1000000 != 2 } @new_sms),
		"$db: new ids carry their queue's number");

	# claim order: restored ready jobs in src's order, then the new ones
	my $claims = join "\n",
	  map { "SELECT id FROM queue.claim('emails');" } 1 .. 10;
	is( $node->safe_psql($db, "$claims\nSELECT count(*) FROM queue.claim('emails');"),
		join("\n", @ready_order, @new_emails, 0),
		"$db: claims take ready jobs in priority then FIFO order");

	# the restored running job is still a running job: its claimer (pid and
	# backend start, restored with the row) is $consumer, still connected
	# (to src), so the worker does not take it for an orphan
	is($node->safe_psql($db, "SELECT queue.complete($id{e_running})"),
		't', "$db: restored running job can be completed");
	is( $node->safe_psql($db,
			"SELECT state, attempt FROM queue.archive WHERE id = $id{e_running}"),
		'done|1',
		"$db: and is archived");

	# the batch lease survived: its jobs are not claimed again, and can be
	# completed with their token (the lease's claimer is still connected)
	is($node->safe_psql($db, q{SELECT count(*) FROM queue.claim('batch', 10)}),
		'0', "$db: the jobs under the restored batch lease are not claimed again");
	is( $node->safe_psql($db, "SELECT queue.complete($batch[0], 1)"),
		't', "$db: a job of the restored batch lease can be completed with its token");
	is($node->safe_psql($db, "SELECT state, attempt FROM queue.jobs WHERE id = $batch[1]"),
		'running|1', "$db: the other is still running");

	# pause survived
	is($node->safe_psql($db, q{SELECT paused FROM queue.queues WHERE queue = 'sms'}),
		't', "$db: sms is paused");
	is($node->safe_psql($db, q{SELECT count(*) FROM queue.claim('sms', 10)}),
		'0', "$db: claim on paused sms returns nothing");
	$node->safe_psql($db, q{SELECT queue.resume('sms')});
	# claim and look at the lease in one session: the jobs stay running
	# only while the claiming session is connected
	is( $node->safe_psql(
			$db, qq{
SELECT string_agg(id::text, ',' ORDER BY n) FROM queue.claim('sms', 10) WITH ORDINALITY c(id, payload, attempt, group_key, enqueued_at, lease_until, n);
SELECT state, lease_until - claimed_at FROM queue.jobs WHERE id = $id{s_ready1};
}),
		join(',', $new_sms[0], @id{qw(s_ready3 s_ready1 s_ready2)})
		  . "\nrunning|00:00:10",
		"$db: after resume, sms jobs are claimed in priority order, under the sms lease");

	# new queue: queue_number_seq restored, no collision
	$node->safe_psql($db, q{SELECT queue.create('push')});
	my $qno = $node->safe_psql($db,
		q{SELECT qno FROM queue.queue_config WHERE name = 'push'});
	ok($qno > $qno_seq, "$db: new queue number $qno is past the restored sequence");
	is( $node->safe_psql($db,
			'SELECT count(*) = count(DISTINCT qno) FROM queue.queue_config'),
		't', "$db: queue numbers are distinct");
	my $pid = $node->safe_psql($db,
		q{SELECT queue.enqueue('push', '{"p": 1}')});
	is($pid % 1000000, $qno, "$db: jobs of the new queue carry its number");
	is( $node->safe_psql($db,
			q{SELECT id FROM queue.claim('push'); SELECT count(*) FROM queue.jobs WHERE queue = 'push'}),
		"$pid\n1",
		"$db: new queue works");

	# the grants work, and their roles depend on them
	is($node->safe_psql($db, q{SET ROLE app; SELECT queue.enqueue('emails', '{"by": "app"}') > 0}),
		't', "$db: a role granted produce enqueues");
	my ($ret, $stdout, $stderr) =
	  $node->psql($db, q{SET ROLE app; SELECT * FROM queue.claim('emails')});
	like($stderr, qr/permission denied for queue "emails"/, "$db: and may not claim");
	is( $node->safe_psql($db,
			q{SELECT string_agg(refobjid::regrole::text, ',' ORDER BY refobjid::regrole::text) FROM pg_shdepend
			   WHERE objid = 'queue.queue_grants'::regclass AND deptype = 'a'
			     AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())}),
		'app,lead', "$db: the grantees depend on queue_grants");
	return;
}

check_restored('dst');
check_restored('plain');

# A role with grants cannot be dropped, from any database, until DROP
# OWNED has revoked them in each.
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP ROLE app');
isnt($ret, 0, 'DROP ROLE of a role with grants on queues fails');
like($stderr, qr/objects? in database (src|dst|plain)/, 'naming the databases that hold them');
$node->safe_psql($_, 'DROP OWNED BY app') for qw(dst plain);
($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP ROLE app');
like($stderr, qr/objects? in database src/, 'after DROP OWNED in two of them, the third still holds it');

# src is untouched by all that
is($node->safe_psql('src', $queries{jobs}), $before{jobs}, 'src jobs unchanged');

# The consumer leaves: the worker returns its job, counting the attempt.
$consumer->quit;
ok( $node->poll_query_until(
		'src', qq{
SELECT state = 'ready' AND attempt = 1 AND last_error = 'consumer disconnected'
       AND lease_until IS NULL
  FROM queue.jobs WHERE id = $id{e_running}}),
	'src: the running job is ready again once its consumer exited');
ok( $node->poll_query_until(
		'src', qq{
SELECT count(*) = 2 AND bool_and(state = 'ready' AND attempt = 1 AND last_error = 'consumer disconnected')
  FROM queue.jobs WHERE queue = 'batch'}),
	'src: so are the jobs of its batch lease');

# ---------------------------------------------------------------- drop extension

($ret, $stdout, $stderr) = $node->psql('src', 'DROP EXTENSION queue');
isnt($ret, 0, 'DROP EXTENSION without CASCADE fails while queues exist');
like($stderr, qr/depend/, 'and the error mentions dependent objects');
is($node->safe_psql('src', 'SELECT count(*) FROM queue.jobs'),
	'15', 'nothing was dropped');

$node->safe_psql('src', 'DROP EXTENSION queue CASCADE');
my $left = q{SELECT coalesce(string_agg(format('%s (%s)', c.relname, c.relkind), ', ' ORDER BY c.relname), '')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'queue'};
is($node->safe_psql('src', "$left AND c.relkind IN ('r', 'p', 'v')"),
	'', 'DROP EXTENSION CASCADE leaves no table or view in schema queue');
# CREATE EXTENSION made schema queue itself, so PostgreSQL keeps it; but
# nothing of the extension may stay in it, the per-queue sequences included.
is($node->safe_psql('src', $left),
	'', 'DROP EXTENSION CASCADE leaves no relation at all in schema queue');
is( $node->safe_psql('src',
		q{SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'queue'}
	),
	'0',
	'and no type');

# and it can be created again, empty, with a queue of a name used before
$node->safe_psql('src', 'CREATE EXTENSION queue');
($ret, $stdout, $stderr) = $node->psql('src',
	q{SELECT queue.create('emails'); SELECT queue.enqueue('emails', '{}') % 1000000; SELECT count(*) FROM queue.jobs}
);
is($ret, 0, 're-created extension: queue.create of a formerly used name works')
  or diag($stderr);
is($stdout, "\n1\n1", 're-created extension starts from scratch');
# DROP EXTENSION took src's grants with it
($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP ROLE app');
is($ret, 0, 'once no database holds grants of it, the role can be dropped') or diag($stderr);

$node->stop;
done_testing();
