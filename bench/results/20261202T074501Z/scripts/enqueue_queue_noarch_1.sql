SELECT queue.enqueue('bq0', :p::jsonb);
