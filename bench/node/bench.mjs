// bench/node/bench.mjs: the pg-boss and graphile-worker side of the queue
// benchmark.  Each system is driven through its own Node API, the way its
// users drive it.  Called by bench/bench.py with one JSON argument:
//
//   node bench.mjs '{"cmd": "enqueue", "system": "pgboss", "clients": 4, ...}'
//
// and prints one JSON object (the result) on its last line of stdout.
// Connection: PGHOST (socket directory), PGPORT, PGUSER, PGDATABASE.
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { run, runMigrations, makeWorkerUtils } from 'graphile-worker';

const args = JSON.parse(process.argv[2] || '{}');
const conn = {
  host: process.env.PGHOST,
  port: Number(process.env.PGPORT || 5432),
  user: process.env.PGUSER || 'postgres',
  database: process.env.PGDATABASE || 'bench',
};
const connectionString = `postgres://${encodeURIComponent(conn.user)}@${encodeURIComponent(conn.host)}:${conn.port}/${conn.database}`;
const QNAME = args.queue || 'pb';        // pg-boss queue name
const TASK = args.task || 'bench_task';  // graphile-worker task identifier

const now = () => performance.timeOrigin + performance.now(); // ms since epoch, sub-ms
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function payload(bytes = 100, extra = {}) {
  const base = { user_id: 12345, email: 'someone@example.com', template: 'welcome', locale: 'en-GB', n: 1, ...extra };
  let s = JSON.stringify(base);
  if (s.length < bytes - 12) {
    // incompressible padding, so that TOAST compression does not shrink it
    base.pad = randomText(bytes - s.length - 10);
  }
  return base;
}
function randomText(n) {
  const chars = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  let out = '';
  for (let i = 0; i < n; i++) out += chars[(Math.random() * chars.length) | 0];
  return out;
}

function pct(sorted, p) {
  if (!sorted.length) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}
function summary(lat) {
  const s = [...lat].sort((a, b) => a - b);
  return { n: s.length, p50: pct(s, 50), p95: pct(s, 95), p99: pct(s, 99), max: s.length ? s[s.length - 1] : null };
}

// ------------------------------------------------------------------ pg-boss
async function bossStart(extra = {}) {
  const boss = new PgBoss({
    ...conn,
    max: (args.clients || 1) + 4,
    schedule: false,
    supervise: extra.supervise ?? false,
    migrate: true,
    // pg-boss names its connections 'pgboss' unless told (the orphan holder is)
    application_name: process.env.PGAPPNAME,
    ...extra,
  });
  boss.on('error', (e) => console.error('pg-boss error:', e.message));
  await boss.start();
  return boss;
}

async function bossEnsureQueue(boss, opts = {}) {
  const q = await boss.getQueue(QNAME);
  if (!q) await boss.createQueue(QNAME, opts);
  else if (Object.keys(opts).length) await boss.updateQueue(QNAME, opts);
}

// ------------------------------------------------------------------ commands
const cmds = {};

cmds.setup = async () => {
  const boss = await bossStart();
  await bossEnsureQueue(boss, { retryLimit: 4 });
  await boss.stop({ graceful: false, close: true });
  await runMigrations({ connectionString, logger: quietLogger() });
  return { ok: true };
};

cmds.reset = async () => {
  const c = new pg.Client(conn);
  await c.connect();
  if (args.system === 'pgboss') {
    const boss = await bossStart();
    await boss.deleteAllJobs(QNAME).catch(() => {});
    await boss.stop({ graceful: false, close: true });
    await c.query('VACUUM ANALYZE pgboss.job');
  } else {
    await c.query('DELETE FROM graphile_worker._private_jobs');
    await c.query('VACUUM ANALYZE graphile_worker._private_jobs');
  }
  await c.end();
  return { ok: true };
};

