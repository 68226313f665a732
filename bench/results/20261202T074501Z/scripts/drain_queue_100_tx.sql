BEGIN;
SELECT coalesce(array_agg(id), '{}') AS ids, string_agg(payload::text, ',') AS payloads FROM queue.claim('bq', 100) \gset
SELECT queue.complete(:ids::bigint[]);
COMMIT;
