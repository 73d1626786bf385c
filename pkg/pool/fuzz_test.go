package pool

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

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

		// The gate with no NodePoolLabelSets: its verdict follows from PoolOf and the annotation.
		annotations := map[string]string{ManagedLabelsAnnotation: annotation}
		for _, policy := range []config.UnknownPoolPolicy{config.UnknownPoolAuto, config.UnknownPoolReject, config.UnknownPoolAllow} {
			g := Gate{Identity: id, UnknownPoolPolicy: policy}
			v := g.Check(labels, annotations, nil)
			if v.Pool != wantName && v.Cause != UnknownPool {
				t.Fatalf("%s: verdict names pool %q, PoolOf says %q", policy, v.Pool, wantName)
			}
			managed, wellFormed := refManagedLabels(annotation)
			stale := ""
			for _, k := range managed {
				if _, present := labels[k]; present {
					stale = k
					break
				}
			}
			want := Ready
			switch {
			case !ok && policy == config.UnknownPoolReject:
				want = UnknownPool
			case !wellFormed:
				want = MalformedAnnotation
			case stale != "":
				want = StaleLabel
			}
			if v.Cause != want {
				t.Fatalf("%s: Check(labels %q, annotation %q) = %v (%s), want %v", policy, labels, annotation, v.Cause, v.Key, want)
			}
			if want == StaleLabel && v.Key != stale {
				t.Fatalf("%s: stale key %q reported, want the first listed, %q", policy, v.Key, stale)
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

// crdAccepts says whether the shipped CRD accepts the label key=value in spec.labels.
func crdAccepts(key, value string) bool {
	keyOK := utf8.RuneCountInString(key) <= 317 && strings.Index(key, "/") <= 253 && crdKey.MatchString(key)
	notReserved := !crdReserved.MatchString(key) || strings.HasPrefix(key, "node-role.kubernetes.io/") || strings.HasPrefix(key, "node-restriction.kubernetes.io/")
	valueOK := utf8.RuneCountInString(value) <= 63 && crdValue.MatchString(value)
	return keyOK && notReserved && valueOK
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
		"maxLength: 63\n                  pattern: " + crdValuePattern,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the CRD no longer contains %q: update crdAccepts", want)
		}
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
// sets in; every desired label is one the CRD accepts, and every label the CRD accepts is desired
// or reported; where sets of one pool disagree, the alphabetically first namespace wins and the
// problem names it; the in-sync annotation lists exactly the desired keys; a node carrying exactly
// the desired labels and that annotation is ready.
func FuzzCompileLabelSets(f *testing.F) {
	f.Add("ns/spot\nexample.com/lifecycle=spot\nexample.com/team=data")
	f.Add("b/spot\nz.io/team=web\nz.io/extra=1\na/spot\nz.io/team=data")
	f.Add("a/spot\nbad key=1\nkubernetes.io/arch=arm64\nz.io/bad-value=not valid!\nz.io/ok=1\nnode-restriction.kubernetes.io/pool=spot")
	f.Add("a/p\nk=1\nb/p\nj=2\nc/p\nk=3\nj=4")
	f.Add("a/x\nsub.k8s.io/x=1\nnode-role.kubernetes.io/worker=\nkubernetes.io.example.com/y=1")
	f.Add("a/p\nk=" + strings.Repeat("v", 64) + "\n" + strings.Repeat("d", 254) + "/k=1")
	f.Add("a/p\nA.com/k=1\na.com/K=1\n-a/k=1")
	f.Fuzz(func(t *testing.T, text string) {
		sets := labelSetsFromText(text)
		got := CompileLabelSets(sets)
		if got.Len() != len(sets) {
			t.Fatalf("Len() = %d, want %d", got.Len(), len(sets))
		}

		reversed := make([]*labelsv1alpha1.NodePoolLabelSet, len(sets))
		for i, s := range sets {
			reversed[len(sets)-1-i] = s
		}
		// (reflect first: cmp is slow, and this runs a million times.)
		if again := CompileLabelSets(reversed); !reflect.DeepEqual(got, again) {
			opt := cmp.AllowUnexported(LabelSets{}, PoolLabels{})
			t.Fatalf("the index depends on the order of the sets (-given +reversed):\n%s", cmp.Diff(got, again, opt))
		}

		// The reference: per pool, namespaces in order; the first valid value of a key wins.
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
			sort.Slice(poolSets, func(i, j int) bool { return poolSets[i].Namespace < poolSets[j].Namespace })
			want := map[string]string{}
			winner := map[string]string{}
			problems := 0
			for _, s := range poolSets {
				for k, v := range s.Spec.Labels {
					switch prev, seen := want[k]; {
					case !crdAccepts(k, string(v)):
						problems++
						if len(ValidateLabel(k, string(v))) == 0 {
							t.Fatalf("ValidateLabel accepts %q=%q, which the CRD refuses", k, v)
						}
					case !seen:
						want[k], winner[k] = string(v), s.Namespace
					case prev != string(v):
						problems++
					}
				}
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
			if len(p.Problems) != problems {
				t.Fatalf("pool %q: %d problems reported, want %d: %q", name, len(p.Problems), problems, p.Problems)
			}
			for _, msg := range p.Problems {
				if !strings.Contains(msg, "conflicts with") {
					continue
				}
				// "<source>: label "k"="v" conflicts with "w" from <winning source>, which wins"
				named := false
				for k, ns := range winner {
					named = named || (strings.Contains(msg, fmt.Sprintf(": label %q=", k)) &&
						strings.HasSuffix(msg, fmt.Sprintf(" from %s/%s, which wins", ns, name)))
				}
				if !named {
					t.Fatalf("pool %q: problem %q does not name the set whose value wins (winners %v)", name, msg, winner)
				}
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

			// A node of the pool with exactly the desired labels, as the labeler leaves it, is
			// ready. (Skipped when the set itself wants the pool key, which moves the node.)
			if _, movesNode := want[fuzzPoolKey]; name != "" && !movesNode {
				nodeLabels := map[string]string{fuzzPoolKey: name}
				for k, v := range want {
					nodeLabels[k] = v
				}
				g := Gate{Identity: NewIdentity([]string{fuzzPoolKey}), UnknownPoolPolicy: config.UnknownPoolReject}
				annotations := map[string]string{ManagedLabelsAnnotation: p.ManagedLabelsAnnotation()}
				if v := g.Check(nodeLabels, annotations, got); !v.Ready() {
					t.Fatalf("pool %q: a node with exactly the desired labels is not ready: %+v", name, v)
				}
			}
		}
	})
}

const fuzzPoolKey = "example.com/pool"
