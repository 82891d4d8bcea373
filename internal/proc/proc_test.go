package proc

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestStartTimeNamesOneProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start := StartTime(pid)
	if start == "" {
		t.Fatalf("StartTime(%d) is empty", pid)
	}
	if !Alive(pid, start) {
		t.Fatalf("Alive(%d, %s) = false for a running process", pid, start)
	}
	if Alive(pid, start+"1") {
		t.Errorf("Alive with another start time = true: a reused PID would be taken for the process")
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("process group = %d, %v; want its own, %d", pgid, err, pid)
	}
	if err := KillGroup(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if Alive(pid, start) {
		t.Errorf("Alive after the kill = true")
	}
}

func TestKillGroupEndsWhatTheProcessStarted(t *testing.T) {
	pidFile := t.TempDir() + "/grandchild"
	cmd := exec.Command("bash", "-c", "sleep 30 & echo $! > "+pidFile+"; wait")
	OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var grandchild int
	for deadline := time.Now().Add(10 * time.Second); grandchild == 0; {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 1 {
			grandchild, _ = strconv.Atoi(string(b[:len(b)-1]))
		} else if time.Now().After(deadline) {
			t.Fatal("the grandchild did not start")
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	gstart := StartTime(grandchild)
	if err := KillGroup(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); Alive(grandchild, gstart); {
		if time.Now().After(deadline) {
			t.Fatal("the grandchild outlived its group's kill")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
