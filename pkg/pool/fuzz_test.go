package pool

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
)

// Fuzz inputs encode lists and maps as text, so that the seeds (and the corpus files in
// testdata/fuzz) stay readable: one entry per line, "key=value" for labels.

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func parseLabels(s string) map[string]string {
	labels := map[string]string{}
	for _, line := range splitLines(s) {
		k, v, _ := strings.Cut(line, "=")
		labels[k] = v
	}
	return labels
}

// The fuzz references below are written from the definitions (DESIGN.md: "Pool identity";
// the managed-labels annotation is a JSON array of keys), not from the code: they call none of
// the package's helpers and do not share its default list, so a change to either shows.

// refDefaultPoolLabelKeys is DESIGN.md's default list, spelled out here on purpose.
var refDefaultPoolLabelKeys = []string{
	"nodepool.banzaicloud.io/name",
	"node.banzaicloud.io/nodepool",
	"kubernetes.azure.com/agentpool",
	"agentpool",
	"cloud.google.com/gke-nodepool",
	"eks.amazonaws.com/nodegroup",
	"karpenter.sh/nodepool",
	"doks.digitalocean.com/node-pool",
}

// refPoolOf: the value of the first key in the list with a non-empty value. Written as a scan
// from the end that keeps the last hit, unlike the implementation's early return.
func refPoolOf(keys []string, labels map[string]string) (string, bool) {
	if len(keys) == 0 {
		keys = refDefaultPoolLabelKeys
	}
	name, found := "", false
	for i := len(keys) - 1; i >= 0; i-- {
		if v, has := labels[keys[i]]; has && len(v) > 0 {
			name, found = v, true
		}
	}
	return name, found
}

// refManagedLabels: a blank value (JSON whitespace only) lists nothing; otherwise the value must
// decode as a JSON array whose every entry is a string. Decoded generically, not into the
// implementation's types.
func refManagedLabels(annotation string) ([]string, bool) {
	blank := true
	for i := 0; i < len(annotation); i++ {
		if c := annotation[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			blank = false
		}
	}
	if blank {
		return nil, true
	}
	var v any
	if json.Unmarshal([]byte(annotation), &v) != nil {
		return nil, false
	}
	list, isList := v.([]any)
	if !isList {
		return nil, false
	}
	keys := make([]string, 0, len(list))
	for _, e := range list {
		k, isString := e.(string)
		if !isString {
			return nil, false
		}
		keys = append(keys, k)
	}
	return keys, true
}

func TestReferenceDefaultsMatchTheShippedDefaults(t *testing.T) {
	// The shipped defaults may grow a key only together with DESIGN.md and this reference.
	if diff := cmp.Diff(refDefaultPoolLabelKeys, configv1.DefaultPoolLabelKeys); diff != "" {
		t.Errorf("default pool label keys (-reference +shipped):\n%s", diff)
	}
}

