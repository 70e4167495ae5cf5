// Package platform makes the build fail, with one clear message, on every
// platform but linux/amd64.
//
// ptjit traces with ptrace, seccomp and userfaultfd, reads x86-64
// registers, and records Intel PT: it runs on Linux on x86-64 only. The
// packages that hold such code (clock, snapshot, perf, tracker, ptrun and
// the ptjit command) import this package, so that building them for
// another platform stops here, with the message below, instead of with
// dozens of unrelated undefined names. The portable packages (ptpkt, x86,
// x86/att, decode) import neither it nor a package that does, and build
// anywhere; db (through clock), ptfmt and softpt (through perf) do not.
//
// Must not import: any ptjit package. It is the bottom of every chain.
package platform
