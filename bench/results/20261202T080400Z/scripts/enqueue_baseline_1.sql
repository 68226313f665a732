INSERT INTO base_jobs (payload) VALUES (:p::jsonb);
