# test/t/010_upgrade.pl: upgrades along the version chain.
#
# The chain comes from the files: every full install script
# sql/queue--<v>.sql but that of the control file's default_version is a
# start version, and the upgrade scripts sql/queue--<a>--<b>.sql must lead
# from each to the default.  For each start version, in a database of its
# own, with the background worker running:
#
#   1. CREATE EXTENSION queue VERSION '<v>', and queues and jobs made by
#      that version in every state it has: ready, scheduled, running in
#      place (a single-job claim) and under a batch lease, dead, waiting
#      behind its group's head, done and cancelled (in the archive); queues
#      with default options, max_running, group_retry 'requeue', retention
#      0, paused, and one given to an ordinary role with set_owner;
#   2. ALTER EXTENSION queue UPDATE, while the consumer that holds the
#      running jobs stays connected;
#   3. the same rows afterwards (jobs, archive, queues, stats, leases,
#      slots, configuration, histories), and the old queues and jobs
#      working: fencing tokens, claim order, dedup, groups, max_running,
#      retry of the dead job, pause, tick(), a schedule, drop, create, and the worker
#      returning expired leases of old jobs and promoting new scheduled ones;
#   4. the upgraded extension's members identical to a fresh CREATE
#      EXTENSION queue in another database: pg_dump --binary-upgrade
#      --schema-only (which, unlike a plain dump, prints the members) with
#      what legitimately differs masked, and a catalog listing of every
#      member (definitions, columns, constraints, indexes, privileges, init
#      privileges); and the tables of a queue made by the old version and
#      of one created after the upgrade identical to those of the same
#      queues created in the fresh database;
#   5. DROP EXTENSION queue CASCADE, and CREATE EXTENSION again.
#
# With a single version (nothing to upgrade from) the test skips.

use strict;
use warnings;

use File::Basename qw(basename);
use FindBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use QueueTest;

my $root = "$FindBin::RealBin/../..";

# ---------------------------------------------------------------- the chain

my ($default) =
  slurp_file("$root/queue.control") =~ /^\s*default_version\s*=\s*'([^']+)'/m
  or die "no default_version in queue.control";

my (%full, %step);    # full scripts; upgrade scripts, from => [to, ...]
for my $f (glob "$root/sql/queue--*.sql")
{
	my $b = basename($f, '.sql');
	$b =~ s/^queue--//;
	my @v = split /--/, $b;
	if (@v == 1) { $full{ $v[0] } = 1 }
	elsif (@v == 2) { push @{ $step{ $v[0] } }, $v[1] }
	else { die "cannot parse the name of $f" }
}

