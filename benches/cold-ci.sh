#!/usr/bin/env bash
# The time a cold CI job saves on plans/full.toml with the compile reused from a
# shared store (docs/benchmarks.md): three runs with an empty local cache and no
# store, one that pushes to a shared folder and three that reuse from it, then the
# same through moto's S3 server where `moto_server` is installed. Each line: the
# run's wall time, and the compile step from start to end in its journal.
# Usage, from the project's root after `cargo build --release`: benches/cold-ci.sh
set -euo pipefail
O=$PWD/target/release/orchestrate
T=$(mktemp -d /tmp/coldci-work.XXXX)
openssl genpkey -algorithm ed25519 -out $T/ci.key 2>/dev/null
run() { # name, then run options
  local n=$1; shift
  local s=$(date +%s.%N)
  $O run plans/full.toml --records $T/$n/records --cache $T/$n/cache --progress plain "$@" >$T/$n.log 2>&1
  local e=$(date +%s.%N)
  local rec=$(ls -d $T/$n/records/*/ | tail -1)
  python3 - "$rec" "$n" "$s" "$e" <<'PY'
import json, sys
from datetime import datetime
rec, name, start, end = sys.argv[1:]
r = json.load(open(rec + "record.json"))
c = next(st for st in r["steps"] if st["id"] == "compile").get("cache", {})
ev = [json.loads(l) for l in open(rec + "journal.jsonl")]
t = lambda e: datetime.fromisoformat(e["time"][:26] + "+00:00")
at = {e["event"]: t(e) for e in ev if e.get("step") == "compile"}
ms = (at["step_ended"] - at["step_started"]).total_seconds() * 1000
where = c.get("reused_from", {}).get("remote") or c.get("remote") or ""
print(f"{name:<13} wall {float(end) - float(start):6.2f} s  compile {ms:7.1f} ms  {c.get('status')} {where}")
PY
}
for i in 1 2 3; do run cold$i; done
run ci-folder --cache-remote $T/shared --sign-key $T/ci.key
for i in 1 2 3; do run warm-folder$i --cache-remote $T/shared --sign-key $T/ci.key; done
if command -v moto_server >/dev/null; then
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  moto_server -H 127.0.0.1 -p $port >$T/moto.log 2>&1 & mp=$!
  trap "kill $mp" EXIT
  for _ in $(seq 50); do curl -sf -X PUT http://127.0.0.1:$port/ci-cache >/dev/null && break; sleep 0.2; done
  export AWS_ACCESS_KEY_ID=AKIACOLDCI AWS_SECRET_ACCESS_KEY=coldci-secret
  R="s3://ci-cache/full?endpoint=http://127.0.0.1:$port"
  run ci-s3 --cache-remote "$R" --sign-key $T/ci.key
  for i in 1 2 3; do run warm-s3$i --cache-remote "$R" --sign-key $T/ci.key; done
fi
echo "folder: $T"