// N concurrent producers, each one job (or one batch) per call, for `seconds`.
cmds.enqueue = async () => {
  const { system, clients = 1, seconds = 5, batch = 1, bytes = 100 } = args;
  const body = payload(bytes);
  const jobsOf = (n) => Array.from({ length: n }, () => body);
  let done = 0, calls = 0;
  let stopAt;
  let send, close;
  if (system === 'pgboss') {
    const boss = await bossStart();
    await bossEnsureQueue(boss);
    send = batch === 1 ? () => boss.send(QNAME, body)
                       : () => boss.insert(QNAME, jobsOf(batch).map((data) => ({ data })));
    close = () => boss.stop({ graceful: false, close: true });
  } else {
    const pool = new pg.Pool({ ...conn, max: clients });
    const utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger() });
    send = batch === 1 ? () => utils.addJob(TASK, body)
                       : () => utils.addJobs(jobsOf(batch).map((payload) => ({ identifier: TASK, payload })));
    close = async () => { await utils.release(); await pool.end(); };
  }
  // warm up each connection once
  await Promise.all(Array.from({ length: clients }, () => send()));
  const t0 = now();
  stopAt = t0 + seconds * 1000;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (now() < stopAt) { await send(); calls++; done += batch; }
  }));
  const elapsed = (now() - t0) / 1000;
  await close();
  return { jobs: done, calls, seconds: elapsed, rate: done / elapsed };
};

// One call with n jobs (bulk enqueue); returns its duration.
cmds.bulk = async () => {
  const { system, n = 10000, bytes = 100 } = args;
  const body = payload(bytes);
  let t0, t1;
  if (system === 'pgboss') {
    const boss = await bossStart();
    await bossEnsureQueue(boss);
    const jobs = Array.from({ length: n }, () => ({ data: body }));
    t0 = now(); await boss.insert(QNAME, jobs); t1 = now();
    await boss.stop({ graceful: false, close: true });
  } else {
    const pool = new pg.Pool({ ...conn, max: 2 });
    const utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger() });
    const jobs = Array.from({ length: n }, () => ({ identifier: TASK, payload: body }));
    t0 = now(); await utils.addJobs(jobs); t1 = now();
    await utils.release(); await pool.end();
  }
  return { jobs: n, seconds: (t1 - t0) / 1000, rate: n / ((t1 - t0) / 1000) };
};

async function backlog(c, system) {
  if (system === 'pgboss') {
    const r = await c.query("SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state IN ('created', 'retry')", [QNAME]);
    return r.rows[0].n;
  }
  const r = await c.query('SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE locked_at IS NULL AND attempts < max_attempts');
  return r.rows[0].n;
}

// Bring the ready backlog up to `target` jobs (chunks of 10,000 through the
// system's own batch insert).
async function topUp(system, target, bytes) {
  const c = new pg.Client(conn);
  await c.connect();
  const have = await backlog(c, system);
  let need = target - have;
  const body = payload(bytes);
  const chunk = Math.max(100, Math.min(10000, Math.floor((16 << 20) / JSON.stringify(body).length)));
  if (need > 0) {
    if (system === 'pgboss') {
      const boss = await bossStart();
      await bossEnsureQueue(boss);
      while (need > 0) {
        const k = Math.min(need, chunk);
        await boss.insert(QNAME, Array.from({ length: k }, () => ({ data: body })));
        need -= k;
      }
      await boss.stop({ graceful: false, close: true });
      await c.query('VACUUM ANALYZE pgboss.job');
    } else {
      const pool = new pg.Pool({ ...conn, max: 2 });
      const utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger() });
      while (need > 0) {
        const k = Math.min(need, chunk);
        await utils.addJobs(Array.from({ length: k }, () => ({ identifier: TASK, payload: body })));
        need -= k;
      }
      await utils.release(); await pool.end();
      await c.query('VACUUM ANALYZE graphile_worker._private_jobs');
    }
  }
  const n = await backlog(c, system);
  await c.query('CHECKPOINT');
  await c.end();
  return n;
}

