package domainspread

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSoftCountsFewAndMany: Soft mode's counts hold a dimension's domains in a few slots until
// they are more than fewDomains, then in a slice by ID; either way every domain reads back its
// replicas, IDs never seen read 0, and a clone's counts are its own.
func TestSoftCountsFewAndMany(t *testing.T) {
	tests := []struct {
		name    string
		domains int
	}{
		{name: "one domain", domains: 1},
		{name: "as many as the slots", domains: fewDomains},
		{name: "one more than the slots", domains: fewDomains + 1},
		{name: "hosts of a large workload", domains: 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &spreadState{}
			want := map[int32]int32{}
			// IDs far apart (as hosts' are) and each domain added to twice, the second time
			// after every domain was added once.
			for round := range 2 {
				for i := range tt.domains {
					id := int32(i*997 + 3)
					s.addReplicasTo(0, id, int32(round+1))
					want[id] += int32(round + 1)
				}
			}
			got := map[int32]int32{}
			for id := range want {
				got[id] = s.inDomain(0, id)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("replicas per domain (-want +got):\n%s", diff)
			}
			for _, id := range []int32{0, 1, 996, int32(tt.domains * 997 * 2)} {
				if n := s.inDomain(0, id); n != 0 {
					t.Errorf("domain %d, which holds no replica: %d", id, n)
				}
			}
			if dense := s.perDomain[0] != nil; dense != (tt.domains > fewDomains) {
				t.Errorf("%d domains kept in a slice by ID: %v, want %v", tt.domains, dense, tt.domains > fewDomains)
			}
			c := s.Clone().(*spreadState)
			c.addReplicasTo(0, 3, 5)
			if a, b := s.inDomain(0, 3), c.inDomain(0, 3); a != want[3] || b != want[3]+5 {
				t.Errorf("after adding 5 to the clone's domain 3: original %d (want %d), clone %d (want %d)", a, want[3], b, want[3]+5)
			}
		})
	}
}

// addReplicasTo is addReplicas for one dimension, as Soft mode counts.
func (s *spreadState) addReplicasTo(d int, id, replicas int32) {
	var ids nodeDomains
	for i := range ids {
		ids[i] = noDomain
	}
	ids[d] = id
	pl := &DomainSpread{dims: make([]dimension, d+1)}
	pl.addReplicas(s, ids, replicas, 0)
}
