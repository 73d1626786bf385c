package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ManagedLabelsAnnotation lists, as a JSON array of keys, the node labels a NodePoolLabelSet
// controller has applied. It is the Banzai nodepool-labels-operator's annotation, kept so that
// existing clusters migrate without relabelling.
const ManagedLabelsAnnotation = "nodepool.banzaicloud.io/managed-labels"

// ErrMalformedManagedLabels is returned when the managed-labels annotation is not a JSON array of strings.
var ErrMalformedManagedLabels = errors.New("managed-labels annotation is not a JSON array of strings")

// ParseManagedLabels returns the keys listed in a managed-labels annotation value. An empty or
// blank value means no managed labels. The scheduler reads an annotation only when a node or the
// label sets change (NodePoolReady remembers its verdict per node version), so encoding/json's
// cost does not recur per scheduling cycle.
func ParseManagedLabels(annotation string) ([]string, error) {
	if strings.Trim(annotation, jsonSpace) == "" {
		return nil, nil
	}
	// []*string, not []string: a null entry must be refused, not read as "".
	var entries []*string
	if err := json.Unmarshal([]byte(annotation), &entries); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedManagedLabels, err)
	}
	if entries == nil { // JSON null
		return nil, ErrMalformedManagedLabels
	}
	var keys []string
	for _, k := range entries {
		if k == nil {
			return nil, ErrMalformedManagedLabels
		}
		keys = append(keys, *k)
	}
	return keys, nil
}

// jsonSpace is the whitespace JSON allows around a value (not Unicode spaces).
const jsonSpace = " \t\n\r"

// FormatManagedLabels renders keys as a managed-labels annotation value.
func FormatManagedLabels(keys []string) string {
	if keys == nil {
		keys = []string{}
	}
	b, _ := json.Marshal(keys) // a []string always marshals
	return string(b)
}

// Labelled reports whether a node's managed-labels annotation names at least one key, that is,
// a labeler (pool-labeler or the nodepool-labels-operator) has applied a NodePoolLabelSet to it.
// The operator writes "[]" on every node whose pool has no set in its namespace, so an empty
// list is no evidence. No allocation: it runs in Filter through Gate.Check. A malformed value
// with a quoted entry counts as labelled (someone wrote keys there).
func Labelled(annotations map[string]string) bool {
	a := strings.Trim(annotations[ManagedLabelsAnnotation], jsonSpace)
	return len(a) > 2 && a[0] == '[' && strings.IndexByte(a, '"') > 0
}
