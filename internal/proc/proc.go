// Package proc is herald's handling of the processes it starts for
// others (a cron job's script, a terminal command, a kanban worker):
// each in a process group of its own, so that it and everything it
// started end together, and known by its PID and start time, so that a
// PID the system gave to another process since is not taken for it;
// and given an environment built for it (Env), never herald's own. It
// also names this process among the cluster's workers (InstanceName).
package proc

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// OwnGroup makes cmd start in a new process group led by it.
func OwnGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// KillGroup sends sig to the process group led by pid.
func KillGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return errors.New("proc.KillGroup: no process")
	}
	return syscall.Kill(-pid, sig)
}

// StartTime is when process pid started, as the system counts it (the
// start time in clock ticks since boot, /proc/<pid>/stat's 22nd field):
// together with the PID it names one process for as long as the machine
// runs. It is "" where the system does not say.
func StartTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// the fields after its closing parenthesis start at field 3.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// Alive reports whether the process pid that started at start (as
// StartTime gave it) still runs. With no start time known it asks the
// system whether pid exists at all. A zombie counts as gone.
func Alive(pid int, start string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat("/proc/self/stat"); serr == nil {
				return false
			}
		}
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return true
	}
	f := strings.Fields(s[i+1:])
	if len(f) > 0 && f[0] == "Z" {
		return false
	}
	return start == "" || (len(f) >= 20 && f[19] == start)
}
