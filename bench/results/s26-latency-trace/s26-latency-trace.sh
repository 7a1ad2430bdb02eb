#!/bin/bash
# Runs the bench latency phase and straces the SUT processes and receivers during the idle hearts.
# Usage: bench/results/s26-latency-trace/s26-latency-trace.sh <tag> [VAR=value ...]  (needs strace; run from any directory)
cd "$(dirname "$0")/../../.." || exit 1
repo=$(pwd)
tag=$1; shift
out=${S26_TRACE_DIR:-/tmp/s26}/trace-$tag; rm -rf $out; mkdir -p $out
env "$@" BENCH_KEEP_LOGS=1 BENCH_KAFKA_REQUEST_LOG=1 BENCH_IDLE_HEARTS=100 BENCH_OPEN_LOOP_MS=300 BENCH_NAME=smoke/s26-latency-trace-$tag timeout 600 npx tsx bench/run.ts --quick --phases=latency > $out/bench.log 2>&1 &
bpid=$!
until grep -q "delivery: delivery-1 ready" $out/bench.log 2>/dev/null; do sleep 0.5; if ! kill -0 $bpid 2>/dev/null; then echo "bench ended"; exit 1; fi; done
sleep 3
for name in referral-service relay delivery receiver-child; do
  for pid in $(pgrep -f "$name" ); do
    if tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | grep -q "$repo" && [ "$(readlink /proc/$pid/cwd)" != "" ]; then
      cmd=$(tr '\0' ' ' < /proc/$pid/cmdline)
      case "$cmd" in *tsx/dist/cli*|*npm*) continue;; esac
      echo "$name $pid $cmd" >> $out/pids
      timeout 8 strace -f -ttt -s 600 -e trace=read,write,writev,readv,sendto,recvfrom,sendmsg,recvmsg -o $out/$name.$pid.st -p $pid 2>/dev/null &
    fi
  done
done
wait $bpid
echo done
