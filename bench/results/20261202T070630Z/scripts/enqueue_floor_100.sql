INSERT INTO floor_ins (payload) SELECT unnest(:arr::jsonb[]);
