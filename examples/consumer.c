/*
 * consumer.c: a worker loop for the `queue` extension, with libpq.
 *
 *     consumer [--batch N] [--poll SECONDS] QUEUE COUNT
 *
 * Processes COUNT jobs of QUEUE in exactly-once mode (claim, work and
 * complete in one transaction), then exits 0.  Each processed job is
 * printed to stdout as "job ID ATTEMPT PAYLOAD"; a summary goes to stderr.
 * Connection settings come from the usual libpq environment variables
 * (PGHOST, PGPORT, PGUSER, PGDATABASE, ...).  Any database error is
 * printed and ends the program with exit status 1.
 *
 * The loop:
 *
 *     LISTEN queue_<QUEUE>               (once, at start)
 *     loop:
 *         BEGIN; claim up to N jobs; work; complete each; COMMIT
 *         if none were claimed: select() on PQsocket() until a
 *             notification arrives (or --poll seconds pass, as a safety
 *             net), PQconsumeInput() + PQnotifies(), then claim again
 *
 * Build:  cc -o consumer consumer.c -I$(pg_config --includedir) -lpq
 *         (or: make -C examples)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>

#include <libpq-fe.h>

static PGconn *conn;

static void
die(const char *what)
{
	fprintf(stderr, "consumer: %s: %s", what, PQerrorMessage(conn));
	PQfinish(conn);
	exit(1);
}

/* Run a statement that returns no rows; exit on any error. */
static void
exec_command(const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		PQclear(res);
		die(sql);
	}
	PQclear(res);
}

/* Run a parameterized query that returns rows; exit on any error. */
static PGresult *
exec_query(const char *sql, int nparams, const char *const *params)
{
	PGresult   *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		PQclear(res);
		die(sql);
	}
	return res;
}

/*
 * Read whatever the server sent and drop the notifications received so far.
 * Returns how many there were.
 */
static int
drain_notifications(void)
{
	PGnotify   *n;
	int			count = 0;

	if (!PQconsumeInput(conn))
		die("PQconsumeInput");
	while ((n = PQnotifies(conn)) != NULL)
	{
		count++;
		PQfreemem(n);
	}
	return count;
}

/* The job itself: here, pretend to do something with the payload. */
static void
do_work(const char *id, const char *attempt, const char *payload)
{
	(void) id;
	(void) attempt;
	(void) payload;
}

static void
usage(void)
{
	fprintf(stderr, "usage: consumer [--batch N] [--poll SECONDS] QUEUE COUNT\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *queue = NULL;
	long		count = -1;
	int			batch = 10;
	double		poll = 10.0;
	long		done = 0;
	long		claims = 0,
				empty = 0,
				notified = 0,
				timeouts = 0;
	char		sql[200];
	PGresult   *res;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
			batch = atoi(argv[++i]);
		else if (strcmp(argv[i], "--poll") == 0 && i + 1 < argc)
			poll = atof(argv[++i]);
		else if (argv[i][0] == '-')
			usage();
		else if (queue == NULL)
			queue = argv[i];
		else if (count < 0)
			count = atol(argv[i]);
		else
			usage();
	}
	if (queue == NULL || count < 0 || batch < 1 || poll <= 0)
		usage();
	/* queue names are [a-z][a-z0-9_]{0,47}: safe to use as a channel name */
	if (strspn(queue, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(queue) ||
		strlen(queue) > 48)
	{
		fprintf(stderr, "consumer: invalid queue name \"%s\"\n", queue);
		return 2;
	}

	conn = PQconnectdb("");		/* everything from PG* variables */
	if (PQstatus(conn) != CONNECTION_OK)
		die("connection failed");

	snprintf(sql, sizeof(sql), "LISTEN queue_%s", queue);
	exec_command(sql);
	fprintf(stderr, "listening on queue_%s\n", queue);

	while (done < count)
	{
		char		want[16];
		const char *claim_params[2];
		int			ntuples;

		/*
		 * Forget notifications received so far: the claim below sees every
		 * job they announced.  Anything arriving from now on is news.
		 */
		drain_notifications();

		snprintf(want, sizeof(want), "%ld", count - done < batch ? count - done : batch);
		claim_params[0] = queue;
		claim_params[1] = want;

		/* ---- exactly-once: claim, work and complete in one transaction */
		exec_command("BEGIN");
		res = exec_query("SELECT id, payload, attempt FROM queue.claim($1, $2::int)",
						 2, claim_params);
		claims++;
		ntuples = PQntuples(res);
		for (int i = 0; i < ntuples; i++)
		{
			const char *id = PQgetvalue(res, i, 0);
			PGresult   *r;

			do_work(id, PQgetvalue(res, i, 2), PQgetvalue(res, i, 1));
			r = exec_query("SELECT queue.complete($1::bigint)", 1, &id);
			PQclear(r);
		}
		exec_command("COMMIT");

		/* Only now are the jobs done: report them after the commit. */
		for (int i = 0; i < ntuples; i++)
			printf("job %s %s %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 2),
				   PQgetvalue(res, i, 1));
		fflush(stdout);
		done += ntuples;
		PQclear(res);
		if (ntuples > 0)
			continue;

		/* ---- nothing to do: wait for a notification on the socket */
		empty++;
		if (drain_notifications() > 0)
			continue;			/* something arrived during the claim */
		for (;;)
		{
			int			sock = PQsocket(conn);
			fd_set		readable;
			struct timeval tv;
			int			rc;

			if (sock < 0)
				die("PQsocket");
			FD_ZERO(&readable);
			FD_SET(sock, &readable);
			tv.tv_sec = (long) poll;
			tv.tv_usec = (long) ((poll - (long) poll) * 1e6);
			rc = select(sock + 1, &readable, NULL, NULL, &tv);
			if (rc < 0)
			{
				if (errno == EINTR)
					continue;
				perror("consumer: select");
				PQfinish(conn);
				return 1;
			}
			if (rc == 0)
			{
				timeouts++;
				break;
			}
			/* Data arrived: a notification, or only part of one. */
			if (drain_notifications() > 0)
			{
				notified++;
				break;
			}
		}
	}

	fprintf(stderr, "processed %ld jobs of queue %s (exactly-once): claims=%ld empty=%ld "
			"notified=%ld timeouts=%ld\n", done, queue, claims, empty, notified, timeouts);
	PQfinish(conn);
	return 0;
}
