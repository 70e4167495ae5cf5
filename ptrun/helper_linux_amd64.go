package ptrun

// #include "helper_linux_amd64.h"
import "C"

// helperArg is the hidden first argument that makes the ptjit binary (or
// any binary that links this package) act as the launcher helper: a C
// constructor in helper_linux_amd64.c sees it before the Go runtime starts.
const helperArg = C.PTJIT_HELPER_ARG
