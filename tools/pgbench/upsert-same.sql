-- pgbench script for BENCHMARKS.md (PostgreSQL): one 1 KiB upsert per transaction, the same
-- value every time, over 100,000 keys (mostly updates, which PostgreSQL logs as a small delta).
-- Table: CREATE TABLE kv (k int PRIMARY KEY, v text);
\set k random(1, 100000)
INSERT INTO kv VALUES (:k, repeat('x', 1024)) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;
