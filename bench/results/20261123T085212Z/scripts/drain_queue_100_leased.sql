SELECT coalesce(array_agg(id), '{}') AS ids, sum(length(payload::text)) AS bytes FROM queue.claim('bq', 100) \gset
SELECT queue.complete(:ids::bigint[]);
