// The hidden first argument that makes a binary linking package ptrun act
// as the launcher helper (helper_linux_amd64.c).
#define PTJIT_HELPER_ARG "__ptjit_exec_helper"
