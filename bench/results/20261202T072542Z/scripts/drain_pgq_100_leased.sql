SELECT coalesce(pgq.next_batch('pq_' || :client_id, 'c'), 0) AS bid \gset
\if :bid > 0
SELECT ev_id, ev_data FROM pgq.get_batch_events(:bid::bigint);
SELECT pgq.finish_batch(:bid::bigint);
\endif
