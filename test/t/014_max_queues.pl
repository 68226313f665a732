# test/t/014_max_queues.pl: past queue.max_queues nothing gets slower
# silently.
#
# queue.max_queues (16 here) queues have their state in shared memory (the
# claim cursor, due time, counters); a queue past it works without. The
# table of that state took more entries than its size, from the shared
# memory the server keeps spare (which the lock table needs as it grows),
# and nothing told anyone when it was full.  Now:
#   1. the 16 queues made first have their state (queue.stats.shared_state);
#   2. the 17th warns at queue.create, naming queue.max_queues, and runs
#      without (shared_state false), while still working;
#   3. a create that rolls back gives its entry back;
#   4. queue.drop gives it back too, and the next queue gets it.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('max_queues');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'queue'
queue.max_queues = 16
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION queue');

# Creates queue $name; returns its WARNINGs.
sub create
{
	my ($name) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', qq{SELECT queue.create('$name')});
	die "create $name: $err" if $rc != 0;
	return join("\n", grep { /WARNING|HINT/ } split /\n/, $err);
}

sub shared_state
{
	my ($name) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT shared_state FROM queue.stats WHERE queue = '$name'});
}

my @warned = grep { create("mq_$_") ne '' } 1 .. 16;
is(scalar(@warned), 0, '1. 16 queues are made without a warning');
is( $node->safe_psql('postgres', q{SELECT count(*) FROM queue.stats WHERE shared_state}),
	'16', '1. all 16 have their shared state');

my $warning = create('mq_17');
like($warning, qr/WARNING:  queue "mq_17" runs without shared state: queue.max_queues \(16\) queues have it already/,
	'2. the 17th queue warns at create, naming queue.max_queues');
like($warning, qr/HINT:  Raise queue.max_queues/, '2. and says what to do');
is(shared_state('mq_17'), 'f', '2. queue.stats shows it runs without shared state');
is( $node->safe_psql('postgres',
		q{SELECT queue.enqueue('mq_17', '{}') > 0, (SELECT count(*) FROM queue.claim('mq_17'))}),
	't|1', '2. it still works');
$node->safe_psql('postgres', q{SELECT queue.drop('mq_17')});

$node->safe_psql('postgres', q{SELECT queue.drop('mq_16')});
my ($rc, $out, $err) = $node->psql('postgres',
	q{BEGIN; SELECT queue.create('mq_rolled_back'); ROLLBACK;});
is($rc, 0, '3. a create in a transaction that rolls back');
is(create('mq_after_rollback'), '', '3. the rolled-back create gave its entry back');
is(shared_state('mq_after_rollback'), 't', '3. the next queue has its shared state');

$node->safe_psql('postgres', q{SELECT queue.drop('mq_1')});
is(create('mq_after_drop'), '', '4. after queue.drop, a new queue gets the entry without a warning');
is(shared_state('mq_after_drop'), 't', '4. and has its shared state');

$node->stop;
done_testing();
