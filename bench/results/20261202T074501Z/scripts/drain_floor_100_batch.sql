\set lo :client_id * 1000000000 + :n * 100 + 1
\set hi :lo + 99
\set n :n + 1
INSERT INTO floor_leases VALUES (:lo, :hi, now() + interval '30 seconds');
BEGIN;
DELETE FROM floor_jobs WHERE id BETWEEN :lo AND :hi;
DELETE FROM floor_leases WHERE lo = :lo;
COMMIT;
