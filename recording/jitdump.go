package recording

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/perf"
)

// ExportJitdump writes every code version of DIR/code.db as a
// JIT_CODE_LOAD of OUTDIR/jit-PID.dump, named ptjit_rREGION_vVERSION_ADDR
// and timed by the TSC at which the version became executable, each
// function its JIT named in it (Names) as a load of its own under that
// name, and, unless
// noPerf, OUTDIR/perf.data: DIR/perf.data with the jitdump markers that
// perf inject --jit looks for (perf.ExportJit). warn is told when code.db
// is incomplete (db.OpenChecked).
func ExportJitdump(dir, outDir string, noPerf bool, warn func(msg string)) (*perf.JitExport, error) {
	codeDB := filepath.Join(dir, "code.db")
	d, err := db.OpenChecked(codeDB, warn)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	perfIn := ""
	if !noPerf {
		perfIn = filepath.Join(dir, "perf.data")
		if _, err := os.Stat(perfIn); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s: no such file (record with a PT backend, or use --no-perf-data)", perfIn)
			}
			return nil, err
		}
	}
	infos, err := d.Versions(db.VersionFilter{})
	if err != nil {
		return nil, err
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("%s: no code versions recorded: nothing to export", codeDB)
	}
	names, err := LoadNames(d, 0, nil)
	if err != nil {
		return nil, err
	}
	vs := make([]perf.JitCodeVersion, 0, len(infos))
	for i := range infos {
		v := &infos[i]
		data, err := d.VersionData(v)
		if err != nil {
			return nil, err
		}
		vs = append(vs, perf.JitCodeVersion{Pid: v.PID, Tid: v.TID, Addr: v.Addr, Code: data, TSC: v.Valid.TSC,
			Name: fmt.Sprintf("ptjit_r%d_v%d_%x", v.Region, v.Vno, v.Addr)})
		// each function the JIT named in this version: a load of its
		// own at the same time, after the version's (perf splits the
		// version's mapping around it)
		for _, sp := range names.In(v.Region, v.Vno) {
			lo, hi := max(sp.Addr, v.Addr), min(sp.Addr+sp.Size, v.Addr+v.Size)
			if lo < hi {
				vs = append(vs, perf.JitCodeVersion{Pid: v.PID, Tid: v.TID, Addr: lo, Code: data[lo-v.Addr : hi-v.Addr], TSC: v.Valid.TSC, Name: sp.Name})
			}
		}
	}
	return perf.ExportJit(perfIn, outDir, vs)
}
