SELECT count(*) FROM queue.enqueue_batch('bq0', :arr::jsonb[]);
