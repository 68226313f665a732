INSERT INTO floor_ins (payload) VALUES (:p::jsonb);
