\set lo :client_id * 1000000000 + :n * 100 + 1
\set hi :lo + 99
\set n :n + 1
BEGIN;
UPDATE floor_jobs SET locked_until = now() + interval '30 seconds' WHERE id BETWEEN :lo AND :hi;
DELETE FROM floor_jobs WHERE id BETWEEN :lo AND :hi;
COMMIT;
