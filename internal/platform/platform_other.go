//go:build !(linux && amd64)

package platform

// The one build error on other platforms: it quotes its own reason.
const unsupported = "ptjit runs on linux/amd64"

var _ int = unsupported
