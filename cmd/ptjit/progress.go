package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// progress shows how far a long decode has come, on stderr, when stderr is
// a terminal: "ptjit: decoding 12.3 of 40.0 MB (30%)", redrawn in place
// five times a second and erased at the end.
type progress struct {
	w     io.Writer
	total uint64
	done  atomic.Uint64 // trace bytes decoded
	stop  chan struct{}
	wg    sync.WaitGroup
}

// progressMin is the trace size below which no progress is shown.
const progressMin = 1 << 20

// startProgress returns nil (which ignores every call) when stderr is not
// a terminal or the trace is small.
func startProgress(total uint64) *progress {
	if total < progressMin {
		return nil
	}
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	p := &progress{w: os.Stderr, total: total, stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				fmt.Fprint(p.w, "\r\033[K")
				return
			case <-tick.C:
				d := p.done.Load()
				fmt.Fprintf(p.w, "\rptjit: decoding %.1f of %.1f MB (%d%%)\033[K", float64(d)/1e6, float64(p.total)/1e6, d*100/p.total)
			}
		}
	}()
	return p
}

// set records that the trace is decoded up to byte n (of all traces).
func (p *progress) set(n uint64) {
	if p != nil {
		p.done.Store(n)
	}
}

func (p *progress) finish() {
	if p != nil {
		close(p.stop)
		p.wg.Wait()
	}
}
