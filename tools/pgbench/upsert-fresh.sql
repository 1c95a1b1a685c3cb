-- pgbench script for BENCHMARKS.md (PostgreSQL): one 1 KiB upsert per transaction, a fresh
-- random value under a key drawn from 2 billion (almost always an insert): the closest analogue
-- of a memkv `create`. Table: CREATE TABLE kv (k int PRIMARY KEY, v text);
\set k random(1, 2000000000)
INSERT INTO kv VALUES (:k, (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 32)))
  ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;
