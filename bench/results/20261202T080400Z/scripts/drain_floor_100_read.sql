\set lo :client_id * 1000000000 + :n * 100 + 1
\set hi :lo + 99
\set n :n + 1
WITH d AS (DELETE FROM floor_jobs WHERE id BETWEEN :lo AND :hi RETURNING id, payload) SELECT string_agg(payload::text, ',') AS payloads FROM d \gset