// Drain a preloaded backlog for `seconds` with `clients` consumers.
//  pg-boss: fetch({batchSize}) + complete(ids), either in one transaction of
//    the caller (mode "tx", through the `db` option) or as two (mode "leased").
//    (work() with batchSize 1 sleeps pollingIntervalSeconds, >= 0.5 s,
//    between fetches, so a backlog drain uses fetch/complete directly.)
//  graphile-worker: run() with concurrency = clients; batch 100 = its
//    localQueue (size 100) plus completeJobBatchDelay; always leased.
cmds.drain = async () => {
  const { system, clients = 1, seconds = 5, batch = 1, mode = 'leased', target = 10000, bytes = 100 } = args;
  const before = await topUp(system, target, bytes);
  // WAL written while the consumers run (the fill before is not counted)
  const meter = new pg.Client(conn);
  await meter.connect();
  const walAt = async () => Number((await meter.query("SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint AS b")).rows[0].b);
  let done = 0;
  let t0, elapsed, wal0, wal1;
  if (system === 'pgboss') {
    const boss = await bossStart();
    const clientsList = [];
    for (let i = 0; i < clients; i++) { const c = new pg.Client(conn); await c.connect(); clientsList.push(c); }
    wal0 = await walAt();
    t0 = now();
    const stopAt = t0 + seconds * 1000;
    await Promise.all(clientsList.map(async (c) => {
      const db = { executeSql: (text, values) => c.query(text, values) };
      while (now() < stopAt) {
        if (mode === 'tx') {
          await c.query('BEGIN');
          const jobs = await boss.fetch(QNAME, { batchSize: batch, db });
          if (jobs.length) await boss.complete(QNAME, jobs.map((j) => j.id), null, { db });
          await c.query('COMMIT');
          done += jobs.length;
          if (!jobs.length) await sleep(10);
        } else {
          const jobs = await boss.fetch(QNAME, { batchSize: batch });
          if (jobs.length) await boss.complete(QNAME, jobs.map((j) => j.id));
          done += jobs.length;
          if (!jobs.length) await sleep(10);
        }
      }
    }));
    elapsed = (now() - t0) / 1000;
    wal1 = await walAt();
    for (const c of clientsList) await c.end();
    await boss.stop({ graceful: false, close: true });
  } else {
    const pool = new pg.Pool({ ...conn, max: clients + 2 });
    const preset = { worker: {} };
    if (batch > 1) {
      preset.worker.localQueue = { size: batch };
      preset.worker.completeJobBatchDelay = 0;
    }
    const runner = await run({
      pgPool: pool,
      concurrency: clients,
      noHandleSignals: true,
      pollInterval: 1000,
      logger: quietLogger(),
      preset,
      taskList: { [TASK]: async () => { done++; } },
    });
    wal0 = await walAt();
    done = 0; // from here on: the runner took its first jobs as it started
    t0 = now();
    await sleep(seconds * 1000);
    const counted = done;
    elapsed = (now() - t0) / 1000;
    wal1 = await walAt();
    await runner.stop();
    await pool.end();
    done = counted;
  }
  await meter.end();
  return { jobs: done, seconds: elapsed, rate: done / elapsed, backlog: before, wal: wal1 - wal0 };
};

// Steady state: a producer at `rate` jobs/s (send time in the payload) and
// `consumers` consumers woken the system's own way.  Latency runs from the
// producer's commit (send() resolved) to the moment a handler has the job;
// the time from the send is reported beside it.
cmds.steady = async () => {
  const { system, rate = 200, seconds = 10, consumers = 2, bytes = 100 } = args;
  const got = [];  // [job id, time the handler had it, send time]
  let acks;
  if (system === 'pgboss') {
    const boss = await bossStart({ useListenNotify: true });
    await bossEnsureQueue(boss, { notify: true });
    const cons = await bossStart({ useListenNotify: true });
    await cons.work(QNAME, { batchSize: 100, localConcurrency: consumers, burstWhenBatchFull: true },
      async (jobs) => { const t = now(); for (const j of jobs) got.push([String(j.id), t, j.data.ts]); });
    await sleep(500);
    acks = await produce(rate, seconds, async (ts) => boss.send(QNAME, payload(bytes, { ts })));
    await sleep(2000 + 1000);
    await cons.stop({ graceful: false, close: true });
    await boss.stop({ graceful: false, close: true });
  } else {
    const pool = new pg.Pool({ ...conn, max: consumers + 2 });
    const runner = await run({
      pgPool: pool, concurrency: consumers, noHandleSignals: true, logger: quietLogger(),
      taskList: { [TASK]: async (p, helpers) => { got.push([String(helpers.job.id), now(), p.ts]); } },
    });
    const ppool = new pg.Pool({ ...conn, max: 2 });
    const utils = await makeWorkerUtils({ pgPool: ppool, logger: quietLogger() });
    await sleep(500);
    acks = await produce(rate, seconds, async (ts) => (await utils.addJob(TASK, payload(bytes, { ts }))).id);
    await sleep(3000);
    await runner.stop(); await pool.end();
    await utils.release(); await ppool.end();
  }
  const lat = got.filter(([id]) => acks.has(id)).map(([id, t]) => t - acks.get(id));
  const sent = summary(got.map(([, t, ts]) => t - ts));
  return { sent: Math.round(rate * seconds), ...summary(lat), n: got.length, send_p50: sent.p50, send_p99: sent.p99 };
};