// FuzzPoolOf fuzzes pool identity and the readiness gate's use of it: the configured keys
// (one per line; none means the defaults), the node's labels ("k=v" per line) and its
// managed-labels annotation. Properties: PoolOf agrees with the plain definition, is
// deterministic and does not depend on the caller's slice; ValidateLabelKeys refuses duplicates;
// with no NodePoolLabelSets the gate's verdict follows from the pool and the annotation alone (refPoolOf, refManagedLabels).
func FuzzPoolOf(f *testing.F) {
	f.Add("", "nodepool.banzaicloud.io/name=spot", "")
	f.Add("", "kubernetes.azure.com/agentpool=aks\nnodepool.banzaicloud.io/name=banzai", "")
	f.Add("", "nodepool.banzaicloud.io/name=\nagentpool=fallback", `["example.com/old"]`)
	f.Add("example.com/pool", "example.com/pool=a\nexample.com/old=x", `["example.com/old"]`)
	f.Add("example.com/pool\nexample.com/pool", "example.com/pool=a", `["example.com/old",`)
	f.Add("a\nb\nc", "c=3\nb=\nd=4", `["d","c"]`)
	f.Add("", "kubernetes.io/hostname=n1", "null")
	// A managed pool-identity label is never stale (found by fuzz-smoke).
	f.Add("a\nb\nc", "c=", `["c"]`)
	f.Fuzz(func(t *testing.T, keyText, labelText, annotation string) {
		keys := splitLines(keyText)
		labels := parseLabels(labelText)

		id := NewIdentity(keys)
		name, ok := id.PoolOf(labels)
		wantName, wantOK := refPoolOf(keys, labels)
		if name != wantName || ok != wantOK {
			t.Fatalf("PoolOf(keys %q, labels %q) = (%q, %v), want (%q, %v)", keys, labels, name, ok, wantName, wantOK)
		}
		if ok && name == "" {
			t.Fatalf("PoolOf found an empty pool name")
		}
		if n2, ok2 := id.PoolOf(labels); n2 != name || ok2 != ok {
			t.Fatalf("PoolOf is not deterministic: (%q, %v) then (%q, %v)", name, ok, n2, ok2)
		}
		for i := range keys {
			keys[i] = "changed/" + keys[i]
		}
		if n3, ok3 := id.PoolOf(labels); n3 != name || ok3 != ok {
			t.Fatalf("Identity changed with its caller's slice: (%q, %v) then (%q, %v)", name, ok, n3, ok3)
		}
		keys = splitLines(keyText)

		// Valid key lists have no duplicates (a duplicate would be a silent no-op in the list).
		if errs := validation.ValidateLabelKeys(keys, field.NewPath("keys")); len(errs) == 0 {
			seen := map[string]bool{}
			for _, k := range keys {
				if seen[k] {
					t.Fatalf("ValidateLabelKeys accepted the duplicate %q in %q", k, keys)
				}
				seen[k] = true
			}
		}

		// The gate with no NodePoolLabelSets: the annotation is not read at all (stale means a
		// label a set in view stopped wanting), so the verdict follows from PoolOf alone.
		annotations := map[string]string{ManagedLabelsAnnotation: annotation}
		managed, wellFormed := refManagedLabels(annotation)
		for _, policy := range []config.UnknownPoolPolicy{config.UnknownPoolAuto, config.UnknownPoolReject, config.UnknownPoolAllow} {
			g := Gate{Identity: id, UnknownPoolPolicy: policy}
			v := g.Check(labels, annotations, nil)
			if v.Pool != wantName && v.Cause != UnknownPool {
				t.Fatalf("%s: verdict names pool %q, PoolOf says %q", policy, v.Pool, wantName)
			}
			want := Ready
			if !ok && policy == config.UnknownPoolReject {
				want = UnknownPool
			}
			if v.Cause != want {
				t.Fatalf("%s, no sets: Check(labels %q, annotation %q) = %v (%s), want %v", policy, labels, annotation, v.Cause, v.Key, want)
			}
		}
		if !ok {
			return
		}
		g := Gate{Identity: id, UnknownPoolPolicy: config.UnknownPoolAuto}

		// A set of the pool that wants nothing: every managed label still on the node is stale.
		wantsNothing := CompileLabelSetsFor(id, []*labelsv1alpha1.NodePoolLabelSet{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: wantName}}})
		v := g.Check(labels, annotations, wantsNothing)
		stale := ""
		for _, k := range managed {
			// A pool-identity key (configured or a default one) is never stale: nothing may
			// remove it, and it names the node's pool.
			if slices.Contains(keys, k) || slices.Contains(refDefaultPoolLabelKeys, k) {
				continue
			}
			if _, present := labels[k]; present {
				stale = k
				break
			}
		}
		want := Ready
		switch {
		case !wellFormed:
			want = MalformedAnnotation
		case stale != "":
			want = StaleLabel
		}
		if v.Cause != want {
			t.Fatalf("set wanting nothing: Check(labels %q, annotation %q) = %v (%s), want %v", labels, annotation, v.Cause, v.Key, want)
		}
		if want == StaleLabel && v.Key != stale {
			t.Fatalf("stale key %q reported, want the first listed, %q", v.Key, stale)
		}

		// No set in view, but the pool is labelled from one elsewhere: a node a labeler labelled
		// is used, one it has not labelled is held.
		if wellFormed {
			v := g.Check(labels, annotations, EmptyLabelSets.WithLabelledPools([]string{wantName}))
			want := LabelSetNotVisible
			if len(managed) > 0 {
				want = Ready
			}
			if v.Cause != want {
				t.Fatalf("pool labelled elsewhere: Check(labels %q, annotation %q) = %v, want %v", labels, annotation, v.Cause, want)
			}
		}
	})
}

