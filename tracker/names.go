package tracker

import (
	"bytes"
	"strconv"
	"strings"
)

// Names a JIT publishes for its code: perf maps and jitdump files.
//
// A JIT started with node --perf-basic-prof, java -XX:+DumpPerfMapAtExit,
// or a uBPF-style program appends "START SIZE NAME" lines to
// /tmp/perf-PID.map. A line has no time stamp of its own, and a name
// belongs to the code it was written for, which a JIT may replace at the
// same address. ptjit reads the new lines of a process's perf map at every
// stop that records a change of that process's code (before recording the
// change: the sink's first call at a stop) and when the process ends.
// Code versions change only at those stops, so every line falls between
// two reads during which the code at its address did not change: the code
// it was written for is the code valid just before the read that found
// it. This costs no stop of its own: the reads start when the process
// opens /tmp/perf-PID.map for writing (the filter stops opens for writing
// already), and then cost a stat and an fstat at the stops that already
// happen (9 µs together at load 10 on this project's 2-vCPU VM, 7.6 µs
// for one stat, hence not for a process without a map), and a read when
// the map grew; stopping on every write(2) to the map would cost a stop
// per line. Limits: a line the
// program still holds in a stdio buffer is found at a later read (JITs
// flush each line: V8 line-buffers its map, HotSpot writes it whole at
// exit, when nothing changes any more); a name written before its code is
// made executable names the code valid then (none, or the old code).
//
// A jitdump (node --perf-prof: ./jit-PID.dump, perf's
// jitdump-specification.txt) is read the same way, found when the process
// opens a file named jit-PID.dump for writing (its path resolved against
// the thread's cwd or directory fd at that stop): each JIT_CODE_LOAD record
// is a name with the code bytes the JIT reported, stored with it, so that
// readers give it to the versions holding exactly those bytes. A record
// still being written is left for the next read. Its own timestamp
// (CLOCK_MONOTONIC for V8, whose header has no JITDUMP_FLAGS_ARCH_TIMESTAMP)
// is not needed: the reads bracket it, and the bytes pin the version.
// Limit: a jitdump the program unlinks before ptjit's first read of it
// (V8's --perf-prof-delete-file) is not found.

// perfMapLine is one parsed perf-map line.
type perfMapLine struct {
	addr, size uint64
	name       string
}

// parsePerfMap parses the complete lines of b ("START SIZE NAME\n", START
// and SIZE in hex with or without 0x) and returns them with the number of
// bytes consumed (up to the last newline: a line still being written is
// left for the next read). Lines that do not parse are counted in bad.
func parsePerfMap(b []byte) (lines []perfMapLine, used int, bad int) {
	for {
		i := bytes.IndexByte(b[used:], '\n')
		if i < 0 {
			return lines, used, bad
		}
		line := string(b[used : used+i])
		used += i + 1
		if l, ok := parsePerfMapLine(line); ok {
			lines = append(lines, l)
		} else if strings.TrimSpace(line) != "" {
			bad++
		}
	}
}

func parsePerfMapLine(line string) (perfMapLine, bool) {
	a, rest, ok1 := strings.Cut(line, " ")
	s, name, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 {
		return perfMapLine{}, false
	}
	addr, err1 := strconv.ParseUint(strings.TrimPrefix(a, "0x"), 16, 64)
	size, err2 := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	name = strings.TrimRight(name, "\r")
	if err1 != nil || err2 != nil || name == "" || size == 0 || addr+size < addr {
		return perfMapLine{}, false
	}
	return perfMapLine{addr, size, name}, true
}
