package labeler

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// holds remembers since when each node has been held by NodePoolReady's rule, as the labeler
// judges nodes. It feeds the set status (HeldNodes[].since), the held-too-long event and the
// held-node metrics.
type holds struct {
	mu    sync.Mutex
	nodes map[string]*hold
	// tainted are the nodes carrying the startup taint, with their pool and since when (the
	// startup-taint metrics: a taint the labeler does not lift is a node no pod may use).
	tainted map[string]taintedNode
}

type taintedNode struct {
	pool  string
	since time.Time
}

type hold struct {
	verdict pool.Verdict
	since   time.Time
	// warned: the held-too-long event was sent for this hold.
	warned bool
}

func newHolds() *holds { return &holds{nodes: map[string]*hold{}, tainted: map[string]taintedNode{}} }

// observe records the verdict on node and returns since when it has been held (zero when it is
// ready). A node first seen held is held since seed, when known (the time a set's status
// recorded, kept across restarts), else since now. A change of reason does not restart a hold.
func (h *holds) observe(node string, v pool.Verdict, now, seed time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v.Ready() {
		delete(h.nodes, node)
		return time.Time{}
	}
	cur := h.nodes[node]
	if cur == nil {
		since := now
		if !seed.IsZero() && seed.Before(now) {
			since = seed
		}
		cur = &hold{since: since}
		h.nodes[node] = cur
	}
	cur.verdict = v
	return cur.since
}

// warn reports whether the held-too-long event is due for node (held at least after, not yet
// warned) and marks it sent; otherwise it returns how long until it is due (0: never).
func (h *holds) warn(node string, now time.Time, after time.Duration) (due bool, wait time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := h.nodes[node]
	if cur == nil || cur.warned || after <= 0 {
		return false, 0
	}
	if held := now.Sub(cur.since); held < after {
		return false, after - held
	}
	cur.warned = true
	return true, 0
}

func (h *holds) forget(node string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.nodes, node)
	delete(h.tainted, node)
}

// observeTaint records whether node (of pool) carries the startup taint, and since when.
func (h *holds) observeTaint(node, pool string, since time.Time, tainted bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !tainted {
		delete(h.tainted, node)
		return
	}
	h.tainted[node] = taintedNode{pool: pool, since: since}
}

// poolHolds is what the metrics report for one pool.
type poolHolds struct {
	byReason map[string]int
	oldest   time.Time
	// tainted counts the pool's nodes carrying the startup taint, since taintedSince at the
	// earliest.
	tainted      int
	taintedSince time.Time
}

func (h *holds) byPool() map[string]*poolHolds {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]*poolHolds{}
	for _, cur := range h.nodes {
		p := out[cur.verdict.Pool]
		if p == nil {
			p = &poolHolds{byReason: map[string]int{}, oldest: cur.since}
			out[cur.verdict.Pool] = p
		}
		p.byReason[string(cur.verdict.HeldReason())]++
		if cur.since.Before(p.oldest) {
			p.oldest = cur.since
		}
	}
	for _, t := range h.tainted {
		p := out[t.pool]
		if p == nil {
			p = &poolHolds{byReason: map[string]int{}}
			out[t.pool] = p
		}
		if p.tainted == 0 || t.since.Before(p.taintedSince) {
			p.taintedSince = t.since
		}
		p.tainted++
	}
	return out
}

var (
	heldNodesDesc = prometheus.NewDesc("pool_labeler_held_nodes",
		"Nodes NodePoolReady keeps pods off, judged by the labeler with the scheduler's rule, by pool and reason.",
		[]string{"pool", "reason"}, nil)
	oldestHoldDesc = prometheus.NewDesc("pool_labeler_oldest_hold_seconds",
		"How long the longest-held node of a pool has been held by NodePoolReady, in seconds.",
		[]string{"pool"}, nil)
	startupTaintedDesc = prometheus.NewDesc("pool_labeler_startup_tainted_nodes",
		"Nodes carrying the startup taint (--startup-taint-key), by pool, as the labeler's cache last saw them.",
		[]string{"pool"}, nil)
	oldestStartupTaintDesc = prometheus.NewDesc("pool_labeler_oldest_startup_taint_seconds",
		"How long the node of a pool that has carried the startup taint longest has carried it (since it joined), in seconds.",
		[]string{"pool"}, nil)
)

// holdCollector serves the held-node metrics of the running controllers at scrape time, so the
// age is current without a reconcile. Only the leader's controllers run, so only the leader
// reports holds.
type holdCollector struct {
	mu     sync.Mutex
	active map[*holds]bool
	now    func() time.Time
}

var holdMetrics = &holdCollector{active: map[*holds]bool{}, now: time.Now}

func (c *holdCollector) add(h *holds) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active[h] = true
}

func (c *holdCollector) remove(h *holds) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.active, h)
}

func (c *holdCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- heldNodesDesc
	ch <- oldestHoldDesc
	ch <- startupTaintedDesc
	ch <- oldestStartupTaintDesc
}

func (c *holdCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	merged := map[string]*poolHolds{}
	for h := range c.active {
		for name, p := range h.byPool() {
			m := merged[name]
			if m == nil {
				m = &poolHolds{byReason: map[string]int{}, oldest: p.oldest, taintedSince: p.taintedSince}
				merged[name] = m
			}
			for r, n := range p.byReason {
				m.byReason[r] += n
			}
			if p.oldest.Before(m.oldest) {
				m.oldest = p.oldest
			}
			if p.tainted > 0 && (m.tainted == 0 || p.taintedSince.Before(m.taintedSince)) {
				m.taintedSince = p.taintedSince
			}
			m.tainted += p.tainted
		}
	}
	c.mu.Unlock()
	now := c.now()
	names := make([]string, 0, len(merged))
	for name := range merged {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := merged[name]
		for r, n := range p.byReason {
			ch <- prometheus.MustNewConstMetric(heldNodesDesc, prometheus.GaugeValue, float64(n), name, r)
		}
		if len(p.byReason) > 0 {
			ch <- prometheus.MustNewConstMetric(oldestHoldDesc, prometheus.GaugeValue, now.Sub(p.oldest).Seconds(), name)
		}
		if p.tainted > 0 {
			ch <- prometheus.MustNewConstMetric(startupTaintedDesc, prometheus.GaugeValue, float64(p.tainted), name)
			ch <- prometheus.MustNewConstMetric(oldestStartupTaintDesc, prometheus.GaugeValue, now.Sub(p.taintedSince).Seconds(), name)
		}
	}
}
