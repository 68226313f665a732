# test/perl/QueueTest.pm: helpers the cluster tests (test/t/*.pl) share.
#
# QueueTestSession, a psql session that stays connected; a LISTEN session
# in python3 with psycopg2 (listener_*); poll_for, which polls a query
# until it returns what is expected; and settle, which waits until a node
# has no client backends left before it is stopped.

use strict;
use warnings;

# A psql session that stays connected: send() a statement without waiting,
# wait() for it to finish (returns stdout, stderr and when it finished), or
# query() both at once.  Lighter than BackgroundPsql for tight polling.
package QueueTestSession;

use IPC::Run;
use Time::HiRes qw(time sleep);

sub new
{
	my ($class, $node, $db, $app) = @_;
	my $self = bless { in => '', out => '', err => '', n => 0, app => $app },
	  $class;
	$self->{h} = IPC::Run::start(
		[
			$node->installed_command('psql'), '-XAtq',
			'-v', 'VERBOSITY=verbose',
			'-d', $node->connstr($db) . " application_name=$app",
			'-f', '-'
		],
		'<', \$self->{in}, '>', \$self->{out}, '2>', \$self->{err});
	my ($pid) = $self->query('SELECT pg_backend_pid()');
	die "session $app did not connect: $self->{err}" unless $pid =~ /^\d+$/;
	$self->{pid} = $pid;
	return $self;
}

sub send
{
	my ($self, $sql) = @_;
	my $n = ++$self->{n};
	$self->{mark} = "__queue_test_done_${n}__";
	$self->{in} .= "$sql\n;\n\\echo '$self->{mark}'\n\\warn '$self->{mark}'\n";
	$self->{h}->pump_nb;
	return;
}

# Waits up to $timeout seconds; returns (stdout, stderr, finish time), or
# an empty list on timeout (the statement is then still running).
sub wait
{
	my ($self, $timeout) = @_;
	my $deadline = time + (defined $timeout ? $timeout : 60);
	my $mark = $self->{mark};
	while (1)
	{
		$self->{h}->pump_nb if $self->{h}->pumpable;
		if ($self->{out} =~ /\Q$mark\E\n/ && $self->{err} =~ /\Q$mark\E\n/)
		{
			my $at = time;
			my ($out, $err) = ($self->{out}, $self->{err});
			$out =~ s/\n?\Q$mark\E\n//;
			$err =~ s/\n?\Q$mark\E\n//;
			$self->{out} = $self->{err} = '';
			chomp $out;
			return ($out, $err, $at);
		}
		return () if time > $deadline || !$self->{h}->pumpable;
		sleep 0.002;
	}
}

# In list context (stdout, stderr); in scalar context stdout, dying on
# anything written to stderr.
sub query
{
	my ($self, $sql, $timeout) = @_;
	$self->send($sql);
	my ($out, $err) = $self->wait($timeout);
	die "session $self->{app}: no answer to: $sql\nstderr: $self->{err}"
	  unless defined $out;
	return ($out, $err) if wantarray;
	die "session $self->{app}: $sql\nfailed: $err" if $err ne '';
	return $out;
}

sub close
{
	my ($self) = @_;
	eval {
		$self->{h}->pump_nb if $self->{h}->pumpable;
		$self->{in} .= "\\q\n" if $self->{h}->pumpable;
		$self->{h}->finish;
	};
	eval { $self->{h}->kill_kill; };
	# psql has exited, but its backend may not yet have read the goodbye; a
	# stop in that window logs a FATAL for it, so wait for it to go.
	my $deadline = time + 10;
	sleep 0.005 while kill(0, $self->{pid}) && time < $deadline;
	return;
}

package QueueTest;

use Exporter 'import';
use IPC::Run;
use Test::More;
use Time::HiRes qw(time sleep);

our @EXPORT = qw(listener_start listener_take listener_collect_until
  listener_wait listener_stop poll_for settle autovacuum_ended cpu_ticks);


# A LISTEN session in python3 with psycopg2 that prints, for every
# notification, its channel and the time it arrived.
my $listener_py = <<'PY';
import select, sys, time
import psycopg2, psycopg2.extensions
conn = psycopg2.connect(sys.argv[1])
conn.set_isolation_level(psycopg2.extensions.ISOLATION_LEVEL_AUTOCOMMIT)
cur = conn.cursor()
for ch in sys.argv[2:]:
    cur.execute('LISTEN "%s"' % ch)
cur.execute('SELECT pg_backend_pid()')
print('ready %d' % cur.fetchone()[0], flush=True)
while True:
    r, _, _ = select.select([conn, sys.stdin], [], [], 1.0)
    if sys.stdin in r:
        # any input, or its end, means stop: leave without the server
        # writing a notification to a closed socket
        cur.execute('UNLISTEN *')
        conn.close()
        break
    conn.poll()
    while conn.notifies:
        n = conn.notifies.pop(0)
        print('notify %s %.6f %d' % (n.channel, time.time(), n.pid), flush=True)
