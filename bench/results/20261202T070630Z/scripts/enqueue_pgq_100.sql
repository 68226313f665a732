SELECT count(pgq.insert_event('pq', 'job', e)) FROM unnest(:arr::text[]) e;
