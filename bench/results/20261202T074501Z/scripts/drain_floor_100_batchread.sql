\set lo :client_id * 1000000000 + :n * 100 + 1
\set hi :lo + 99
\set n :n + 1
WITH l AS (INSERT INTO floor_leases VALUES (:lo, :hi, now() + interval '30 seconds')) SELECT string_agg(payload::text, ',') AS payloads FROM floor_jobs WHERE id BETWEEN :lo AND :hi \gset
BEGIN;
WITH d AS (DELETE FROM floor_jobs WHERE id BETWEEN :lo AND :hi RETURNING id, payload) INSERT INTO floor_archive SELECT id, payload, now() FROM d;
DELETE FROM floor_leases WHERE lo = :lo;
COMMIT;
