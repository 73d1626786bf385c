package poolctl

import "syscall"

func dupFD(fd int) (int, error) {
	nfd, err := syscall.Dup(fd)
	if err == nil {
		syscall.CloseOnExec(nfd)
	}
	return nfd, err
}

// dup2FD makes newfd refer to oldfd's file. Dup3, not Dup2: linux/arm64 has only Dup3.
func dup2FD(oldfd, newfd int) error { return syscall.Dup3(oldfd, newfd, 0) }