// fixed-rate producer: job i is sent at t0 + i/rate (one connection, one job
// per transaction, like the SQL producers), until the deadline if there is
// one; returns Map(job id -> ack time)
async function produce(rate, seconds, send, t0 = Date.now(), deadline = Infinity) {
  const n = Math.round(rate * seconds);
  const acks = new Map();
  for (let i = 0; i < n && now() < deadline; i++) {
    const due = t0 + (i * 1000) / rate;
    const w = due - Date.now();
    if (w > 1) await sleep(w);
    const id = await send(now());
    acks.set(String(id), now());
  }
  return acks;
}

// Scheduled: n jobs due at spread-out times over `spread` seconds, starting
// `lead` seconds after the consumers started (they run first, as in an
// application); lateness = time the consumer has the job - due time.
// `overran`: storing the jobs took longer than the lead.
cmds.scheduled = async () => {
  const { system, n = 10000, spread = 20, lead = 5, consumers = 2, bytes = 100 } = args;
  const late = [];
  let start;
  const dueOf = (i) => start + (i * spread * 1000) / n;
  const jobsOf = (job) => Array.from({ length: n }, (_, i) => job(payload(bytes, { due: dueOf(i) }), new Date(dueOf(i))));
  let stopAll;
  if (system === 'pgboss') {
    const boss = await bossStart();
    await bossEnsureQueue(boss);
    const cons = await bossStart();
    await cons.work(QNAME, { batchSize: 100, localConcurrency: consumers, burstWhenBatchFull: true },
      async (jobs) => { const t = Date.now(); for (const j of jobs) late.push(t - j.data.due); });
    start = Date.now() + lead * 1000;
    const jobs = jobsOf((data, startAfter) => ({ data, startAfter }));
    for (let i = 0; i < n; i += 1000) await boss.insert(QNAME, jobs.slice(i, i + 1000));
    stopAll = async () => {
      await cons.stop({ graceful: false, close: true });
      await boss.stop({ graceful: false, close: true });
    };
  } else {
    const pool = new pg.Pool({ ...conn, max: consumers + 2 });
    const runner = await run({
      pgPool: pool, concurrency: consumers, noHandleSignals: true, logger: quietLogger(),
      taskList: { [TASK]: async (p) => { late.push(Date.now() - p.due); } },
    });
    start = Date.now() + lead * 1000;
    const utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger() });
    const jobs = jobsOf((p, runAt) => ({ identifier: TASK, payload: p, runAt }));
    for (let i = 0; i < n; i += 1000) await utils.addJobs(jobs.slice(i, i + 1000));
    await utils.release();
    stopAll = async () => { await runner.stop(); await pool.end(); };
  }
  const overran = Date.now() > start;
  await waitFor(() => late.length >= n, start + spread * 1000 + 30000);
  await stopAll();
  return { jobs: n, got: late.length, overran, ...summary(late) };
};

// Fill the backlog to `target` jobs (then vacuumed and checkpointed).
cmds.fill = async () => ({ backlog: await topUp(args.system, args.target || 10000, args.bytes || 100) });

