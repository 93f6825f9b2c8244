package framework

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StopTimeout is how long [Process.Stop] waits for a process to exit after SIGTERM before it
// sends SIGKILL to the process group.
var StopTimeout = 15 * time.Second

// logTailLines is how many lines of a process log are printed when a test fails.
const logTailLines = 60

// ProcessSpec describes a child process for [StartProcess].
type ProcessSpec struct {
	// Name identifies the process in test logs and names its log file; required.
	Name string
	// Path is the executable; required.
	Path string
	// Args are the command-line arguments, without the executable.
	Args []string
	// Env is added to the test process's environment (later entries win).
	Env []string
	// Dir is the working directory; empty means the test's working directory.
	Dir string
	// LogDir receives <Name>-*.log with the process's stdout and stderr; empty means a new
	// t.TempDir().
	LogDir string
}

// Process is a child process started by [StartProcess]. Its methods are safe for concurrent use.
type Process struct {
	// Name is the name from the ProcessSpec.
	Name string
	// PID is the process id, also the id of the process group it leads.
	PID int
	// LogPath is the file holding its stdout and stderr.
	LogPath string
	// Args is the full command line, starting with the executable.
	Args []string

	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
	stopErr  error
}

var (
	processesMu sync.Mutex
	processes   []*Process
)

// Processes returns every process the framework started in this test binary, in start order,
// whether or not it is still running.
func Processes() []*Process {
	processesMu.Lock()
	defer processesMu.Unlock()
	return append([]*Process(nil), processes...)
}

// StartProcess starts spec as a child process in its own process group with stdout and stderr
// going to a log file, and registers a t.Cleanup that stops it (see [Process.Stop]) and, when the
// test has failed, prints the tail of its log. The child also gets SIGKILL when the test binary
// dies without running cleanups. It fails the test when the process cannot be started.
func StartProcess(t TB, spec ProcessSpec) *Process {
	t.Helper()
	p, err := startProcess(t, spec)
	if err != nil {
		t.Fatalf("starting %s: %v", spec.Name, err)
	}
	return p
}

func startProcess(t TB, spec ProcessSpec) (*Process, error) {
	if spec.Name == "" || spec.Path == "" {
		return nil, errors.New("ProcessSpec needs a Name and a Path")
	}
	logDir := spec.LogDir
	if logDir == "" {
		logDir = t.TempDir()
	}
	logFile, err := os.CreateTemp(logDir, sanitizeFileName(spec.Name)+"-*.log")
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor

	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // so that Stop reaches children of the child too
		Pdeathsig: syscall.SIGKILL, // so that it dies with the test binary if cleanups never run
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{
		Name:    spec.Name,
		PID:     cmd.Process.Pid,
		LogPath: logFile.Name(),
		Args:    cmd.Args,
		cmd:     cmd,
		done:    make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	processesMu.Lock()
	processes = append(processes, p)
	processesMu.Unlock()

	t.Cleanup(func() {
		// Report a stop error here only if an explicit Stop has not already returned it.
		stoppedHere := false
		p.stopOnce.Do(func() { stoppedHere = true; p.stopErr = p.stop() })
		if stoppedHere && p.stopErr != nil {
			t.Errorf("stopping %s: %v", p.Name, p.stopErr)
		}
		if t.Failed() {
			t.Logf("last lines of %s (pid %d, %s):\n%s", p.Name, p.PID, p.LogPath, p.LogTail(logTailLines))
		}
	})
	return p, nil
}

// Exited returns a channel that is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.done }

// ExitError returns the error from waiting for the process (nil for exit status 0); it blocks
// until the process has exited.
func (p *Process) ExitError() error {
	<-p.done
	return p.waitErr
}

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop ends the process group: SIGTERM to the group, then SIGKILL to the group when the leader
// or another member has not exited after [StopTimeout]; it returns once the leader is reaped
// and no member of the group is alive. It is idempotent; every call returns the first call's
// result, which is an error only when SIGKILL was needed or did not help. An exit status caused
// by the stop signal is not an error; see [Process.ExitError] for the raw status.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop() })
	return p.stopErr
}

func (p *Process) stop() error {
	_ = syscall.Kill(-p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(StopTimeout)
	if !p.waitGroupGone(deadline) {
		_ = syscall.Kill(-p.PID, syscall.SIGKILL)
		if !p.waitGroupGone(time.Now().Add(StopTimeout)) {
			return fmt.Errorf("%s (pid %d): processes %v survived SIGKILL", p.Name, p.PID, LiveProcesses(p.PID))
		}
		return fmt.Errorf("%s (pid %d) or a process of its group did not exit %v after SIGTERM; killed them", p.Name, p.PID, StopTimeout)
	}
	return nil
}

// waitGroupGone waits until the leader is reaped and no member of its group is alive, and
// reports whether that happened before deadline.
func (p *Process) waitGroupGone(deadline time.Time) bool {
	select {
	case <-p.done:
	case <-time.After(time.Until(deadline)):
		return false
	}
	for len(LiveProcesses(p.PID)) > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// LogTail returns the last n lines of the process's log file, or a note why it cannot be read.
func (p *Process) LogTail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return tailLines(data, n)
}

// tailLines returns the last n lines of data.
func tailLines(data []byte, n int) string {
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// AssertStopped fails the test (without stopping it) for every pid that still names a live
// process, or still leads a process group with live members, according to /proc. Zombies count
// as gone. Use it with the PIDs of processes stopped earlier (for example [ControlPlane.PIDs]).
func AssertStopped(t TB, pids ...int) {
	t.Helper()
	for _, pid := range LiveProcesses(pids...) {
		t.Errorf("process %d is still running: %s", pid, procCmdline(pid))
	}
}

// LiveProcesses returns the processes still alive (state other than zombie or dead, per /proc)
// whose pid or process group id is one of pids, sorted by pid.
func LiveProcesses(pids ...int) []int {
	want := make(map[int]bool, len(pids))
	for _, pid := range pids {
		want[pid] = true
	}
	entries, _ := os.ReadDir("/proc")
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pgrp, ok := procStat(pid)
		if !ok || state == "Z" || state == "X" {
			continue
		}
		if want[pid] || want[pgrp] {
			live = append(live, pid)
		}
	}
	return live
}

// procStat reads the state and process group of pid from /proc/<pid>/stat.
func procStat(pid int) (state string, pgrp int, ok bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	// Format: pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return "", 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 3 {
		return "", 0, false
	}
	pgrp, err = strconv.Atoi(fields[2])
	if err != nil {
		return "", 0, false
	}
	return fields[0], pgrp, true
}

// procCmdline returns the command line of pid from /proc, for messages.
func procCmdline(pid int) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return "(unknown)"
	}
	return strings.TrimSpace(strings.ReplaceAll(string(data), "\x00", " "))
}

// sanitizeFileName replaces characters that do not belong in a file name.
func sanitizeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == 0 || r == ' ' {
			return '_'
		}
		return r
	}, s)
}
