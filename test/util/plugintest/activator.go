package plugintest

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
)

// Activator is a framework.Handle that records Activate calls (the queue's "retry these pods
// now"); the rest of the Handle is nil and unused by the tests that take it.
type Activator struct {
	framework.Handle
	mu        sync.Mutex
	activated []string
}

// Activate records the pods' keys.
func (a *Activator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range pods {
		a.activated = append(a.activated, k)
	}
	sort.Strings(a.activated)
}

// Take returns the keys activated since the last Take, sorted, and forgets them.
func (a *Activator) Take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.activated
	a.activated = nil
	return out
}

// Activated returns the keys activated since the last Take, sorted, and keeps them.
func (a *Activator) Activated() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.activated...)
}
