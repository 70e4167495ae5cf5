package ptpkt

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
)

// HostCPU reads the CPU this process runs on from /proc/cpuinfo (ptdump's
// --cpu auto). A non-Intel CPU gets VendorUnknown.
func HostCPU() (CPU, error) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return CPU{}, err
	}
	defer f.Close()
	var c CPU
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() && seen < 4 {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		n, _ := strconv.ParseUint(v, 10, 16)
		switch k {
		case "vendor_id":
			if v == "GenuineIntel" {
				c.Vendor = VendorIntel
			}
			seen++
		case "cpu family":
			c.Family = uint16(n)
			seen++
		case "model":
			c.Model = uint8(n)
			seen++
		case "stepping":
			c.Stepping = uint8(n)
			seen++
		}
	}
	if err := sc.Err(); err != nil {
		return CPU{}, err
	}
	if seen < 4 {
		return CPU{}, errors.New("/proc/cpuinfo: no cpu description")
	}
	return c, nil
}
