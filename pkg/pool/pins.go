package pool

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Pin is a requirement that a node's label Key have one of Values.
type Pin struct {
	Key    string
	Values []string
}

// Pins are the pool pins in a pod's required node selection, as kube-scheduler's NodeAffinity
// enforces it (nodeSelector AND any one of the required node-affinity terms):
//
//   - Selector: the nodeSelector's entries on a pool key; each must hold.
//   - Terms: one pin per required term (the terms are ORed), when every term has an In
//     expression on a pool key; nil when a term has none, so the terms pin nothing.
//
// Every node the pod may run on carries, for each Selector pin, the pin's label and value, and
// for some Terms pin one of its values. So the nodes of those pools are a superset of the nodes
// NodeAffinity accepts; which pins narrow the search most is the caller's choice.
type Pins struct {
	Selector []Pin
	Terms    []Pin
}

// Empty reports whether the pod is pinned to no pool.
func (p Pins) Empty() bool { return len(p.Selector) == 0 && len(p.Terms) == 0 }

// PinsOf returns the pool pins of pod for the pool label keys.
func PinsOf(pod *v1.Pod, keys []string) Pins {
	var pins Pins
	for _, k := range keys {
		if v, ok := pod.Spec.NodeSelector[k]; ok {
			pins.Selector = append(pins.Selector, Pin{Key: k, Values: []string{v}})
		}
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return pins
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		// No term matches no node: NodeAffinity says so itself; nothing to narrow.
		return pins
	}
	for _, term := range terms {
		pin, ok := termPin(term, keys)
		if !ok {
			return Pins{Selector: pins.Selector}
		}
		pins.Terms = append(pins.Terms, pin)
	}
	return pins
}

// termPin returns the term's In expression on a pool key with the fewest values (a term's
// expressions are ANDed: any one of them is a superset; the fewest values is the smallest).
func termPin(term v1.NodeSelectorTerm, keys []string) (Pin, bool) {
	var best Pin
	found := false
	for _, e := range term.MatchExpressions {
		if e.Operator != v1.NodeSelectorOpIn || !slices.Contains(keys, e.Key) {
			continue
		}
		if !found || len(e.Values) < len(best.Values) {
			best, found = Pin{Key: e.Key, Values: e.Values}, true
		}
	}
	return best, found
}

// Allow reports whether a node with these labels satisfies the pins: every Selector pin and,
// if there are Terms, one of them.
func (p Pins) Allow(labels map[string]string) bool {
	for _, pin := range p.Selector {
		if !pin.allow(labels) {
			return false
		}
	}
	if len(p.Terms) == 0 {
		return true
	}
	for _, pin := range p.Terms {
		if pin.allow(labels) {
			return true
		}
	}
	return false
}

func (p Pin) allow(labels map[string]string) bool {
	v, ok := labels[p.Key]
	return ok && slices.Contains(p.Values, v)
}
