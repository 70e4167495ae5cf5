package tracker

import "golang.org/x/sys/unix"

// pinSelf pins the calling thread to the first CPU it may run on; a child
// forked afterwards inherits the mask, so the tracer and every tracee share
// one CPU and a ptrace stop is a same-CPU wake-up (see doc.go for the
// numbers and why this is not the default).
//
// Precondition: on the locked tracer thread, before the launch.
func pinSelf() error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return err
	}
	for cpu := 0; cpu < 1024; cpu++ {
		if set.IsSet(cpu) {
			set.Zero()
			set.Set(cpu)
			return unix.SchedSetaffinity(0, &set)
		}
	}
	return unix.EINVAL
}
