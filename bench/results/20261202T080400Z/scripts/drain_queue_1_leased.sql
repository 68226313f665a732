SELECT coalesce(max(id), 0) AS id, max(attempt) AS att, max(payload::text) AS payload FROM queue.claim('bq', 1) \gset
\if :id > 0
SELECT queue.complete(:id::bigint, attempt => :att::int);
\endif
