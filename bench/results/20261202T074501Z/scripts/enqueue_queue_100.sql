SELECT count(*) FROM queue.enqueue_batch('bq', :arr::jsonb[]);
