package v1alpha1

import "encoding/json"

// UnmarshalJSON decodes a spec and records a spec of the wrong shape (spec.labels a string, a
// value a number, ...) in DecodeError instead of failing. A failing spec would fail the decoding
// of the whole list it arrives in, so one bad object forced in through a loose CRD would stop
// every informer of NodePoolLabelSets, and with it the labeler for every pool (see
// test/integration TestBadLabelSetsThroughALooseCRD). Readers report DecodeError and leave the
// object's pool alone.
func (s *NodePoolLabelSetSpec) UnmarshalJSON(data []byte) error {
	type plain NodePoolLabelSetSpec // without this method
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		*s = NodePoolLabelSetSpec{DecodeError: err.Error()}
		return nil
	}
	*s = NodePoolLabelSetSpec(p)
	return nil
}
