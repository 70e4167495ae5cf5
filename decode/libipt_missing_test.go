//go:build !libipt

package decode

import "testing"

// Without the libipt build tag the differential tests against libipt
// (libipt_cgo_test.go) are not compiled. They say so here, visibly, rather
// than vanish: make test adds -tags libipt when /usr/include/intel-pt.h
// exists, and under CI=true it fails when the header is missing.
func TestDifferentialLibipt(t *testing.T) {
	t.Skip("libipt differential tests not built: install libipt-dev and run with -tags libipt (make test does)")
}
