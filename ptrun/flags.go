package ptrun

import "github.com/ptjit/ptjit/tracker"

// Flags are ptjit run's mode flags as typed (the CLI's strings).
type Flags struct {
	Pin, WX, PT, SoftFilter, SoftLayout, Copy, Proxy string
	// SoftLayoutGiven: --soft-layout was on the command line (its
	// default needs no --pt=soft)
	SoftLayoutGiven bool
	// PIDGiven: -p was on the command line (-p 0 is no process id)
	PIDGiven bool
}

// Parse puts f's modes into cfg. An error is a usage error (a bad value:
// status 2, nothing run).
func (f Flags) Parse(cfg *Config) (err error) {
	if cfg.Pin, err = tracker.ParsePin(f.Pin); err != nil {
		return err
	}
	if cfg.WX, err = tracker.ParseWX(f.WX); err != nil {
		return err
	}
	if cfg.PT, err = ParsePT(f.PT); err != nil {
		return err
	}
	if cfg.SoftFilter, err = ParseSoftFilter(f.SoftFilter); err != nil {
		return err
	}
	if cfg.SoftLayout, err = ParseSoftLayout(f.SoftLayout, f.SoftLayoutGiven); err != nil {
		return err
	}
	if cfg.Copy, err = tracker.ParseCopy(f.Copy); err != nil {
		return err
	}
	if cfg.Proxy, err = tracker.ParseProxy(f.Proxy); err != nil {
		return err
	}
	if f.PIDGiven && cfg.Attach <= 0 {
		cfg.Attach = -1 // validateAttach says it is no process id
	}
	return nil
}
