SELECT queue.enqueue('bq', :p::jsonb);