// MVCC horizon: from `start` (ms since the epoch) for `seconds`, a producer
// and `consumers` consumers, each side at `rate` jobs/s, over the standing
// backlog (cmds.fill); the caller holds the horizon back meanwhile.  Each
// consumption k has a slot, start + k / rate, as pgbench -R schedules the
// SQL systems' transactions; per job: the time it ended, its latency from
// its slot (grows once the consumers lag) and its own time (what taking
// the job cost: pg-boss, fetch + complete; graphile-worker, from the
// worker's previous handler returning to this one starting, which is its
// completion of the previous job and the fetch of this one).  Returned per
// `window` seconds: jobs, p99 of each latency (ms).
cmds.horizon = async () => {
  const { system, rate = 800, seconds = 60, consumers = 2, start, window = 30 } = args;
  const end = start + seconds * 1000;
  const slot = (k) => start + (k * 1000) / rate;
  const body = payload(100);
  const done = [];  // [end, latency from slot, own time]
  let next = 0;
  if (system === 'pgboss') {
    const boss = await bossStart({ max: consumers + 4 });
    await bossEnsureQueue(boss);
    const consume = async () => {
      for (let k = next++; slot(k) < end && now() < end; k = next++) {
        const due = slot(k);
        const w = due - now();
        if (w > 1) await sleep(w);
        const t1 = now();
        const jobs = await boss.fetch(QNAME, { batchSize: 1 });
        if (jobs.length) await boss.complete(QNAME, jobs.map((j) => j.id));
        const t2 = now();
        if (jobs.length) done.push([t2, t2 - due, t2 - t1]);
      }
    };
    // as pgbench -T: whatever is still scheduled when the time is up is not run
    await Promise.all([produce(rate, seconds, () => boss.send(QNAME, body), start, end),
      ...Array.from({ length: consumers }, consume)]);
    await boss.stop({ graceful: false, close: true });
  } else {
    const pool = new pg.Pool({ ...conn, max: consumers + 2 });
    const ppool = new pg.Pool({ ...conn, max: 2 });
    const utils = await makeWorkerUtils({ pgPool: ppool, logger: quietLogger() });
    const returned = new Map();  // worker id -> when its last handler returned
    const w0 = start - 1;
    while (Date.now() < w0) await sleep(Math.min(50, w0 - Date.now()));
    const runner = await run({
      pgPool: pool, concurrency: consumers, noHandleSignals: true, logger: quietLogger(),
      taskList: {
        [TASK]: async (p, helpers) => {
          const t1 = now();
          const k = next++;
          const due = slot(k);
          const worker = helpers.job.locked_by;
          const own = returned.has(worker) ? t1 - returned.get(worker) : null;
          if (due - now() > 1) await sleep(due - now());
          if (due < end && own !== null) done.push([t1, Math.max(own, t1 - due), own]);
          returned.set(worker, now());
        },
      },
    });
    await produce(rate, seconds, async () => (await utils.addJob(TASK, body)).id, start, end);
    await runner.stop(); await pool.end();
    await utils.release(); await ppool.end();
  }
  const windows = [];
  for (const [t, lat, own] of done) {
    const i = Math.floor((t - start) / (window * 1000));
    if (i < 0) continue;
    (windows[i] ||= { n: 0, lat: [], own: [] }).n++;
    windows[i].lat.push(lat);
    windows[i].own.push(own);
  }
  return {
    jobs: done.length,
    windows: Array.from(windows, (wi, i) => (wi ? {
      w: i, n: wi.n, p99: pct(wi.lat.sort((a, b) => a - b), 99), own_p99: pct(wi.own.sort((a, b) => a - b), 99),
    } : { w: i, n: 0, p99: null, own_p99: null })),
  };
};

async function waitFor(cond, deadline) {
  while (!cond() && Date.now() < deadline) await sleep(50);
}

// Orphans: take `n` jobs through the system's consumer path and never finish
// them; the caller terminates this process's backends and measures recovery.
// Prints "holding" once the jobs are held, then waits to be killed.
cmds.hold = async () => {
  const { system, n = 1000, lease = 10 } = args;
  if (system === 'pgboss') {
    // the queue's expiry applies to jobs sent after it is set
    const boss0 = await bossStart();
    await bossEnsureQueue(boss0, { expireInSeconds: lease });
    await boss0.stop({ graceful: false, close: true });
  }
  await topUp(system, n, 100);
  if (system === 'pgboss') {
    const boss = await bossStart();
    let got = 0;
    while (got < n) got += (await boss.fetch(QNAME, { batchSize: Math.min(100, n - got) })).length;
    console.log(JSON.stringify({ holding: got }));
  } else {
    const pool = new pg.Pool({ ...conn, max: 4 });
    let got = 0;
    await run({
      pgPool: pool, concurrency: 1, noHandleSignals: true, logger: quietLogger(),
      preset: { worker: { localQueue: { size: n } } },
      taskList: { [TASK]: async () => { got++; if (got === 1) console.log(JSON.stringify({ holding: n })); await sleep(1e9); } },
    });
  }
  await sleep(1e9);
};

// pg-boss returns expired jobs from its supervisor (monitor loop); run one
// with the defaults a user gets, for the orphan measurement.
cmds.supervise = async () => {
  const boss = await bossStart({ supervise: true });
  console.log(JSON.stringify({ supervising: true }));
  await sleep((args.seconds || 60) * 1000);
  await boss.stop({ graceful: false, close: true });
  return { ok: true };
};

function quietLogger() { return globalThis.__quiet; }

const gw = await import('graphile-worker');
globalThis.__quiet = new gw.Logger(() => (level, message) => { if (level === 'error') console.error(message); });

const fn = cmds[args.cmd];
if (!fn) { console.error('unknown cmd ' + args.cmd); process.exit(2); }
try {
  const res = await fn();
  console.log(JSON.stringify(res));
  process.exit(0);
} catch (e) {
  console.error(e && e.stack || e);
  process.exit(1);
}