# version order: numeric parts compared as numbers
sub vcmp
{
	my @a = split /\./, $_[0];
	my @b = split /\./, $_[1];
	while (@a || @b)
	{
		my ($x, $y) = (shift(@a) // -1, shift(@b) // -1);
		my $c = ($x =~ /^\d+$/ && $y =~ /^\d+$/) ? $x <=> $y : $x cmp $y;
		return $c if $c;
	}
	return 0;
}

# The shortest chain of upgrade scripts from $from to $default, as
# PostgreSQL chooses it, or undef.
sub chain
{
	my ($from) = @_;
	my %prev = ($from => undef);
	my @todo = ($from);
	while (@todo)
	{
		my $v = shift @todo;
		if ($v eq $default)
		{
			my @path = ($v);
			unshift @path, $prev{ $path[0] } while defined $prev{ $path[0] };
			return \@path;
		}
		for my $n (sort { vcmp($a, $b) } @{ $step{$v} // [] })
		{
			next if exists $prev{$n};
			$prev{$n} = $v;
			push @todo, $n;
		}
	}
	return undef;
}

my @starts = sort { vcmp($a, $b) } grep { $_ ne $default } keys %full;
plan skip_all => "only version $default has an install script: nothing to upgrade from"
  unless @starts;

# ---------------------------------------------------------------- the node

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'queue'\nmax_worker_processes = 16");
$node->start;

# What the server runs is what `make install` put in its extension
# directory, not sql/: the two must be the same files, or this test would
# check something else than what it read.
{
	my ($sharedir) = $node->config_data('--sharedir');
	my $ext = "$sharedir/extension";
	my %src = map { basename($_) => $_ } glob("$root/sql/queue--*.sql"),
	  "$root/queue.control";
	my %inst = map { basename($_) => $_ } glob("$ext/queue--*.sql"),
	  "$ext/queue.control";
	my @differ = grep {
		!exists $inst{$_} || slurp_file($src{$_}) ne slurp_file($inst{$_})
	} sort keys %src;
	my @extra = grep { !exists $src{$_} } sort keys %inst;
	is(join(' ', @differ, map { "$_ (only installed)" } @extra),
		'', "the installed scripts and control file are those of the source tree ($ext)")
	  or die "reinstall: make install, and remove stale queue--*.sql files from $ext";
}

ok($full{$default}, "default_version $default has its own full install script");

my $paths = $node->safe_psql('postgres',
	qq{SELECT source || ' ' || path FROM pg_extension_update_paths('queue')
	    WHERE target = '$default' AND path IS NOT NULL ORDER BY 1});
my %pg_path = map { split / /, $_, 2 } grep { $_ ne '' } split /\n/, $paths;
my (%covered, @chained);
for my $v (@starts)
{
	my $c = chain($v);
	ok(defined $c, "upgrade scripts lead from $v to $default");
	next unless defined $c;
	push @chained, $v;
	is($pg_path{$v}, join('--', @$c), "and PostgreSQL takes the chain " . join(' -> ', @$c));
	$covered{"$c->[$_]--$c->[$_ + 1]"} = 1 for 0 .. $#$c - 1;
}
for my $from (sort keys %step)
{
	for my $to (@{ $step{$from} })
	{
		note("upgrade script queue--$from--$to.sql is on no chain tested here")
		  unless $covered{"$from--$to"};
	}
}

# An ordinary role for the queue given away with set_owner.
$node->safe_psql('postgres', 'CREATE ROLE upg_owner NOLOGIN');
# a role that uses queue doomed with the privileges on its tables that the
# README asked for before 0.4, which the upgrade turns into the queue's
$node->safe_psql('postgres', 'CREATE ROLE upg_app NOLOGIN');

# The fresh installation the upgraded ones are compared with.
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION queue');
is($node->safe_psql('fresh', q{SELECT extversion FROM pg_extension WHERE extname = 'queue'}),
	$default, "fresh: CREATE EXTENSION installs $default");

my $tempdir = PostgreSQL::Test::Utils::tempdir;

# ---------------------------------------------------------------- comparing

# Shows a unified diff of the two when they differ: from $want (of the
# fresh database, or before the upgrade) to $got (the upgraded database);
# of $show_got and $show_want instead, when given.
sub same_text
{
	my ($got, $want, $name, $what, $show_got, $show_want) = @_;
	return pass($name) if $got eq $want;
	fail($name);
	($got, $want) = ($show_got, $show_want) if defined $show_got;
	my ($from, $to) = $what =~ /^[^.]+\.(?:members|queue)\./ ? qw(fresh upgraded) : qw(before after);
	(my $base = "$tempdir/$what") =~ s/[^\w\/.-]/_/g;
	PostgreSQL::Test::Utils::append_to_file("$base.$from", $want);
	PostgreSQL::Test::Utils::append_to_file("$base.$to", $got);
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'diff', '-u', "$base.$from", "$base.$to" ], '>', \$out, '2>', \$err);
	diag("$what: $from (-) against $to (+):\n$out$err");
	return 0;
}

# The relations of the queue schema that are not extension members: the
# queues' own tables and sequences (user data), left out of the dump of
# the members.
sub non_members
{
	my ($db) = @_;
	return split /\n/, $node->safe_psql(
		$db, q{
SELECT c.relname FROM pg_class c
 WHERE c.relnamespace = 'queue'::regnamespace AND c.relkind IN ('r', 'p', 'S', 'v', 'm', 'f')
   AND NOT EXISTS (SELECT FROM pg_depend d
                    WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
 ORDER BY 1});
}

sub pg_dump
{
	my ($db, @args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'pg_dump', '--schema-only', @args, '-d', $node->connstr($db) ],
		'>', \$out, '2>', \$err)
	  or die "pg_dump of $db failed: $err";
	die "pg_dump of $db: $err" if $err ne '';
	return $out;
}

# Masks what a binary-upgrade dump legitimately differs in between two
# databases with the same definitions: see the comments.
sub mask_dump
{
	my ($dump) = @_;
	my @out;
	for (split /\n/, $dump, -1)
	{
		# a random key per run of pg_dump (15.14 and later)
		next if /^\\(un)?restrict /;
		# the oids, relfilenodes and attribute versions to preserve
		s/^(SELECT pg_catalog\.binary_upgrade_set_next_\w+)\(.*\);$/$1(...);/;
		# the value that rows from before an ADD COLUMN read: the column's
		# default itself is compared
		next if /^SELECT pg_catalog\.binary_upgrade_set_missing_value\(/;
		# xid horizons, and toast tables named by oid
		s/relfrozenxid = '\d+', relminmxid = '\d+'/relfrozenxid = ..., relminmxid = .../;
		s/^WHERE oid = '\d+';$/WHERE oid = ...;/;
		# the extension's configuration tables by oid (the catalog listing
		# compares their names)
		s/('\{[\d,]*\}')/'{...}'/ if /binary_upgrade_create_empty_extension\(/;
		push @out, $_;
	}
	return join("\n", @out);
}

# A dump's statements as blocks, each from its "-- Name:" header.  The
# dumps are compared as sorted lists of blocks: pg_dump orders objects by
# type and name, but breaks ties (and dependency loops) by oid, which
# differ between an upgraded and a fresh installation.
sub blocks
{
	my ($dump) = @_;
	return split /(?=^--\n-- Name: )/m, $dump;
}

# One line per property of the relations in the CTE rel(oid, obj):
# columns in order (dropped ones counted), defaults, constraints, indexes,
# triggers, rules, policies, view definitions, sequence parameters,
# partitioning, inheritance, ownership, privileges, comments.
my $rel_lines = q{
  SELECT r.obj, format('relation kind %s, owner %s, acl %s, options %s, persistence %s, partitioned by %s, bound %s, inherits %s, rls %s/%s, replica identity %s, dropped columns %s',
             c.relkind, c.relowner::regrole, c.relacl, c.reloptions, c.relpersistence,
             pg_get_partkeydef(c.oid), pg_get_expr(c.relpartbound, c.oid),
             (SELECT string_agg(i.inhparent::regclass::text, ',' ORDER BY i.inhseqno)
                FROM pg_inherits i WHERE i.inhrelid = c.oid),
             c.relrowsecurity, c.relforcerowsecurity, c.relreplident,
             (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attisdropped))
    FROM rel r JOIN pg_class c ON c.oid = r.oid
  UNION ALL
  SELECT r.obj, format('column %s %s %s, not null %s, default %s, identity %s, generated %s, compression %s, collation %s, local %s, inherited %s, stattarget %s, acl %s, options %s',
             lpad((row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum))::text, 4), a.attname,
             format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid),
             a.attidentity, a.attgenerated, a.attcompression, a.attcollation::regcollation,
             a.attislocal, a.attinhcount, a.attstattarget, a.attacl,
             -- (this server keeps the LSN of each column's last change there)
             ARRAY(SELECT o FROM unnest(a.attoptions) o WHERE o NOT LIKE 'pg\_attver=%'))
    FROM rel r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
  UNION ALL
  SELECT r.obj, format('constraint %s: %s, no inherit %s, valid %s, local %s, inherited %s',
             co.conname, pg_get_constraintdef(co.oid), co.connoinherit, co.convalidated,
             co.conislocal, co.coninhcount)
    FROM rel r JOIN pg_constraint co ON co.conrelid = r.oid
  UNION ALL
  SELECT r.obj, format('index %s, clustered %s, replica identity %s',
             pg_get_indexdef(i.indexrelid), i.indisclustered, i.indisreplident)
    FROM rel r JOIN pg_index i ON i.indrelid = r.oid
  UNION ALL
  SELECT r.obj, format('trigger %s, enabled %s', pg_get_triggerdef(t.oid), t.tgenabled)
    FROM rel r JOIN pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal
  UNION ALL
  SELECT r.obj, 'rule ' || pg_get_ruledef(w.oid)
    FROM rel r JOIN pg_rewrite w ON w.ev_class = r.oid AND w.rulename <> '_RETURN'
  UNION ALL
  SELECT r.obj, format('policy %s %s %s to %s using %s check %s', p.polname, p.polcmd, p.polpermissive,
             p.polroles::regrole[], pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
    FROM rel r JOIN pg_policy p ON p.polrelid = r.oid
  UNION ALL
  SELECT r.obj, E'view\n' || pg_get_viewdef(c.oid, true)
    FROM rel r JOIN pg_class c ON c.oid = r.oid AND c.relkind IN ('v', 'm')
  UNION ALL
  SELECT r.obj, format('sequence %s start %s increment %s min %s max %s cache %s cycle %s, owned by %s',
             s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle,
             (SELECT pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) FROM pg_depend d
               WHERE d.classid = 'pg_class'::regclass AND d.objid = s.seqrelid AND d.deptype = 'a'))
    FROM rel r JOIN pg_sequence s ON s.seqrelid = r.oid
  UNION ALL
  SELECT r.obj, format('comment %s: %s', d.objsubid, d.description)
    FROM rel r JOIN pg_description d ON d.classoid = 'pg_class'::regclass AND d.objoid = r.oid
};

# Every member of the extension, with its definition and privileges, the
# extension's own row, the schema's privileges, and anything in the schema
# that is neither a member nor part of a queue (strays).
my $members_sql = qq{
WITH ext AS (SELECT * FROM pg_extension WHERE extname = 'queue'),
mem AS (
  SELECT d.classid, d.objid, d.objsubid, pg_describe_object(d.classid, d.objid, d.objsubid) AS obj
    FROM pg_depend d, ext
   WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
rel AS (
  SELECT m.objid AS oid, m.obj FROM mem m WHERE m.classid = 'pg_class'::regclass
  UNION ALL
  -- the columns of composite types
  SELECT t.typrelid, m.obj FROM mem m JOIN pg_type t ON m.classid = 'pg_type'::regclass
                                                    AND t.oid = m.objid AND t.typrelid <> 0),
lines(obj, line) AS (
  SELECT obj, 'member' FROM mem
  UNION ALL
  SELECT 'extension', format('version %s, owner %s, schema %s, relocatable %s, config %s, conditions %s',
             e.extversion, e.extowner::regrole, e.extnamespace::regnamespace, e.extrelocatable,
             e.extconfig::regclass[], e.extcondition)
    FROM ext e
  UNION ALL
  SELECT 'schema', format('%s owner %s, acl %s', n.nspname, n.nspowner::regrole, n.nspacl)
    FROM ext e JOIN pg_namespace n ON n.oid = e.extnamespace
  UNION ALL
  SELECT m.obj, format('owner %s, acl %s', p.proowner::regrole, p.proacl) || E'\\n'
             || CASE WHEN p.prokind = 'a' THEN 'aggregate' ELSE pg_get_functiondef(p.oid) END
    FROM mem m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
  UNION ALL
  SELECT m.obj, format('type %s kind %s, owner %s, acl %s, base %s, not null %s, default %s, labels %s',
             format_type(t.oid, NULL), t.typtype, t.typowner::regrole, t.typacl,
             nullif(t.typbasetype, 0)::regtype, t.typnotnull, t.typdefault,
             (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid))
    FROM mem m JOIN pg_type t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
  UNION ALL
  SELECT m.obj, 'domain constraint ' || co.conname || ': ' || pg_get_constraintdef(co.oid)
    FROM mem m JOIN pg_constraint co ON m.classid = 'pg_type'::regclass AND co.contypid = m.objid
  UNION ALL
  SELECT m.obj, format('comment %s: %s', d.objsubid, d.description)
    FROM mem m JOIN pg_description d ON d.classoid = m.classid AND d.objoid = m.objid
   WHERE m.classid <> 'pg_class'::regclass
  UNION ALL
  SELECT m.obj, format('initial privileges %s (%s): %s', ip.objsubid, ip.privtype, ip.initprivs)
    FROM mem m JOIN pg_init_privs ip ON ip.classoid = m.classid AND ip.objoid = m.objid
  UNION ALL
  $rel_lines
  UNION ALL
  SELECT 'stray', pg_describe_object('pg_class'::regclass, c.oid, 0)
    FROM pg_class c, ext e
   WHERE c.relnamespace = e.extnamespace AND c.relkind IN ('r', 'p', 'S', 'v', 'm', 'f', 'c')
     AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                              AND d.deptype IN ('e', 'i', 'a'))
     AND NOT EXISTS (SELECT FROM queue.queue_config q
                      WHERE c.relname IN ('q_' || q.name, 'a_' || q.name, 's_' || q.name, 'l_' || q.name))
  UNION ALL
  SELECT 'stray', pg_describe_object('pg_proc'::regclass, p.oid, 0)
    FROM pg_proc p, ext e
   WHERE p.pronamespace = e.extnamespace
     AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                                              AND d.deptype = 'e')
  UNION ALL
  SELECT 'stray', pg_describe_object('pg_type'::regclass, t.oid, 0)
    FROM pg_type t, ext e
   WHERE t.typnamespace = e.extnamespace AND t.typrelid = 0
     AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_type'::regclass AND d.objid = t.oid
                                              AND d.deptype IN ('e', 'i'))
)
SELECT obj || ' | ' || line FROM lines ORDER BY obj COLLATE "C", line COLLATE "C"};