// The shipped CRD's validation of spec.labels, as regular expressions (CEL's matches() is RE2,
// as Go's regexp is). TestCRDRulesAreTheFuzzReference keeps them in step with the CRD file.
const (
	crdKeyPattern      = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	crdReservedPattern = `^([^/]*[.])?(kubernetes|k8s)[.]io/`
	crdValuePattern    = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
)

var (
	crdKey      = regexp.MustCompile(crdKeyPattern)
	crdReserved = regexp.MustCompile(crdReservedPattern)
	crdValue    = regexp.MustCompile(crdValuePattern)
)

// crdDomainPrefix is the domain labeler's key prefix, which the CRD refuses in spec.labels.
const crdDomainPrefix = "topology.pool-scheduler.io/"

// crdIdentityKeys are the pool-identity keys the CRD knows (its root rule); a set may give
// them only its own name.
var crdIdentityKeys = []string{
	"nodepool.banzaicloud.io/name", "node.banzaicloud.io/nodepool", "kubernetes.azure.com/agentpool", "agentpool",
	"cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "karpenter.sh/nodepool", "doks.digitalocean.com/node-pool",
}

// crdAccepts says whether the shipped CRD accepts the label key=value in spec.labels of the
// NodePoolLabelSet named name.
func crdAccepts(name, key, value string) bool {
	keyOK := utf8.RuneCountInString(key) <= 317 && strings.Index(key, "/") <= 253 && crdKey.MatchString(key)
	notReserved := (!crdReserved.MatchString(key) || strings.HasPrefix(key, "node-role.kubernetes.io/") || strings.HasPrefix(key, "node-restriction.kubernetes.io/")) &&
		!slices.Contains([]string{"kubernetes.azure.com/managed", "kubernetes.azure.com/resource-group", "node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}, key)
	valueOK := utf8.RuneCountInString(value) <= 63 && crdValue.MatchString(value)
	identityOK := value == name || !slices.Contains(crdIdentityKeys, key)
	notDomain := !strings.HasPrefix(key, crdDomainPrefix)
	return keyOK && notReserved && valueOK && identityOK && notDomain
}

func TestCRDRulesAreTheFuzzReference(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "crds", "labels.banzaicloud.io_nodepoollabelsets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"k.size() <= 317 && k.indexOf('/') <= 253 && k.matches('" + crdKeyPattern + "')",
		"!k.matches('" + crdReservedPattern + "')",
		"k.startsWith('node-role.kubernetes.io/') || k.startsWith('node-restriction.kubernetes.io/')",
		"self.all(k, !k.startsWith('" + crdDomainPrefix + "'))",
		"maxLength: 63\n                  pattern: " + crdValuePattern,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the CRD no longer contains %q: update crdAccepts", want)
		}
	}
	// The identity rule sits at the root, where controller-gen folds it: compare the parsed rule.
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Rules []struct {
							Rule string `json:"rule"`
						} `json:"x-kubernetes-validations"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	want := "!has(self.spec) || !has(self.spec.labels) || self.spec.labels.all(k, !(k in ['" + strings.Join(crdIdentityKeys, "', '") + "']) || self.spec.labels[k] == self.metadata.name)"
	found := false
	for _, v := range crd.Spec.Versions {
		for _, r := range v.Schema.OpenAPIV3Schema.Rules {
			found = found || r.Rule == want
		}
	}
	if !found {
		t.Errorf("the CRD has no root rule %q: update crdIdentityKeys", want)
	}
	if diff := cmp.Diff(configv1.DefaultPoolLabelKeys, crdIdentityKeys); diff != "" {
		t.Errorf("the CRD's identity keys are not the default pool label keys (-defaults +CRD):\n%s", diff)
	}
}

// labelSetsFromText reads "namespace/name" header lines, each followed by "key=value" lines,
// into NodePoolLabelSets; a repeated namespace/name is dropped (the apiserver has one object).
func labelSetsFromText(s string) []*labelsv1alpha1.NodePoolLabelSet {
	var sets []*labelsv1alpha1.NodePoolLabelSet
	seen := map[string]bool{}
	var cur *labelsv1alpha1.NodePoolLabelSet
	for _, line := range splitLines(s) {
		if k, v, isLabel := strings.Cut(line, "="); isLabel {
			if cur != nil {
				cur.Spec.Labels[k] = labelsv1alpha1.LabelValue(v)
			}
			continue
		}
		ns, name, _ := strings.Cut(line, "/")
		if seen[ns+"/"+name] {
			cur = nil
			continue
		}
		seen[ns+"/"+name] = true
		cur = &labelsv1alpha1.NodePoolLabelSet{}
		cur.Namespace, cur.Name = ns, name
		cur.Spec.Labels = map[string]labelsv1alpha1.LabelValue{}
		sets = append(sets, cur)
	}
	return sets
}

// FuzzCompileLabelSets fuzzes label-set compilation with sets of several pools and namespaces
// (duplicate sets for one pool included) and arbitrary, possibly invalid, labels: what a looser
// CRD would let in. Properties: the index does not depend on the order the informer lists the
// sets in; every desired label is one the CRD accepts (and, for the configured pool-identity key,
// the pool's own name), and every such label is desired, in conflict or reported; where sets of
// one pool disagree on a key, no value is desired and the conflict names every value and set;
// the in-sync annotation lists exactly the desired keys; a node carrying exactly the desired
// labels (one of the values of each conflicting key) and that annotation is ready.
func FuzzCompileLabelSets(f *testing.F) {
	f.Add("ns/spot\nexample.com/lifecycle=spot\nexample.com/team=data")
	f.Add("b/spot\nz.io/team=web\nz.io/extra=1\na/spot\nz.io/team=data")
	f.Add("a/spot\nbad key=1\nkubernetes.io/arch=arm64\nz.io/bad-value=not valid!\nz.io/ok=1\nnode-restriction.kubernetes.io/pool=spot")
	f.Add("a/p\nk=1\nb/p\nj=2\nc/p\nk=3\nj=4")
	f.Add("a/x\nsub.k8s.io/x=1\nnode-role.kubernetes.io/worker=\nkubernetes.io.example.com/y=1")
	f.Add("a/p\nk=" + strings.Repeat("v", 64) + "\n" + strings.Repeat("d", 254) + "/k=1")
	f.Add("a/p\nA.com/k=1\na.com/K=1\n-a/k=1")
	f.Add("a/spot\nexample.com/pool=gpu\nagentpool=spot\nnodepool.banzaicloud.io/name=other\nb/gpu\nexample.com/pool=gpu")
	f.Add("a/p\nk=1\nb/p\nk=2\nc/p\nk=1\nj=3")
	f.Add("a/p\ntopology.pool-scheduler.io/update-domain=3\ntopology.pool-scheduler.io/x=1\nx.topology.pool-scheduler.io/y=1")
	f.Fuzz(func(t *testing.T, text string) {
		sets := labelSetsFromText(text)
		id := NewIdentity([]string{fuzzPoolKey})
		got := CompileLabelSetsFor(id, sets)
		if got.Len() != len(sets) {
			t.Fatalf("Len() = %d, want %d", got.Len(), len(sets))
		}

		reversed := make([]*labelsv1alpha1.NodePoolLabelSet, len(sets))
		for i, s := range sets {
			reversed[len(sets)-1-i] = s
		}
		// (reflect first: cmp is slow, and this runs a million times.)
		if again := CompileLabelSetsFor(id, reversed); !reflect.DeepEqual(got, again) {
			opt := cmp.AllowUnexported(LabelSets{}, PoolLabels{})
			t.Fatalf("the index depends on the order of the sets (-given +reversed):\n%s", cmp.Diff(got, again, opt))
		}

		// The reference: per pool, the values each accepted key is given; one value is desired,
		// several are a conflict.
		byPool := map[string][]*labelsv1alpha1.NodePoolLabelSet{}
		for _, s := range sets {
			byPool[s.Name] = append(byPool[s.Name], s)
		}
		var wantPools []string
		for name := range byPool {
			wantPools = append(wantPools, name)
		}
		sort.Strings(wantPools)
		if gotPools := got.Pools(); len(wantPools) != len(gotPools) || (len(gotPools) > 0 && !reflect.DeepEqual(wantPools, gotPools)) {
			t.Fatalf("Pools() (-want +got):\n%s", cmp.Diff(wantPools, gotPools, cmpopts.EquateEmpty()))
		}
		for name, poolSets := range byPool {
			values := map[string]map[string][]string{}
			problems := 0
			for _, s := range poolSets {
				for k, v := range s.Spec.Labels {
					accepted := crdAccepts(name, k, string(v)) && (k != fuzzPoolKey || string(v) == name)
					if !accepted {
						problems++
						if len(ValidateLabelFor(id, name, k, string(v))) == 0 {
							t.Fatalf("ValidateLabelFor accepts %q=%q in pool %q, which the CRD or the identity rule refuses", k, v, name)
						}
						continue
					}
					if k == fuzzPoolKey || slices.Contains(crdIdentityKeys, k) {
						continue // the pool's own name on an identity key: kept, never enforced
					}
					if values[k] == nil {
						values[k] = map[string][]string{}
					}
					values[k][string(v)] = append(values[k][string(v)], s.Namespace+"/"+name)
				}
			}
			want := map[string]string{}
			wantConflicts := map[string][]string{}
			for k, byValue := range values {
				if len(byValue) == 1 {
					for v := range byValue {
						want[k] = v
					}
					continue
				}
				problems++
				for v := range byValue {
					wantConflicts[k] = append(wantConflicts[k], v)
				}
				sort.Strings(wantConflicts[k])
			}
			p := got.Pool(name)
			gotLabels := map[string]string{}
			for i, l := range p.Labels {
				if i > 0 && p.Labels[i-1].Key >= l.Key {
					t.Fatalf("pool %q: labels not sorted by key or repeated: %v", name, p.Labels)
				}
				gotLabels[l.Key] = l.Value
				if v, ok := p.Desired(l.Key); !ok || v != l.Value {
					t.Fatalf("pool %q: Desired(%q) = %q, %v; Labels say %q", name, l.Key, v, ok, l.Value)
				}
			}
			if !reflect.DeepEqual(want, gotLabels) {
				t.Fatalf("pool %q desired labels (-want +got):\n%s", name, cmp.Diff(want, gotLabels))
			}
			gotConflicts := map[string][]string{}
			for _, c := range p.Conflicts {
				gotConflicts[c.Key] = c.Values
				if _, desired := p.Desired(c.Key); desired {
					t.Fatalf("pool %q: conflicting key %q is desired", name, c.Key)
				}
				for _, v := range c.Values {
					for _, src := range values[c.Key][v] {
						if !strings.Contains(c.Message, fmt.Sprintf("%q in ", v)) || !strings.Contains(c.Message, src) {
							t.Fatalf("pool %q: conflict message %q does not name value %q of %s", name, c.Message, v, src)
						}
					}
				}
			}
			if len(wantConflicts) != len(gotConflicts) || (len(gotConflicts) > 0 && !reflect.DeepEqual(wantConflicts, gotConflicts)) {
				t.Fatalf("pool %q conflicts (-want +got):\n%s", name, cmp.Diff(wantConflicts, gotConflicts))
			}
			if len(p.Problems) != problems {
				t.Fatalf("pool %q: %d problems reported, want %d: %q", name, len(p.Problems), problems, p.Problems)
			}

			keys, err := ParseManagedLabels(p.ManagedLabelsAnnotation())
			if err != nil {
				t.Fatalf("pool %q: in-sync annotation %q does not parse: %v", name, p.ManagedLabelsAnnotation(), err)
			}
			var wantKeys []string
			for _, l := range p.Labels {
				wantKeys = append(wantKeys, l.Key)
			}
			if len(wantKeys) != len(keys) || (len(keys) > 0 && !reflect.DeepEqual(wantKeys, keys)) {
				t.Fatalf("pool %q: in-sync annotation keys (-desired +annotation):\n%s", name, cmp.Diff(wantKeys, keys))
			}

			// A node of the pool with exactly the desired labels, as the labeler leaves it, and
			// one value of each conflicting key is ready. No set can move it to another pool:
			// the identity rule refuses a pool key with another pool's name.
			if name != "" {
				nodeLabels := map[string]string{fuzzPoolKey: name}
				for k, v := range want {
					nodeLabels[k] = v
				}
				for k, vs := range wantConflicts {
					nodeLabels[k] = vs[len(vs)-1]
				}
				if pool, _ := id.PoolOf(nodeLabels); pool != name {
					t.Fatalf("pool %q: the desired labels move the node to pool %q", name, pool)
				}
				g := Gate{Identity: id, UnknownPoolPolicy: config.UnknownPoolReject}
				annotations := map[string]string{ManagedLabelsAnnotation: p.ManagedLabelsAnnotation()}
				if v := g.Check(nodeLabels, annotations, got); !v.Ready() {
					t.Fatalf("pool %q: a node with exactly the desired labels is not ready: %+v", name, v)
				}
			}
		}
	})
}

const fuzzPoolKey = "example.com/pool"
