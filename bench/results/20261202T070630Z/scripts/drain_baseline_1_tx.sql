BEGIN;
WITH c AS (UPDATE base_jobs SET locked_until = now() + interval '30 seconds', attempts = attempts + 1 WHERE id IN (SELECT id FROM base_jobs WHERE locked_until IS NULL AND run_at <= now() ORDER BY run_at, id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, payload, attempts) SELECT coalesce(max(id), 0) AS id, string_agg(payload::text, ',') AS payloads FROM c \gset
\if :id > 0
DELETE FROM base_jobs WHERE id = :id::bigint;
\endif
COMMIT;