# The same for the tables, sequence and indexes of queue $q.
sub queue_rels_sql
{
	my ($q) = @_;
	return qq{
WITH rel AS (
  SELECT c.oid, c.relname AS obj FROM pg_class c
   WHERE c.relnamespace = 'queue'::regnamespace AND c.relkind IN ('r', 'p', 'S')
     AND c.relname ~ '^[qasl]_$q(\\\$|\$)'),
lines(obj, line) AS ($rel_lines)
SELECT obj || ' | ' || line FROM lines ORDER BY obj COLLATE "C", line COLLATE "C"};
}

# ---------------------------------------------------------------- per start version

my $n_db = 0;
for my $start (@chained)
{
	my $db = $n_db++ ? 'upg_' . ($start =~ s/\W/_/gr) : 'upg';
	upgrade_from($start, $db);
}

sub upgrade_from
{
	my ($start, $db) = @_;
	my $sql = sub { $node->safe_psql($db, $_[0]) };

	note("upgrade from $start in database $db");
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$sql->(qq{CREATE EXTENSION queue VERSION '$start'});
	is($sql->(q{SELECT extversion FROM pg_extension WHERE extname = 'queue'}),
		$start, "$db: CREATE EXTENSION queue VERSION '$start'");

	# ------------------------------------------------ made by the old version
	$sql->(
		q{
SELECT queue.create('plain');
SELECT queue.create('limited', max_running => 2);
SELECT queue.create('grouped', group_retry => 'requeue');
SELECT queue.create('noarch', retention => '0', max_attempts => 1);
SELECT queue.create('paused');
SELECT queue.create('owned');
SELECT queue.set_owner('owned', 'upg_owner');
SELECT queue.create('doomed');
SELECT queue.create('expiring');
});
	# before 0.4 a role used a queue through privileges on its tables, which
	# the upgrade to 0.4 translates; from 0.4 on it is given them on the queue
	my $table_privileges = $start =~ /^0\.[123]$/;
	$sql->($table_privileges ? q{
GRANT USAGE ON SEQUENCE queue."q_doomed$seq" TO upg_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON queue.q_doomed TO upg_app;
GRANT INSERT ON queue.a_doomed TO upg_app;
} : q{
SELECT queue.grant('doomed', 'upg_app', 'produce');
SELECT queue.grant('doomed', 'upg_app', 'consume');
SELECT queue.grant('doomed', 'upg_app', 'read');
});
is($sql->(q{BEGIN; SET ROLE upg_app; SELECT queue.enqueue('doomed', '{}') > 0; ROLLBACK}),
	't', "$db: before the upgrade, the role's privileges let it enqueue");

	my %id;
	my $enqueue = sub {
		my ($label, $queue, $args) = @_;
		$args = defined $args ? ", $args" : '';
		$id{$label} = $sql->(qq{SELECT queue.enqueue('$queue', '{"job": "$label"}'$args)});
	};

	# The consumer holds the running jobs, in a session that stays
	# connected through the upgrade (the worker returns the jobs of
	# claimers that are gone).
	my $consumer = QueueTestSession->new($node, $db, 'consumer');

	$enqueue->('p_single', 'plain');
	is($consumer->query(q{SELECT id || '|' || attempt FROM queue.claim('plain', 1, lease => '1 hour')}),
		"$id{p_single}|1", "$db: a single-job claim in autocommit");
	$enqueue->('p_batch1', 'plain');
	$enqueue->('p_batch2', 'plain');
	is( $consumer->query(
			q{SELECT string_agg(id || '|' || attempt, ',' ORDER BY id) FROM queue.claim('plain', 2, lease => '1 hour')}),
		"$id{p_batch1}|1,$id{p_batch2}|1",
		"$db: a claim of two in autocommit");
	is($sql->(q{SELECT count(*) || '|' || max(cardinality(ids)) FROM queue.l_plain}),
		'1|2', "$db: takes one batch lease for both");
	$enqueue->('p_done', 'plain');
	is($sql->(q{SELECT id || '|' || queue.complete(id) FROM queue.claim('plain')}),
		"$id{p_done}|true", "$db: a job claimed and completed");
	$enqueue->('p_cancel', 'plain');
	$sql->(qq{SELECT queue.cancel($id{p_cancel})});
	$enqueue->('p_ready1', 'plain');
	$enqueue->('p_ready5', 'plain', 'priority => 5');
	$enqueue->('p_dedup', 'plain', q{dedup_key => 'k1'});
	$enqueue->('p_sched', 'plain', q{run_at => now() + interval '1 hour'});

	$enqueue->('l_run', 'limited');
	is($consumer->query(q{SELECT id FROM queue.claim('limited', 1, lease => '1 hour')}),
		$id{l_run}, "$db: a job of the max_running queue claimed");
	$enqueue->('l_ready', 'limited');

	$enqueue->('g_head', 'grouped', q{group_key => 'g'});
	$enqueue->('r_head', 'grouped', q{group_key => 'r'});
	$enqueue->('g_next', 'grouped', q{group_key => 'g'});
	$enqueue->('r_next', 'grouped', q{group_key => 'r'});
	is( $consumer->query(
			q{SELECT string_agg(id::text, ',' ORDER BY id) FROM queue.claim('grouped', 5, lease => '1 hour')}),
		join(',', sort { $a <=> $b } @id{qw(g_head r_head)}),
		"$db: only the heads of the two groups are claimed");

	$enqueue->('n_dead', 'noarch');
	is($sql->(q{SELECT id || '|' || queue.fail(id, 'boom') FROM queue.claim('noarch')}),
		"$id{n_dead}|dead", "$db: a job of a max_attempts 1 queue fails to death");
	$enqueue->('n_done', 'noarch');
	is($sql->(q{SELECT queue.complete(id) FROM queue.claim('noarch')}),
		't', "$db: and one is completed (retention 0: no archive)");

	$enqueue->('pa1', 'paused');
	$enqueue->('pa2', 'paused');
	$sql->(q{SELECT queue.pause('paused')});

	$enqueue->('o_ready', 'owned');

	$enqueue->('d_done', 'doomed');
	$sql->(q{SELECT queue.complete(id) FROM queue.claim('doomed', 1)});
	$enqueue->('d_ready', 'doomed');

	# Leases that run out after the upgrade: the worker must return them.
	# Claimed last, just before the state is recorded.
	my $short = 8;
	$enqueue->('e_single', 'expiring');
	$enqueue->('e_batch1', 'expiring');
	$enqueue->('e_batch2', 'expiring');
	is( $consumer->query(
			qq{SELECT id FROM queue.claim('expiring', 1, lease => '$short s');
SELECT count(*) FROM queue.claim('expiring', 2, lease => '$short s')}),
		"$id{e_single}\n2",
		"$db: jobs claimed for $short s, one alone and two under a batch lease");

	my @expect = (
		[ p_single => 'running', 1 ], [ p_batch1 => 'running', 1 ],
		[ p_batch2 => 'running', 1 ], [ p_ready1 => 'ready', 0 ],
		[ p_ready5 => 'ready', 0 ], [ p_dedup => 'ready', 0 ],
		[ p_sched => 'scheduled', 0 ], [ l_run => 'running', 1 ],
		[ l_ready => 'ready', 0 ], [ g_head => 'running', 1 ],
		[ g_next => 'waiting', 0 ], [ r_head => 'running', 1 ],
		[ r_next => 'waiting', 0 ], [ n_dead => 'dead', 1 ],
		[ pa1 => 'ready', 0 ], [ pa2 => 'ready', 0 ],
		[ o_ready => 'ready', 0 ], [ d_ready => 'ready', 0 ],
		[ e_single => 'running', 1 ], [ e_batch1 => 'running', 1 ],
		[ e_batch2 => 'running', 1 ]);
	is( $sql->(q{SELECT id || '|' || state || '|' || attempt FROM queue.jobs ORDER BY id}),
		join("\n", map { "$id{$_->[0]}|$_->[1]|$_->[2]" }
			  sort { $id{ $a->[0] } <=> $id{ $b->[0] } } @expect),
		"$db: before the upgrade, the jobs are in their states");
	is( $sql->(q{SELECT id || '|' || state FROM queue.archive ORDER BY id}),
		join("\n", map { "$id{$_->[0]}|$_->[1]" }
			  sort { $id{ $a->[0] } <=> $id{ $b->[0] } }
			  ([ p_done => 'done' ], [ p_cancel => 'cancelled' ], [ d_done => 'done' ])),
		"$db: and the archive holds the done and cancelled jobs");
	my $stats_sql = q{SELECT queue, ready, scheduled, running, dead, waiting FROM queue.stats ORDER BY queue};
	is( $sql->($stats_sql),
		$sql->(
			q{SELECT name,
       count(*) FILTER (WHERE j.state = 'ready'), count(*) FILTER (WHERE j.state = 'scheduled'),
       count(*) FILTER (WHERE j.state = 'running'), count(*) FILTER (WHERE j.state = 'dead'),
       count(*) FILTER (WHERE j.state = 'waiting')
  FROM queue.queue_config c LEFT JOIN queue.jobs j ON j.queue = c.name GROUP BY name ORDER BY name}),
		"$db: stats count the jobs");

	# What must be the same after the upgrade: the views and the rows
	# under them, with the columns the old version has (a new version may
	# add some).
	# (the tables under the views span the queues' tables: which one holds
	# a row is part of it)
	my @snap = (
		[ jobs => 'queue.jobs', 'id' ],
		[ archive => 'queue.archive', 'id' ],
		[ queues => 'queue.queues', 'queue' ],
		[ config => 'queue.queue_config', 'qno' ],
		[ rows => 'queue._job', 'id', 1 ],
		[ leases => 'queue._lease', 'lease', 1 ],
		[ slots => 'queue._slot', '1, slot', 1 ],
		[ archive_rows => 'queue._archive', 'id', 1 ]);
	my %query = (
		stats => $stats_sql,
		sequence => 'SELECT last_value, is_called FROM queue.queue_number_seq',
		history =>
		  'SELECT j.id, h.at, h.event, h.attempt, h.detail'
		  . ' FROM (SELECT id FROM queue.jobs UNION ALL SELECT id FROM queue.archive) j,'
		  . ' queue.history(j.id) h ORDER BY j.id, h.at, h.event');
	for my $s (@snap)
	{
		my ($k, $rel, $order, $parent) = @$s;
		my $cols = $sql->(
			qq{SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
			    WHERE attrelid = '$rel'::regclass AND attnum > 0 AND NOT attisdropped});
		$cols = "tableoid::regclass::text, $cols" if $parent;
		$query{$k} = "SELECT $cols FROM $rel ORDER BY $order";
	}
	my %before = map { $_ => $sql->($query{$_}) } keys %query;
	like($before{history}, qr/\|failed\|1\|boom\n/, "$db: the history of the dead job has its failure");

	# ------------------------------------------------ upgrade
	my $log_from = -s $node->logfile;
	$sql->('ALTER EXTENSION queue UPDATE');
	is($sql->(q{SELECT extversion FROM pg_extension WHERE extname = 'queue'}),
		$default, "$db: ALTER EXTENSION queue UPDATE: from $start to $default");

	for my $k (sort keys %query)
	{
		same_text($sql->($query{$k}), $before{$k}, "$db: $k the same after the upgrade", "$db.$k");
	}

	# ------------------------------------------------ table privileges became the queue's
	is( $sql->(q{SELECT string_agg(queue || ':' || role || ':' || privilege, ',' ORDER BY privilege) FROM queue.grants}),
		'doomed:upg_app:consume,doomed:upg_app:produce,doomed:upg_app:read',
		$table_privileges ? "$db: INSERT, UPDATE and SELECT on q_doomed became produce, consume and read on doomed"
		: "$db: the grants on doomed stay");
	is( $sql->(
			q{BEGIN; SET ROLE upg_app;
SELECT queue.enqueue('doomed', '{}') > 0;
SELECT count(*) FROM queue.claim('doomed');
ROLLBACK}), "t
1", "$db: and the role enqueues and claims through them");
	my ($ret, $out, $err) =
	  $node->psql($db, q{SET ROLE upg_app; SELECT queue.enqueue('limited', '{}')});
	like($err, qr/permission denied for queue "limited"/, "$db: but nothing of another queue");

	# ------------------------------------------------ the old jobs work
	# fencing tokens, from the consumer that claimed them before
	is( $consumer->query(
			qq{SELECT queue.complete($id{p_single}, attempt => 2);
SELECT queue.complete($id{p_single}, attempt => 1)}),
		"f\nt", "$db: the single-claimed job: a wrong token changes nothing, its own completes it");
	is( $consumer->query(
			qq{SELECT queue.complete($id{p_batch1}, attempt => 2);
SELECT queue.complete($id{p_batch1}, attempt => 1);
SELECT queue.complete($id{p_batch2}, attempt => 1)}),
		"f\nt\nt", "$db: the jobs of the batch lease: likewise");
	is($sql->(q{SELECT count(*) FROM queue.l_plain}), '0', "$db: the batch lease is gone");

	is($sql->(qq{SELECT string_agg(event || ':' || attempt, ',' ORDER BY at, event) FROM queue.history($id{p_single})}),
		'enqueued:0,claimed:1,completed:1', "$db: history of a job claimed before and completed after");

	is($sql->(q{SELECT queue.enqueue('plain', '{"dup": 1}', dedup_key => 'k1')}),
		$id{p_dedup}, "$db: the dedup_key still maps to its job");
	my $qno_plain = $sql->(q{SELECT qno FROM queue.queue_config WHERE name = 'plain'});
	my $p_new = $sql->(q{SELECT queue.enqueue('plain', '{"new": 1}')});
	ok($p_new % 1000000 == $qno_plain && $p_new > $id{p_sched},
		"$db: a new job of an old queue carries its number, after its ids");
	is( $sql->(
			q{BEGIN;
SELECT string_agg(c.id || ':' || c.attempt || ':' || queue.complete(c.id), ',' ORDER BY c.n)
  FROM queue.claim('plain', 10) WITH ORDINALITY c(id, payload, attempt, group_key, enqueued_at, lease_until, n);
COMMIT}),
		join(',', map { "$_:1:true" } @id{qw(p_ready5 p_ready1 p_dedup)}, $p_new),
		"$db: the ready jobs are claimed by priority, then in order, and completed");

	# max_running: the old running job holds its slot
	my @l_new = split /\n/,
	  $sql->(q{SELECT queue.enqueue_batch('limited', ARRAY['{"n": 1}', '{"n": 2}']::jsonb[])});
	is( $sql->(q{BEGIN; SELECT string_agg(id::text, ',') FROM queue.claim('limited', 5); ROLLBACK}),
		$id{l_ready}, "$db: max_running 2 with one old job running: one more is claimed");
	is($consumer->query(qq{SELECT queue.complete($id{l_run}, attempt => 1)}),
		't', "$db: the old running job completes with its token");
	is( $sql->(
			q{BEGIN;
SELECT string_agg(id::text, ',' ORDER BY id) AS ids, array_agg(id) AS arr FROM queue.claim('limited', 5) \gset
SELECT :'ids';
SELECT queue.complete(:'arr'::bigint[]);
COMMIT}),
		join(',', $id{l_ready}, $l_new[0]) . "\n2",
		"$db: then two are claimed (the cap) and completed");

	# groups
	is($sql->(qq{SELECT state FROM queue.jobs WHERE id = $id{g_next}}),
		'waiting', "$db: the job behind the group's head still waits");
	is($consumer->query(qq{SELECT queue.complete($id{g_head}, attempt => 1)}),
		't', "$db: its head completes");
	is($sql->(qq{SELECT state FROM queue.jobs WHERE id = $id{g_next}}),
		'ready', "$db: and it is ready");
	# group_retry 'requeue': a head that will be retried goes behind its group
	is($consumer->query(qq{SELECT queue.fail($id{r_head}, 'later', retry_in => '0', attempt => 1)}),
		'retry', "$db: the other group's head fails, to be retried");
	is( $sql->(qq{SELECT string_agg(state, ',' ORDER BY id) FROM queue.jobs WHERE id IN ($id{r_head}, $id{r_next})}),
		'waiting,ready', "$db: and waits behind the next job of its group (requeue)");
	is( $sql->(
			q{BEGIN;
SELECT string_agg(id || ':' || attempt || ':' || queue.complete(id), ',' ORDER BY id) FROM queue.claim('grouped', 5);
COMMIT;
SELECT string_agg(id || ':' || attempt || ':' || queue.complete(id), ',' ORDER BY id) FROM queue.claim('grouped', 5)}),
		join(',', map { "$_:1:true" } sort { $a <=> $b } @id{qw(g_next r_next)}) . "\n$id{r_head}:2:true",
		"$db: the two next jobs are claimed and completed, then the requeued head");

	# the dead job
	$sql->(qq{SELECT queue.retry($id{n_dead})});
	is($sql->(qq{SELECT state || '|' || attempt FROM queue.jobs WHERE id = $id{n_dead}}),
		'ready|1', "$db: the dead job is retried");
	is($sql->(q{SELECT id || ':' || attempt || ':' || queue.complete(id) FROM queue.claim('noarch')}),
		"$id{n_dead}:2:true", "$db: and claimed with the next attempt, and completed");
	is($sql->(q{SELECT count(*) FROM queue.jobs WHERE queue = 'noarch'}) . '|'
		  . $sql->(q{SELECT count(*) FROM queue.archive WHERE queue = 'noarch'}),
		'0|0', "$db: gone, without an archive (retention 0)");

	# pause
	is($sql->(q{SELECT count(*) FROM queue.claim('paused', 10)}),
		'0', "$db: the paused queue hands out nothing");
	$sql->(q{SELECT queue.resume('paused')});
	is( $sql->(
			q{BEGIN;
SELECT string_agg(id || ':' || queue.complete(id), ',' ORDER BY id) FROM queue.claim('paused', 10);
COMMIT}),
		"$id{pa1}:true,$id{pa2}:true",
		"$db: resumed, it does");

	# tick(): a superuser's covers the queues superusers own, the owner's its own
	is( $sql->(q{SELECT string_agg(queue, ',' ORDER BY queue) FROM queue.tick()}),
		'doomed,expiring,grouped,limited,noarch,paused,plain',
		"$db: queue.tick() runs over the superuser's queues");
	is( $sql->(q{SET ROLE upg_owner; SELECT string_agg(queue, ',') FROM queue.tick(); RESET ROLE}),
		'owned', "$db: and, run by the owner of the queue given away, over that one");

	# a schedule on an old queue, fired by tick()
	is( $sql->(
			q{BEGIN;
SELECT queue.schedule('upg-s', 'plain', every => '1 hour', payload => '{"s": 1}') > now();
UPDATE queue.queue_schedules SET next_run_at = now() - interval '1 second';
SELECT count(*) FROM queue.tick() WHERE queue = 'plain';
SELECT count(*) FROM queue.jobs WHERE queue = 'plain' AND payload = '{"s": 1}';
ROLLBACK}), "t\n1\n1", "$db: a schedule on an old queue fires");

	# drop an old queue, create a new one
	$sql->(q{SELECT queue.drop('doomed')});
	is( $sql->(
			q{SELECT count(*) FROM pg_class WHERE relnamespace = 'queue'::regnamespace AND relname ~ '^[qasl]_doomed($|\$)'})
		  . '|'
		  . $sql->(q{SELECT count(*) FROM queue.queue_config WHERE name = 'doomed'}) . '|'
		  . $sql->(
			q{SELECT count(*) FROM (SELECT queue FROM queue.jobs UNION ALL SELECT queue FROM queue.archive) x WHERE queue = 'doomed'}
		  ),
		'0|0|0',
		"$db: queue.drop of an old queue removes its tables, its row and its jobs");
	$sql->(q{SELECT queue.create('after_cmp')});
	my $qno_cmp = $sql->(q{SELECT qno FROM queue.queue_config WHERE name = 'after_cmp'});
	my $a_id = $sql->(q{SELECT queue.enqueue('after_cmp', '{"a": 1}')});
	is($a_id % 1000000, $qno_cmp, "$db: queue.create after the upgrade: a new queue");
	is($sql->(q{SELECT id || ':' || queue.complete(id) FROM queue.claim('after_cmp')}),
		"$a_id:true", "$db: its job is claimed and completed");
	is($sql->(qq{SELECT state FROM queue.archive WHERE id = $a_id}), 'done', "$db: into its archive");

	# The worker: scheduled jobs made ready on time (nothing else claims
	# from these queues now or calls tick()), also in the queue owned by
	# an ordinary role, and the old leases returned when they run out.
	my $p_later = $sql->(q{SELECT queue.enqueue('plain', '{"later": 1}', delay => '2 s')});
	my $o_later = $sql->(q{SELECT queue.enqueue('owned', '{"later": 1}', delay => '2 s')});
	my $t0 = time;
	is($sql->(qq{SELECT string_agg(state, ',') FROM queue.jobs WHERE id IN ($p_later, $o_later)}),
		'scheduled,scheduled', "$db: two jobs scheduled 2 s out");
	my $ready = poll_for($node, $db,
		qq{SELECT count(*) FROM queue.jobs WHERE id IN ($p_later, $o_later) AND state = 'ready'}, '2', 20);
	my $took = time - $t0;
	ok(defined $ready && $took > 1.5, "$db: the worker makes both ready when due")
	  or diag(sprintf 'after %.2f s', $took);
	ok( defined poll_for(
			$node, $db,
			q{SELECT string_agg(state || '|' || attempt || '|' || last_error, ',') FROM queue.jobs WHERE queue = 'expiring'},
			join(',', ('ready|1|lease expired') x 3), 30),
		"$db: the worker returns the old jobs whose leases ran out (the single claim and the batch)");
	is($consumer->query(qq{SELECT queue.complete($id{e_single}, attempt => 1)}),
		'f', "$db: and their old token no longer completes them");
	is( $sql->(
			q{BEGIN;
SELECT string_agg(id || ':' || attempt || ':' || queue.complete(id), ',' ORDER BY id) FROM queue.claim('expiring', 10);
COMMIT}),
		join(',', map { "$_:2:true" } @id{qw(e_single e_batch1 e_batch2)}),
		"$db: they are claimed again, with the next attempt");

	my $log = substr(slurp_file($node->logfile), $log_from);
	my @crashes = $log =~ /^.*(?:background worker "queue .*" \(PID \d+\) (?:exited with exit code [1-9]|was terminated by signal)|server process .* was terminated).*$/mg;
	is(join("\n", @crashes), '', "$db: no worker or backend failed since the upgrade");

	# ------------------------------------------------ the schema
	# The same queues in the fresh database, with the same numbers: plain,
	# made by the old version, and after_cmp, made by the new one.  Both
	# must have the tables queue.create makes now (an upgrade that changes
	# them must change the old queues' too).
	my @cmp = qw(plain after_cmp);
	my %qno = map { $_ => $sql->(qq{SELECT qno FROM queue.queue_config WHERE name = '$_'}) } @cmp;
	$node->safe_psql('fresh', qq{SELECT queue.drop('$_', if_exists => true)}) for @cmp;
	for my $q (@cmp)
	{
		$node->safe_psql('fresh',
			qq{SELECT setval('queue.queue_number_seq', greatest($qno{$q} - 1, 1), $qno{$q} > 1);
SELECT queue.create('$q')});
		is($node->safe_psql('fresh', qq{SELECT qno FROM queue.queue_config WHERE name = '$q'}),
			$qno{$q}, "fresh: queue $q gets number $qno{$q} too");
	}

	my %dump;
	for my $d ($db, 'fresh')
	{
		$dump{$d} = mask_dump(pg_dump($d, '--binary-upgrade',
				map { '--exclude-table=queue."' . ($_ =~ s/"/""/gr) . '"' } non_members($d)));
	}
	like($dump{$db}, qr/^ALTER EXTENSION queue ADD FUNCTION queue\.enqueue\(/m,
		"$db: the binary-upgrade dump prints the members");
	# (compared as sorted blocks, shown in pg_dump's order)
	same_text(join('', sort(blocks($dump{$db}))), join('', sort(blocks($dump{fresh}))),
		"$db: pg_dump --binary-upgrade of the members: the same as fresh", "$db.members.dump",
		$dump{$db}, $dump{fresh});
	unlike($dump{$db}, qr/\b(?:q|a|s|l)_(?:plain|after_cmp)\b/, "$db: and none of the queues' tables");

	my %listing = map { $_ => $node->safe_psql($_, $members_sql) } $db, 'fresh';
	like($listing{$db}, qr/^function queue\.claim\(text,integer,interval,interval\) \| member$/m,
		"$db: the catalog listing names the members");
	same_text($listing{$db}, $listing{fresh},
		"$db: the members in the catalogs: the same as fresh", "$db.members.catalog");

	for my $q (@cmp)
	{
		my $when = $q eq 'plain' ? "made by $start" : 'created after the upgrade';
		my %ddl = map {
			$_ => pg_dump($_, '-t', "queue.?_$q", '-t', "queue.?_$q\$*") =~ s/^\\(un)?restrict .*\n//mgr
		} $db, 'fresh';
		like($ddl{$db},
			qr/^CREATE TABLE queue\.q_$q \(\n    CONSTRAINT "q_$q\$id" CHECK \(\(\(id % \(1000000\)::bigint\) = \d+\)\)\n\)\nINHERITS \(queue\._job\)/m,
			"$db: pg_dump of queue $q prints its tables, the CHECK on ids included");
		same_text($ddl{$db}, $ddl{fresh},
			"$db: pg_dump of queue $q ($when): the same as one created fresh", "$db.queue.$q.dump");
		my %list = map { $_ => $node->safe_psql($_, queue_rels_sql($q)) } $db, 'fresh';
		like($list{$db}, qr/^q_$q \| index CREATE INDEX "q_$q\$ready"/m,
			"$db: the catalog listing of queue $q has its indexes");
		same_text($list{$db}, $list{fresh},
			"$db: queue $q ($when) in the catalogs: the same as one created fresh", "$db.queue.$q.catalog");
	}

	# ------------------------------------------------ drop and create again
	$consumer->close;
	$sql->('DROP EXTENSION queue CASCADE');
	is( $sql->(
			q{SELECT coalesce(string_agg(relname, ', ' ORDER BY relname), '') FROM pg_class
			   WHERE relnamespace = 'queue'::regnamespace}),
		'', "$db: DROP EXTENSION CASCADE leaves no relation in schema queue");
	is( $sql->(
			q{SELECT count(*) FROM pg_type WHERE typnamespace = 'queue'::regnamespace}) . '|'
		  . $sql->(q{SELECT count(*) FROM pg_proc WHERE pronamespace = 'queue'::regnamespace}),
		'0|0', "$db: nor a type or function");
	$sql->('CREATE EXTENSION queue');
	is( $sql->(
			q{SELECT extversion FROM pg_extension WHERE extname = 'queue';
SELECT queue.create('plain');
SELECT queue.enqueue('plain', '{}') % 1000000;
SELECT count(*) FROM queue.jobs}),
		"$default\n\n1\n1", "$db: CREATE EXTENSION again: $default, from scratch, and works");
	return;
}

# ------------------------------------------- who may create queues, kept
# 0.7 gave queue.create new options, so a new function: the roles it was
# granted to keep it, as grants of their own (pg_dump prints them), while
# its initial privileges stay those of a fresh install.
if (grep { $_ eq '0.6' } @chained)
{
	my $sql = sub { $node->safe_psql('grants', $_[0]) };
	$node->safe_psql('postgres', 'CREATE DATABASE grants');
	$sql->(q{CREATE EXTENSION queue VERSION '0.6'; CREATE ROLE up_creator; CREATE ROLE up_lead;
GRANT EXECUTE ON FUNCTION queue.create TO up_creator; GRANT EXECUTE ON FUNCTION queue.create TO up_lead WITH GRANT OPTION});
	$sql->('ALTER EXTENSION queue UPDATE');
	my $fn = q{'queue.create(text, int, interval, interval, interval, interval, boolean, int, text, int, interval, int)'::regprocedure};
	is($sql->(qq{SELECT has_function_privilege('up_creator', $fn, 'EXECUTE'), has_function_privilege('up_lead', $fn, 'EXECUTE WITH GRANT OPTION'),
  has_function_privilege('public', $fn, 'EXECUTE')}), 't|t|f',
		'grants: after the upgrade the roles granted queue.create still have it (with the grant option), PUBLIC not');
	is($sql->(qq{SET ROLE up_creator; SELECT queue.create('by_creator', rate_limit => 10); RESET ROLE;
SELECT rate_limit FROM queue.queues WHERE queue = 'by_creator'}), "
10",
		'grants: and the role creates a queue with the new options');
	is($sql->(qq{SELECT ip.initprivs::text FROM pg_init_privs ip WHERE ip.objoid = $fn}),
		$node->safe_psql('fresh', qq{SELECT ip.initprivs::text FROM pg_init_privs ip WHERE ip.objoid = $fn}),
		'grants: its initial privileges are those of a fresh install');
	my $dump = pg_dump('grants');
	like($dump, qr/^GRANT ALL ON FUNCTION queue\."create"\(.*rate_limit integer.*\) TO up_creator;$/m,
		'grants: pg_dump prints the grant, so that a restore keeps it');
	$sql->('DROP EXTENSION queue CASCADE');
	$node->safe_psql('postgres', 'DROP DATABASE grants; DROP ROLE up_creator; DROP ROLE up_lead');
}

settle($node);
$node->stop;
done_testing();
