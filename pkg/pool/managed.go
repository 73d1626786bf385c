package pool

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ManagedLabelsAnnotation lists, as a JSON array of keys, the node labels a NodePoolLabelSet
// controller has applied. It is the Banzai nodepool-labels-operator's annotation, kept so that
// existing clusters migrate without relabelling.
const ManagedLabelsAnnotation = "nodepool.banzaicloud.io/managed-labels"

// ErrMalformedManagedLabels is returned when the managed-labels annotation is not a JSON array of strings.
var ErrMalformedManagedLabels = errors.New("managed-labels annotation is not a JSON array of strings")

// EachManagedLabel calls fn for every key in a managed-labels annotation value, in order, and
// stops early when fn returns false. An empty value means no managed labels.
//
// The scheduler calls this for every node in every cycle, so it scans the common form (a JSON
// array of plain ASCII strings) once, in place, without allocating, and hands anything with
// escapes or non-ASCII bytes to encoding/json. Because of that single pass, fn may already have
// seen some keys when an error is returned, and may see leading keys twice: fn must be
// idempotent and callers must discard what they gathered when an error is returned.
func EachManagedLabel(annotation string, fn func(key string) bool) error {
	s := trimJSONSpace(annotation)
	if s == "" {
		return nil
	}
	err := scanStringArray(s, fn)
	if err == errNeedsDecoder {
		return eachManagedLabelSlow(s, fn)
	}
	return err
}

// errNeedsDecoder tells EachManagedLabel to fall back to encoding/json.
var errNeedsDecoder = errors.New("value needs a full JSON decoder")

// scanStringArray walks a JSON array of plain ASCII strings.
func scanStringArray(s string, fn func(string) bool) error {
	if s[0] != '[' {
		return ErrMalformedManagedLabels
	}
	i := skipSpace(s, 1)
	if i < len(s) && s[i] == ']' {
		return expectEnd(s, i+1)
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return ErrMalformedManagedLabels
		}
		start := i + 1
		end := start
		for ; end < len(s) && s[end] != '"'; end++ {
			switch c := s[end]; {
			case c == '\\' || c >= 0x80:
				return errNeedsDecoder
			case c < 0x20: // JSON forbids raw control characters in strings.
				return ErrMalformedManagedLabels
			}
		}
		if end >= len(s) {
			return ErrMalformedManagedLabels
		}
		if !fn(s[start:end]) {
			return nil
		}
		i = skipSpace(s, end+1)
		if i >= len(s) {
			return ErrMalformedManagedLabels
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case ']':
			return expectEnd(s, i+1)
		default:
			return ErrMalformedManagedLabels
		}
	}
}

func expectEnd(s string, i int) error {
	if skipSpace(s, i) != len(s) {
		return ErrMalformedManagedLabels
	}
	return nil
}

// needsDecoder reports escapes or non-ASCII bytes, which only encoding/json interprets exactly.
func needsDecoder(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] >= 0x80 {
			return true
		}
	}
	return false
}

// trimJSONSpace trims the whitespace JSON allows around a value (not Unicode spaces).
func trimJSONSpace(s string) string {
	i, j := 0, len(s)
	for i < j && isJSONSpace(s[i]) {
		i++
	}
	for j > i && isJSONSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(s string, i int) int {
	for i < len(s) && isJSONSpace(s[i]) {
		i++
	}
	return i
}

func eachManagedLabelSlow(s string, fn func(string) bool) error {
	var keys []*string
	if err := json.Unmarshal([]byte(s), &keys); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedManagedLabels, err)
	}
	if keys == nil { // JSON null
		return ErrMalformedManagedLabels
	}
	for _, k := range keys {
		if k == nil { // a null entry, refused like the fast path does
			return ErrMalformedManagedLabels
		}
	}
	for _, k := range keys {
		if !fn(*k) {
			return nil
		}
	}
	return nil
}

// ParseManagedLabels returns the keys listed in a managed-labels annotation value.
func ParseManagedLabels(annotation string) ([]string, error) {
	var keys []string
	collect := EachManagedLabel
	if needsDecoder(annotation) {
		// Decode once, so no key is collected twice.
		collect = func(a string, fn func(string) bool) error { return eachManagedLabelSlow(trimJSONSpace(a), fn) }
	}
	err := collect(annotation, func(k string) bool {
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
