INSERT INTO base_jobs (payload) SELECT unnest(:arr::jsonb[]);
