#!/usr/bin/env bash
# memkv on PostgreSQL against pgbench, on one throwaway cluster, in one run (BENCHMARKS.md):
#
#   tools/pgbench/compare.sh BEFORE NOW [ROUNDS] [SECS]
#
# BEFORE and NOW are builds of examples/pg_bench.rs (`cargo build --release --features postgres
# --example pg_bench`, copied aside). Starts a private cluster (initdb and pg_ctl on a loopback
# port, as the `postgres` user when run as root; default settings, so `fsync` and
# `synchronous_commit` are on for both sides, plus `track_wal_io_timing`, which PostgreSQL 14
# and later have), then for ROUNDS rounds (default 3) runs, SECS
# seconds each (default 5), interleaved: pgbench `upsert-fresh`, memkv BEFORE, memkv NOW, at 1
# client and at 32; each line has the rate and the WAL bytes per transaction or command
# (pg_current_wal_insert_lsn deltas); then the median ratios. The builds alternate in going
# first. Then, for each build, 1 process and 4 at once on distinct stores, and pgbench at 1
# client and 4, alternating, each with its WAL flushes (per operation, bytes and time in
# `fdatasync` per flush, from pg_stat_wal). Prints `uptime` between rounds: the machine is
# shared. Stops the cluster at exit. memkv, pgbench and PostgreSQL all run at the priority the
# script is started with (until 1 December memkv ran 10 nice levels below the other two, which
# cost its 4 processes about 5 % against PostgreSQL's own processes; BENCHMARKS.md).
set -euo pipefail
before=$(realpath "$1")
now=$(realpath "$2")
rounds=${3:-3}
secs=${4:-5}
here=$(cd "$(dirname "$0")" && pwd)
bin=${MEMKV_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
port=${PGPORT_BENCH:-55490}
dir=$(mktemp -d /tmp/memkv-pgbench.XXXXXX)
chmod 755 "$dir"
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else sh -c "$*"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$dir"
cleanup() { as_pg "$bin/pg_ctl -D $dir/data -m immediate stop" >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
as_pg "$bin/initdb -D $dir/data -A trust -U postgres" >/dev/null
as_pg "$bin/pg_ctl -D $dir/data -l $dir/log -o '-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c track_wal_io_timing=on' -w start" >/dev/null
psql() { "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -X -q "$@"; }
psql -c 'CREATE DATABASE bench'
# Each build gets a database of its own (in the same cluster): builds of different layout
# versions refuse each other's data.
psql -c 'CREATE DATABASE bench_before'
psql -c 'CREATE DATABASE bench_now'
psql -d bench -c 'CREATE TABLE kv (k int PRIMARY KEY, v text)'
url="postgres://postgres@127.0.0.1:$port/bench"
url_of() { if [ "$1" = "$before" ]; then echo "${url}_before"; else echo "${url}_now"; fi; }
lsn() { psql -d bench -Atc 'SELECT pg_current_wal_insert_lsn()'; }
wal_per() { psql -d bench -Atc "SELECT round(pg_wal_lsn_diff('$2', '$1') / greatest($3, 1))"; }

pgbench_run() { # clients
  local j=1 a b out tps n
  [ "$1" -gt 1 ] && j=2
  a=$(lsn)
  out=$("$bin/pgbench" -h 127.0.0.1 -p "$port" -U postgres -n -f "$here/upsert-fresh.sql" -c "$1" -j "$j" -T "$secs" bench 2>&1)
  b=$(lsn)
  tps=$(grep -o 'tps = [0-9.]*' <<<"$out" | head -1 | cut -d' ' -f3)
  n=$(grep -o 'number of transactions actually processed: [0-9]*' <<<"$out" | grep -o '[0-9]*$')
  printf 'pgbench %.0f tps (%s B WAL each)' "$tps" "$(wal_per "$a" "$b" "$n")"
}

memkv_run() { # binary label clients
  local a b out rate n
  a=$(lsn)
  out=$("$1" create "$(url_of "$1")" "$3" "$secs")
  b=$(lsn)
  rate=$(grep -o '= [0-9]*/s' <<<"$out" | grep -o '[0-9]*')
  n=$(grep -o ': [0-9]* in' <<<"$out" | grep -o '[0-9]*')
  printf '%s %d/s (%s B WAL each, %s)' "$2" "$rate" "$(wal_per "$a" "$b" "$n")" \
    "$(grep -o '[0-9.]* round trips per command' <<<"$out")"
}

# Each rate is compared with the mean of the pgbench runs just before and after it (the
# disk's flush time drifts within seconds), and the median of those ratios is reported.
log=$dir/results
last_p=
for r in $(seq "$rounds"); do
  echo "== round $r: $(uptime | sed 's/.*load/load/')"
  for c in 1 32; do
    p=$(pgbench_run "$c")
    # The two builds take turns at going first.
    if [ $((r % 2)) = 1 ]; then
      b=$(memkv_run "$before" before "$c")
      n=$(memkv_run "$now" now "$c")
      echo "$c: $p | $b | $n"
    else
      n=$(memkv_run "$now" now "$c")
      b=$(memkv_run "$before" before "$c")
      echo "$c: $p | $n | $b"
    fi
    echo "$c p $(awk '{print $2}' <<<"$p") b $(awk '{print $2}' <<<"$b" | tr -d '/s') n $(awk '{print $2}' <<<"$n" | tr -d '/s')" >>"$log"
  done
done
for c in 1 32; do
  p=$(pgbench_run "$c")
  echo "$c: $p (closing)"
  echo "$c p $(awk '{print $2}' <<<"$p") b - n -" >>"$log"
done
summary() { # clients
  grep "^$1 " "$log" | awk -v c="$1" '
    function sort(a, k,   i, j, t) {
      for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    }
    { p[NR] = $3; b[NR] = $5; n[NR] = $7 }
    END {
      for (i = 1; i < NR; i++) { m = (p[i] + p[i + 1]) / 2; rb[i] = b[i] / m; rn[i] = n[i] / m }
      k = NR - 1
      sort(rb, k); sort(rn, k)
      printf "%s client(s): memkv / pgbench fresh, median of %d: before %.2fx (%.2f-%.2f), now %.2fx (%.2f-%.2f)\n",
        c, k, rb[int((k + 1) / 2)], rb[1], rb[k], rn[int((k + 1) / 2)], rn[1], rn[k]
    }'
}
echo "== summary"
summary 1
summary 32

echo "== 4 processes on distinct stores against 1, and pgbench's 4 clients against 1 (alternating): $(uptime | sed 's/.*load/load/')"
exe_of() { case $1 in before) echo "$before" ;; now) echo "$now" ;; *) echo pgbench ;; esac; }
rate_of() { # exe count: "rate operations" of count processes at once (pgbench: clients)
  local out p rate=0 n=0
  if [ "$1" = pgbench ]; then
    out=$("$bin/pgbench" -h 127.0.0.1 -p "$port" -U postgres -n -f "$here/upsert-fresh.sql" -c "$2" -j "$(($2 > 1 ? 2 : 1))" -T "$secs" bench 2>&1)
    rate=$(grep -o 'tps = [0-9]*' <<<"$out" | head -1 | grep -o '[0-9]*$')
    n=$(grep -o 'processed: [0-9]*' <<<"$out" | grep -o '[0-9]*$')
  else
    for p in $(seq "$2"); do "$1" create "$(url_of "$1")" 1 "$secs" >"$dir/p$p" & done
    wait
    for p in $(seq "$2"); do
      rate=$((rate + $(grep -o '= [0-9]*/s' "$dir/p$p" | grep -o '[0-9]*')))
      n=$((n + $(grep -o ': [0-9]* in' "$dir/p$p" | grep -o '[0-9]*')))
    done
  fi
  echo "$rate $n"
}
# The WAL flushes of a run, from pg_stat_wal (track_wal_io_timing is on): flushes per operation,
# WAL bytes per flush, time in fdatasync per flush. Backends report when they exit.
walstat() { psql -d bench -Atc 'SELECT wal_sync, wal_bytes, wal_sync_time FROM pg_stat_wal' | tr '|' ' '; }
measured() { # exe count: "rate flush-figures" of one run
  local a b rate n
  a=$(walstat)
  read -r rate n < <(rate_of "$1" "$2")
  sleep 1
  b=$(walstat)
  printf '%s/s (%s)' "$rate" "$(printf '%s\n%s\n' "$a" "$b" | awk -v n="$n" '
    NR == 1 { s = $1; w = $2; t = $3 }
    NR == 2 { d = $1 - s; if (d < 1) d = 1
              printf "%.2f flushes per operation, %.0f B and %.0f us each", d / (n > 0 ? n : 1), ($2 - w) / d, ($3 - t) * 1000 / d }')"
}
# Per round and build (pgbench too): 4 at once, then 1 alone; each 4 is compared with the mean
# of the 1s of that build just before and after it. The builds take turns.
declare -A prev ratios=([before]= [now]= [pgbench]=)
for build in before now pgbench; do
  m=$(measured "$(exe_of "$build")" 1)
  prev[$build]=${m%%/s*}
  echo "$build: 1 alone $m"
done
for r in $(seq "$rounds"); do
  for build in before now pgbench; do
    exe=$(exe_of "$build")
    f=$(measured "$exe" 4)
    next=$(measured "$exe" 1)
    ratio=$(awk "BEGIN {printf \"%.2f\", ${f%%/s*} / ((${prev[$build]} + ${next%%/s*}) / 2)}")
    echo "$build: 4 at once $f; 1 alone $next: ${ratio}x"
    ratios[$build]="${ratios[$build]} $ratio"
    prev[$build]=${next%%/s*}
  done
done
for build in before now pgbench; do
  echo "$build: median $(tr ' ' '\n' <<<"${ratios[$build]}" | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)] "x (" a[1] "-" a[NR] ")"}')"
done
echo "== end: $(uptime | sed 's/.*load/load/')"
