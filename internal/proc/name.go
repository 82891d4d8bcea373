package proc

import (
	"os"
	"strconv"

	"github.com/google/uuid"
)

// InstanceName names this process among the cluster's workers, in its
// leases and claims: host-pid-random, so that a restarted process, or
// one in another container with the same host name and PID, is another.
func InstanceName() string {
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + uuid.NewString()[:8]
}