PY

sub listener_start
{
	my ($node, $db, @channels) = @_;
	my $l = { in => '', out => '', err => '', got => [] };
	$l->{h} = IPC::Run::start([ 'python3', '-c', $listener_py, $node->connstr($db), @channels ],
		'<', \$l->{in}, '>', \$l->{out}, '2>', \$l->{err});
	my $deadline = time + 30;
	while ($l->{out} !~ /^ready (\d+)\n/m)
	{
		die "listener did not start: $l->{err}"
		  if time > $deadline || !$l->{h}->pumpable;
		$l->{h}->pump_nb;
		sleep 0.005;
	}
	$l->{out} =~ s/^ready (\d+)\n//m;
	$l->{pid} = $1;
	return $l;
}

# Notifications received so far and not yet taken, as [channel, time].
sub listener_take
{
	my ($l) = @_;
	$l->{h}->pump_nb if $l->{h}->pumpable;
	while ($l->{out} =~ s/^notify (\S+) ([\d.]+) \d+\n//m)
	{
		push @{ $l->{got} }, [ $1, $2 ];
	}
	my @got = @{ $l->{got} };
	$l->{got} = [];
	return @got;
}

# Collects notifications until $until (an absolute time).
sub listener_collect_until
{
	my ($l, $until) = @_;
	my @all;
	while (1)
	{
		push @all, listener_take($l);
		last if time >= $until;
		sleep 0.005;
	}
	return @all;
}

# Waits up to $timeout for a notification on $channel; returns its arrival
# time (undef on timeout) and, in list context, every notification taken
# meanwhile.
sub listener_wait
{
	my ($l, $channel, $timeout) = @_;
	my $deadline = time + $timeout;
	my @seen;
	while (1)
	{
		my @got = listener_take($l);
		push @seen, @got;
		for my $n (@got)
		{
			return wantarray ? ($n->[1], \@seen) : $n->[1] if $n->[0] eq $channel;
		}
		return wantarray ? (undef, \@seen) : undef if time > $deadline;
		sleep 0.005;
	}
}

sub listener_stop
{
	my ($l) = @_;
	eval {
		$l->{in} .= "quit\n";
		$l->{h}->pump_nb while $l->{h}->pumpable && $l->{in} ne '';
		$l->{h}->finish;
	};
	eval { $l->{h}->kill_kill(grace => 5); };
	return;
}

# Polls $sql until it returns $expect, through a QueueTestSession or, given a
# node and a database name, through safe_psql; returns the seconds it took,
# or undef after $timeout seconds.
sub poll_for
{
	my $via = shift;
	my $run;
	if (ref $via eq 'QueueTestSession')
	{
		$run = sub { $via->query($_[0]) };
	}
	else
	{
		my $db = shift;
		$run = sub { $via->safe_psql($db, $_[0]) };
	}
	my ($sql, $expect, $timeout) = @_;
	my $t0 = time;
	while (1)
	{
		my $got = $run->($sql);
		return time - $t0 if $got eq $expect;
		if (time - $t0 > $timeout)
		{
			diag("poll_for: '$sql' still returns '$got', not '$expect', after ${timeout}s");
			return undef;
		}
		sleep 0.01;
	}
}

# CPU time (utime + stime, in clock ticks) the processes @pids have used,
# together; undef if one of them is gone.
sub cpu_ticks
{
	my $ticks = 0;
	for my $pid (@_)
	{
		open my $fh, '<', "/proc/$pid/stat" or return undef;
		my @f = split ' ', (<$fh> =~ s/^.*\) //r);
		$ticks += $f[11] + $f[12];
	}
	return $ticks;
}

# Waits until no client backend but those in @keep (sessions left open on
# purpose) is connected to $node, so that stopping it terminates nobody else.
sub settle
{
	my ($node, @keep) = @_;
	my $s = QueueTestSession->new($node, 'postgres', 'settle');
	my $others = 'SELECT count(*) FROM pg_stat_activity'
	  . q{ WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()}
	  . (@keep ? ' AND pid NOT IN (' . join(',', @keep) . ')' : '');
	poll_for($s, $others, '0', 30);
	$s->close;
	return;
}

# Whether a server log line is the FATAL with which PostgreSQL ends an
# autovacuum worker that happens to run at a fast shutdown or DROP
# DATABASE: the server's doing, not a failure of the test.
sub autovacuum_ended
{
	my ($line) = @_;
	return $line =~
	  /\[autovacuum worker\] FATAL:  terminating autovacuum process due to administrator command$/;
}

1;
