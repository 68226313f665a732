// bench/node/schedules.mjs: the pg-boss side of bench/schedules.sh.
//
//   node schedules.mjs N
//
// Starts one pg-boss instance with its defaults (scheduling on: the cron
// monitor and the send-it worker that forwards due occurrences), creates the
// queue 'ticks' and N schedules boss.schedule('ticks', '* * * * *', {s: i},
// {key: 'k<i>'}), prints the defaults that decide the lateness and a line
// 'ready <epoch s> <seconds it took>', and then runs until SIGTERM.  Nobody
// consumes 'ticks'; schedules.sh reads the jobs from pgboss.job.
// Connection: PGHOST (socket directory), PGPORT, PGUSER, PGDATABASE.
import { PgBoss } from 'pg-boss';
// not exported by the package: the defaults getConfig() fills in
import { getConfig } from './node_modules/pg-boss/dist/attorney.js';

const n = Number(process.argv[2] || 1);
const options = {
  host: process.env.PGHOST,
  port: Number(process.env.PGPORT || 5432),
  user: process.env.PGUSER || 'postgres',
  database: process.env.PGDATABASE,
};
const boss = new PgBoss(options);
boss.on('error', (e) => console.error('pg-boss error:', e.message));
await boss.start();
await boss.createQueue('ticks');

// ten at a time: the pool's default size
const t0 = Date.now();
for (let i = 0; i < n; i += 10) {
  const batch = [];
  for (let j = i; j < Math.min(n, i + 10); j++) {
    batch.push(boss.schedule('ticks', '* * * * *', { s: j }, { key: `k${j}` }));
  }
  await Promise.all(batch);
}

const config = getConfig({ ...options });
console.log('defaults ' + JSON.stringify({
  cronMonitorIntervalSeconds: config.cronMonitorIntervalSeconds,
  cronWorkerIntervalSeconds: config.cronWorkerIntervalSeconds,
}));
// when the schedules exist (epoch s), and how long they took to make (s)
console.log(`ready ${Date.now() / 1000} ${(Date.now() - t0) / 1000}`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await boss.stop({ graceful: false, timeout: 5000 }).catch((e) => console.error('stop:', e.message));
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
setInterval(() => {}, 1 << 30);
