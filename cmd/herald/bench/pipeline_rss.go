package bench

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// peakRSSMB is the process's peak resident set size (VmHWM in
// /proc/self/status) in MiB, or 0 where there is no such file.
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		if err != nil {
			return 0
		}
		return kb / 1024
	}
	return 0
}

// resetPeakRSS starts the peak over from the current resident set, so a
// later peakRSSMB covers what ran since (Linux 4.0 and later; elsewhere
// the peak stays the process's whole life's).
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
