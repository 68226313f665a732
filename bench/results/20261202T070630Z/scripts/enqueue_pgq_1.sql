SELECT pgq.insert_event('pq', 'job', :p::text);
