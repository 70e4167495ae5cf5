#!/bin/bash
# The W^X rows on a lent device machine (no Go there, no runtimes, no
# network): qemu-user running testdata/runtimes/hot.c (static) and
# testdata/append-jit, each alone, under testdata/floor wx and wxpoll, under a
# reference build of ptjit and under this tree's in each --proxy mode,
# alternating, 9 rounds, medians.
#
#   cmd/ptjit-bench/device.sh prepare REF   here: builds .devcarry/ (the
#                                           tree's ptjit, REF's as
#                                           ptjit-head, floor, append-jit,
#                                           hot-static, qemu-x86_64 and
#                                           its libraries; about 42 MB)
#   bash .devcarry/device.sh                there (the device tool's run,
#                                           carry [".devcarry"]); results
#                                           in $OUT/res.txt
set -e
if [ "$1" = prepare ]; then
	ref=${2:?usage: device.sh prepare REF}
	root=$(git rev-parse --show-toplevel); D=$root/.devcarry
	grep -qx '/.devcarry/' "$root/.git/info/exclude" 2>/dev/null || echo /.devcarry/ >>"$root/.git/info/exclude"
	rm -rf "$D"; mkdir -p "$D/lib"
	make -s -C "$root" testdata
	(cd "$root" && go build -ldflags='-s -w' -o "$D/ptjit-new" ./cmd/ptjit)
	wt=$(mktemp -d); git -C "$root" worktree add -q --detach "$wt" "$ref"
	(cd "$wt" && go build -ldflags='-s -w' -o "$D/ptjit-head" ./cmd/ptjit); git -C "$root" worktree remove --force "$wt"
	cp "$root/testdata/bin/floor" "$root/testdata/bin/append-jit" "$0" "$D/"
	gcc -O2 -static -o "$D/hot-static" "$root/testdata/runtimes/hot.c"
	q=$(readlink -f "$(command -v qemu-x86_64)"); cp "$q" "$D/"
	for l in $(ldd "$q" | awk '/=>/{print $3}'); do cp -L "$l" "$D/lib/"; done
	cp -L /lib64/ld-linux-x86-64.so.2 "$D/"
	du -sh "$D"; exit 0
fi
set +e
D=$(cd "$(dirname "$0")" && pwd); OUT=${OUT:-/tmp/devout}; mkdir -p "$OUT"; cd "$D"
echo "== $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo), kernel $(uname -r), load $(cat /proc/loadavg)"
echo "== PMUs: $(ls /sys/bus/event_source/devices | tr '\n' ' '); idle: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>&1), halt poll $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>&1) ns"
Q="$D/ld-linux-x86-64.so.2 --library-path $D/lib $D/qemu-x86_64 $D/hot-static 50000000"
A="$D/append-jit 2000"
t() { local s=$(date +%s%N); "$@" >/dev/null 2>>"$OUT/err.txt"; local rc=$?; echo "$(( ($(date +%s%N) - s) / 1000000 )) $rc"; }
for w in Q A; do
	for i in 1 2 3 4 5 6 7 8 9; do
		for v in alone floor fpoll head auto on off; do
			rm -rf /tmp/o
			case $v in
			alone) r=$(t ${!w}) ;;
			floor) r=$(t "$D/floor" wx -- ${!w}) ;;
			fpoll) r=$(t "$D/floor" wxpoll -- ${!w}) ;;
			head) r=$(t "$D/ptjit-head" run -q -o /tmp/o -- ${!w}) ;;
			*) r=$(t "$D/ptjit-new" run --proxy=$v -q -o /tmp/o -- ${!w}) ;;
			esac
			echo "$w $v $r" >>"$OUT/res.txt"
		done
	done
done
python3 - "$OUT/res.txt" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    w, v, ms, rc = l.split()
    d[(w, v)].append((int(ms), int(rc)))
for w in "QA":
    a = statistics.median([x for x, _ in d[(w, 'alone')]])
    for v in ['alone', 'floor', 'fpoll', 'head', 'auto', 'on', 'off']:
        xs = [x for x, _ in d[(w, v)]]
        print(w, v, "median %d ms (%.2fx alone)" % (statistics.median(xs), statistics.median(xs) / a), xs,
              "exit", sorted(set(r for _, r in d[(w, v)])))
PY
echo "load $(cat /proc/loadavg)"
