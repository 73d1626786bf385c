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

// EachManagedLabel calls fn for every key in a managed-labels annotation value, in order, and stops
// early when fn returns false. An empty value means no managed labels.
//
// The scheduler calls this for every node in every cycle, so the common form (a plain JSON array
// of strings without escapes) is scanned in place without allocating; anything else is handed to
// encoding/json, which decides whether the value is valid.
func EachManagedLabel(annotation string, fn func(key string) bool) error {
	s := strings.TrimSpace(annotation)
	if s == "" {
		return nil
	}
	if strings.IndexByte(s, '\\') >= 0 {
		return eachManagedLabelSlow(s, fn)
	}
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return ErrMalformedManagedLabels
	}
	// Validate the whole value before calling fn, so a malformed value never yields keys.
	if _, err := scanStringArray(s, nil); err != nil {
		return err
	}
	_, err := scanStringArray(s, fn)
	return err
}

// scanStringArray walks a JSON array of strings that contains no backslash escapes. It returns
// false as its first result if fn stopped the walk.
func scanStringArray(s string, fn func(string) bool) (bool, error) {
	i := skipSpace(s, 1)
	if i < len(s) && s[i] == ']' {
		if skipSpace(s, i+1) != len(s) {
			return false, ErrMalformedManagedLabels
		}
		return true, nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return false, ErrMalformedManagedLabels
		}
		end := strings.IndexByte(s[i+1:], '"')
		if end < 0 {
			return false, ErrMalformedManagedLabels
		}
		key := s[i+1 : i+1+end]
		for j := 0; j < len(key); j++ {
			// JSON forbids raw control characters in strings.
			if key[j] < 0x20 {
				return false, ErrMalformedManagedLabels
			}
		}
		if fn != nil && !fn(key) {
			return false, nil
		}
		i = skipSpace(s, i+2+end)
		if i >= len(s) {
			return false, ErrMalformedManagedLabels
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case ']':
			if skipSpace(s, i+1) != len(s) {
				return false, ErrMalformedManagedLabels
			}
			return true, nil
		default:
			return false, ErrMalformedManagedLabels
		}
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

func eachManagedLabelSlow(s string, fn func(string) bool) error {
	var keys []string
	if err := json.Unmarshal([]byte(s), &keys); err != nil || keys == nil {
		return fmt.Errorf("%w: %v", ErrMalformedManagedLabels, err)
	}
	for _, k := range keys {
		if !fn(k) {
			return nil
		}
	}
	return nil
}

// ParseManagedLabels returns the keys listed in a managed-labels annotation value.
func ParseManagedLabels(annotation string) ([]string, error) {
	var keys []string
	err := EachManagedLabel(annotation, func(k string) bool {
		keys = append(keys, k)
		return true
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// FormatManagedLabels renders keys as a managed-labels annotation value.
func FormatManagedLabels(keys []string) string {
	if keys == nil {
		keys = []string{}
	}
	b, _ := json.Marshal(keys) // a []string always marshals
	return string(b)
}
