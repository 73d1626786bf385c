//go:build !linux && !darwin

package poolctl

import (
	"fmt"
	"runtime"
)

func dupFD(int) (int, error) { return -1, fmt.Errorf("not supported on %s", runtime.GOOS) }

func dup2FD(int, int) error { return fmt.Errorf("not supported on %s", runtime.GOOS) }
