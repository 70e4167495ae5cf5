package ptrun

import "github.com/ptjit/ptjit/tracker"

// autoPin is what --pin=auto means; tracker/doc.go gives the measurements
// behind it.
const autoPin = tracker.PinOff
