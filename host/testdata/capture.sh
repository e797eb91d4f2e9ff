#!/bin/sh
# capture.sh DIR PID [CGROUP_ROOT]
#
# Copies, from this machine, the files the host sampler reads into a fixture
# tree DIR/proc/... and DIR/cgroup/...: /proc/stat, /proc/pressure/cpu and io,
# /proc/cpuinfo, kernel hostname and release, /proc/PID/cgroup and the
# schedstat and children files of every thread of PID, and cpu.stat of the
# v1 cpu controller's root and of the v2 unified root. Run it twice, a second
# apart, to get the two readings of a tick (testdata/live/t0 and t1).
set -eu
dir=$1
pid=$2
cg=${3:-/sys/fs/cgroup}

copy() { # copy SRC DST: /proc files have size 0, so read them with cat
	mkdir -p "$(dirname "$2")"
	cat "$1" >"$2"
}

copy /proc/stat "$dir/proc/stat"
copy /proc/pressure/cpu "$dir/proc/pressure/cpu"
copy /proc/pressure/io "$dir/proc/pressure/io"
copy /proc/cpuinfo "$dir/proc/cpuinfo"
copy /proc/sys/kernel/hostname "$dir/proc/sys/kernel/hostname"
copy /proc/sys/kernel/osrelease "$dir/proc/sys/kernel/osrelease"
copy "/proc/$pid/cgroup" "$dir/proc/$pid/cgroup"
for t in /proc/"$pid"/task/*; do
	tid=${t##*/}
	copy "$t/schedstat" "$dir/proc/$pid/task/$tid/schedstat"
	[ -e "$t/children" ] && copy "$t/children" "$dir/proc/$pid/task/$tid/children"
done
for m in cpu cpu,cpuacct; do
	if [ -f "$cg/$m/cpu.stat" ]; then
		copy "$cg/$m/cpu.stat" "$dir/cgroup/$m/cpu.stat"
	fi
done
if [ -f "$cg/unified/cgroup.controllers" ]; then
	copy "$cg/unified/cgroup.controllers" "$dir/cgroup/unified/cgroup.controllers"
	copy "$cg/unified/cpu.stat" "$dir/cgroup/unified/cpu.stat"
fi
