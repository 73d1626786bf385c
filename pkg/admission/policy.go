package admission

import (
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// Match conditions shared by the policy and the webhook configuration: the apiserver skips
// pods no scheduler sees (bound), kubelet's mirror pods, pods of other schedulers, and
// DaemonSet pods, so neither the policy nor the webhook is asked about them. A DaemonSet's pods
// are node agents placed per node: handed to pool-scheduler they would gain nothing and depend
// on it being up.
func MatchConditions(schedulerName string) []admissionv1beta1.MatchCondition {
	return []admissionv1beta1.MatchCondition{
		{Name: "not-daemonset", Expression: DaemonSetPodCEL},
		{Name: "not-bound", Expression: `!has(object.spec.nodeName) || object.spec.nodeName == ""`},
		{Name: "not-mirror", Expression: `!has(object.metadata.annotations) || !(` + strconv.Quote(v1.MirrorPodAnnotationKey) + ` in object.metadata.annotations)`},
		{Name: "default-or-ours", Expression: `!has(object.spec.schedulerName) || object.spec.schedulerName in ["", ` +
			strconv.Quote(DefaultSchedulerName) + `, ` + strconv.Quote(schedulerName) + `]`},
	}
}

// DaemonSetPodCEL is true for a pod that no apps DaemonSet controls (pool.IsDaemonSetPod, in
// CEL; the two differ only on an owner apiVersion kube-apiserver's validation refuses).
const DaemonSetPodCEL = `!has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists(r, r.kind == "DaemonSet" && r.apiVersion.startsWith("apps/") && has(r.controller) && r.controller)`

// PolicyOptions name what RenderPolicy writes.
type PolicyOptions struct {
	// Name of the MutatingAdmissionPolicy (and prefix of its bindings).
	Name          string
	SchedulerName string
	// Guard is SystemPoolGuard's args (defaulted); nil: no node affinity.
	Guard *config.SystemPoolGuardArgs
	// Namespaces selects the opted-in namespaces (see NamespaceSelector).
	Namespaces *metav1.LabelSelector
	// Switch is the hand-off controller's ConfigMap (the policy's parameter): pods are handed
	// to pool-scheduler only while its data.handoff is "true", and otherwise keep the default
	// scheduler with Spread. nil: always handed over.
	Switch *types.NamespacedName
	// Spread is what a workload's pod gets while not handed over (DegradedSpread); only with
	// Switch.
	Spread []v1.TopologySpreadConstraint
}

// RenderPolicy returns the MutatingAdmissionPolicy (admissionregistration.k8s.io/v1beta1, beta
// in Kubernetes 1.34 behind the MutatingAdmissionPolicy feature gate) and its binding that do
// what Mutator does. CEL cannot AND a requirement into every existing term for several
// alternatives without list flattening (cel-go's lists.flatten is not in Kubernetes 1.34's
// compatibility environment), so a systemNodeSelector of more than one requirement is refused
// here: the webhook handles it.
func RenderPolicy(o PolicyOptions) (*admissionv1beta1.MutatingAdmissionPolicy, *admissionv1beta1.MutatingAdmissionPolicyBinding, error) {
	ignore := admissionv1beta1.Ignore
	p := &admissionv1beta1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1beta1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Spec: admissionv1beta1.MutatingAdmissionPolicySpec{
			// A CEL error must never block pod creation, as the webhook's outage does not.
			FailurePolicy: &ignore,
			// Other mutators may run after us and reset nothing we set; IfNeeded re-runs the
			// policy once when a later one changed the pod (the mutations are idempotent).
			ReinvocationPolicy: admissionv1beta1.IfNeededReinvocationPolicy,
			MatchConstraints: &admissionv1beta1.MatchResources{
				ResourceRules: []admissionv1beta1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1beta1.RuleWithOperations{
						Operations: []admissionv1beta1.OperationType{admissionv1beta1.Create},
						Rule:       admissionv1beta1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					},
				}},
			},
			MatchConditions: MatchConditions(o.SchedulerName),
			Mutations: []admissionv1beta1.Mutation{{
				PatchType: admissionv1beta1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionv1beta1.ApplyConfiguration{
					Expression: HandOverCEL(o.SchedulerName),
				},
			}},
		},
	}
	if o.Switch != nil {
		p.Spec.ParamKind = &admissionv1beta1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		p.Spec.Variables = []admissionv1beta1.Variable{{Name: "handOff", Expression: HandOffCEL}}
		p.Spec.Mutations[0].ApplyConfiguration.Expression = `variables.handOff ? ` + p.Spec.Mutations[0].ApplyConfiguration.Expression + ` : Object{}`
		if len(o.Spread) > 0 {
			p.Spec.Variables = append(p.Spec.Variables, admissionv1beta1.Variable{Name: "workloadKey", Expression: WorkloadKeyCEL()})
			p.Spec.Mutations = append(p.Spec.Mutations, admissionv1beta1.Mutation{
				PatchType: admissionv1beta1.PatchTypeJSONPatch,
				JSONPatch: &admissionv1beta1.JSONPatch{Expression: strings.ReplaceAll(SpreadPatchTemplate, SpreadPlaceholder, SpreadCEL(o.Spread))},
			})
		}
	}
	if o.Guard != nil {
		alts, err := pool.AvoidSystemNodes(o.Guard)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case len(alts) > 1:
			return nil, nil, fmt.Errorf("systemNodeSelector: the MutatingAdmissionPolicy handles a selector of at most one requirement (this one has %d); use the webhook, or switch the node affinity off", len(alts))
		case len(alts) == 1:
			p.Spec.Variables = append(p.Spec.Variables, admissionv1beta1.Variable{Name: "systemPod", Expression: systemPodCEL(o.Guard)})
			// Object types exist only in mutation expressions, not in variables, and CEL has
			// no let here (cel.bind is not in Kubernetes' environment): the list is written
			// where it is used.
			p.Spec.Mutations = append(p.Spec.Mutations, admissionv1beta1.Mutation{
				PatchType: admissionv1beta1.PatchTypeJSONPatch,
				JSONPatch: &admissionv1beta1.JSONPatch{Expression: strings.ReplaceAll(AffinityPatchTemplate(), AvoidSystemPlaceholder, RequirementsCEL(alts[0]))},
			})
		}
	}
	b := &admissionv1beta1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1beta1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Spec: admissionv1beta1.MutatingAdmissionPolicyBindingSpec{
			PolicyName:     o.Name,
			MatchResources: &admissionv1beta1.MatchResources{NamespaceSelector: o.Namespaces, ObjectSelector: ObjectSelector()},
		},
	}
	if o.Switch != nil {
		// A missing switch skips the policy (pods keep the default scheduler, unchanged): never
		// handed to a pool-scheduler nobody judged.
		allow := admissionv1beta1.AllowAction
		b.Spec.ParamRef = &admissionv1beta1.ParamRef{Name: o.Switch.Name, Namespace: o.Switch.Namespace, ParameterNotFoundAction: &allow}
	}
	return p, b, nil
}

// HandOverCEL is the policy's ApplyConfiguration that hands a pod to schedulerName: its
// schedulerName and profile.HandedOverAnnotation (Mutator.Mutate's marker) in one mutation.
// Annotations are a granular map under server-side apply's merge, so others are kept.
func HandOverCEL(schedulerName string) string {
	return `Object{metadata: Object.metadata{annotations: {` + strconv.Quote(profile.HandedOverAnnotation) + `: ` + strconv.Quote(schedulerName) +
		`}}, spec: Object.spec{schedulerName: ` + strconv.Quote(schedulerName) + `}}`
}

// HandOffCEL is true while the switch (the policy's ConfigMap parameter) says pods are handed to
// pool-scheduler.
const HandOffCEL = `has(params.data) && "handoff" in params.data && params.data["handoff"] == "true"`

// WorkloadKeyCEL is workloadKey in CEL: the label naming the pod's workload, "" for none.
func WorkloadKeyCEL() string {
	var b strings.Builder
	b.WriteString(`!has(object.metadata.labels) || !has(object.metadata.ownerReferences) ? "" :` + "\n")
	for _, w := range workloadKeys {
		fmt.Fprintf(&b, `object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller && r.apiVersion.startsWith(%s) && r.kind == %s) && %s in object.metadata.labels ? %s :`+"\n",
			strconv.Quote(w.group+"/"), strconv.Quote(w.kind), strconv.Quote(w.label), strconv.Quote(w.label))
	}
	b.WriteString(`""`)
	return b.String()
}

// SpreadPlaceholder stands for the constraints (SpreadCEL) in SpreadPatchTemplate.
const SpreadPlaceholder = "SPREAD"

// SpreadPatchTemplate gives a workload's pod that is not handed over, names no other scheduler
// and has no constraints of its own the degraded spread (Mutator.MutateDegraded's addSpread).
// A JSONPatch adding one constraint at a time: kube-apiserver 1.34 refuses an ApplyConfiguration
// that sets an atomic map or struct (a label selector: the mutation is silently skipped under
// failurePolicy Ignore), and panics on a JSONPatch value that is a list of objects.
const SpreadPatchTemplate = `!variables.handOff && variables.workloadKey != "" &&
(!has(object.spec.schedulerName) || object.spec.schedulerName in ["", "` + DefaultSchedulerName + `"]) &&
(!has(object.spec.topologySpreadConstraints) || size(object.spec.topologySpreadConstraints) == 0) ?
[JSONPatch{op: "add", path: "/spec/topologySpreadConstraints", value: []}] + SPREAD : []`

// SpreadCEL writes constraints as JSONPatch additions of typed CEL objects over the pod's
// workload label.
func SpreadCEL(spread []v1.TopologySpreadConstraint) string {
	const tsc = "Object.spec.topologySpreadConstraints"
	out := make([]string, 0, len(spread))
	for _, c := range spread {
		out = append(out, fmt.Sprintf(`JSONPatch{op: "add", path: "/spec/topologySpreadConstraints/-", value: %s{maxSkew: %d, topologyKey: %s, whenUnsatisfiable: %s, labelSelector: %s.labelSelector{matchLabels: {variables.workloadKey: object.metadata.labels[variables.workloadKey]}}}}`,
			tsc, c.MaxSkew, strconv.Quote(c.TopologyKey), strconv.Quote(string(c.WhenUnsatisfiable)), tsc))
	}
	return "[\n" + strings.Join(out, ",\n") + "\n]"
}

// ObjectSelector leaves out pods labelled profile.NamespaceLabel=false (the pod's own opt-out).
func ObjectSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: profile.NamespaceLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"false"},
	}}}
}

// NamespaceSelector selects namespaces labelled profile.NamespaceLabel=true, never those in excluded:
// kube-system (its pods are the system pool's own) and pool-scheduler's own namespace (a
// scheduler given to itself could never be scheduled again once its replicas are gone).
func NamespaceSelector(excluded []string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{profile.NamespaceLabel: "true"}}
	if len(excluded) > 0 {
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{
			Key: v1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: sets.List(sets.New(excluded...)),
		}}
	}
	return s
}

// systemPodCEL is pool.SystemPolicy.IsSystemPod in CEL.
func systemPodCEL(g *config.SystemPoolGuardArgs) string {
	terms := []string{
		`request.namespace in ` + celList(g.SystemNamespaces),
		`(has(object.spec.priorityClassName) && object.spec.priorityClassName in ` + celList(g.SystemPriorityClasses) + `)`,
		`(has(object.spec.tolerations) && object.spec.tolerations.exists(t, has(t.key) && t.key in ` + celList(g.SystemTolerationKeys) + `))`,
	}
	if g.DaemonSetPodsAreSystemPods {
		terms = append(terms, `(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller && r.kind == "DaemonSet" && r.apiVersion.startsWith("apps/")))`)
	}
	return strings.Join(terms, " ||\n")
}

// AvoidSystemPlaceholder stands for the requirements (RequirementsCEL) in AffinityPatchTemplate.
const AvoidSystemPlaceholder = "AVOID_SYSTEM"

// AffinityPatchTemplate is the policy's JSONPatch expression with AvoidSystemPlaceholder where
// the requirements go. The Helm chart renders its policy from a generated copy
// (files/affinity-patch.cel, make generate), so the CEL is written once, here.
func AffinityPatchTemplate() string {
	return strings.ReplaceAll(affinityPatchCEL, "EXPRESSIONS", termExpressionsCEL)
}

// RequirementsCEL writes node-selector requirements as typed CEL objects (Kubernetes' CEL
// refuses map literals with values of different types).
func RequirementsCEL(reqs []v1.NodeSelectorRequirement) string {
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, requiredCEL+".nodeSelectorTerms.matchExpressions{key: "+strconv.Quote(r.Key)+
			", operator: "+strconv.Quote(string(r.Operator))+", values: "+celList(r.Values)+"}")
	}
	return "[\n" + strings.Join(out, ",\n") + "\n]"
}

func celList(items []string) string {
	quoted := make([]string, 0, len(items))
	for _, s := range sets.List(sets.New(items...)) {
		quoted = append(quoted, strconv.Quote(s))
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// affinityPatchCEL ANDs the requirements (AVOID_SYSTEM) into the pod's required node affinity, as
// addRequired does for one alternative: the whole structure where the pod has none, else the
// requirements appended to every non-empty term that does not hold them yet. Each such term is
// replaced whole, rebuilt as a typed object: kube-apiserver 1.34 panics converting a JSONPatch
// value that is a list of objects (reflect.Set: *structpb.Struct is not assignable to
// *structpb.Value), which failurePolicy Ignore would turn into a silently skipped pod.
const requiredCEL = "Object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"

// termExpressionsCEL is a term's requirements, rebuilt as typed objects, and ours.
const termExpressionsCEL = `(has(t.matchExpressions) ? t.matchExpressions.map(e, has(e.values) ?
        ` + requiredCEL + `.nodeSelectorTerms.matchExpressions{key: e.key, operator: e.operator, values: e.values} :
        ` + requiredCEL + `.nodeSelectorTerms.matchExpressions{key: e.key, operator: e.operator}) : []) + AVOID_SYSTEM`

const affinityPatchCEL = `variables.systemPod ? [] :
!has(object.spec.affinity) ?
  [JSONPatch{op: "add", path: "/spec/affinity", value: Object.spec.affinity{nodeAffinity: Object.spec.affinity.nodeAffinity{requiredDuringSchedulingIgnoredDuringExecution: ` + requiredCEL + `{nodeSelectorTerms: [` + requiredCEL + `.nodeSelectorTerms{matchExpressions: AVOID_SYSTEM}]}}}}] :
!has(object.spec.affinity.nodeAffinity) ?
  [JSONPatch{op: "add", path: "/spec/affinity/nodeAffinity", value: Object.spec.affinity.nodeAffinity{requiredDuringSchedulingIgnoredDuringExecution: ` + requiredCEL + `{nodeSelectorTerms: [` + requiredCEL + `.nodeSelectorTerms{matchExpressions: AVOID_SYSTEM}]}}}] :
!has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) ||
!has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms) ||
size(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms) == 0 ?
  [JSONPatch{op: "add", path: "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution", value: ` + requiredCEL + `{nodeSelectorTerms: [` + requiredCEL + `.nodeSelectorTerms{matchExpressions: AVOID_SYSTEM}]}}] :
object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.transformList(i, t,
  ((has(t.matchExpressions) && size(t.matchExpressions) > 0) || (has(t.matchFields) && size(t.matchFields) > 0)) &&
  !(has(t.matchExpressions) && AVOID_SYSTEM.all(r, t.matchExpressions.exists(e, e.key == r.key && e.operator == r.operator && (has(e.values) ? e.values : []) == r.values))),
  JSONPatch{
    op: "replace",
    path: "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/" + string(i),
    value: has(t.matchFields) ?
      ` + requiredCEL + `.nodeSelectorTerms{matchExpressions: EXPRESSIONS, matchFields: t.matchFields.map(e,
        ` + requiredCEL + `.nodeSelectorTerms.matchFields{key: e.key, operator: e.operator, values: e.values})} :
      ` + requiredCEL + `.nodeSelectorTerms{matchExpressions: EXPRESSIONS}
  })`

// WebhookPath is where the webhook serves pod mutations.
const WebhookPath = "/mutate-pods"

// WebhookName is the webhook's name in its MutatingWebhookConfiguration.
const WebhookName = "pods.pool-scheduler.io"

// AKSEnforcerOptOut is the annotation by which AKS's admissions enforcer leaves a webhook
// configuration alone. Without it the enforcer rewrites every webhook's namespaceSelector (adding
// control-plane NotIn [true] and kubernetes.azure.com/managedby NotIn [aks]) and, as the field's
// writer, shows as drift to GitOps tools and as a conflict to server-side apply. The webhook's own
// namespaceSelector already keeps kube-system and pool-scheduler's namespace out, and every other
// namespace is only opted in by name or label. Inert on other clusters. See docs/azure.md.
const AKSEnforcerOptOut = "admissions.enforcer/disabled"

// RenderWebhookConfiguration returns the MutatingWebhookConfiguration that sends pod creations
// of the namespaces selected by namespaces to the webhook at clientConfig. Its caBundle is
// left empty: the webhook's certificate rotation (or cert-manager's CA injector) fills it.
func RenderWebhookConfiguration(name, schedulerName string, clientConfig admissionv1.WebhookClientConfig, namespaces *metav1.LabelSelector) *admissionv1.MutatingWebhookConfiguration {
	ignore := admissionv1.Ignore
	none := admissionv1.SideEffectClassNone
	ifNeeded := admissionv1.IfNeededReinvocationPolicy
	equivalent := admissionv1.Equivalent
	var conditions []admissionv1.MatchCondition
	for _, c := range MatchConditions(schedulerName) {
		conditions = append(conditions, admissionv1.MatchCondition{Name: c.Name, Expression: c.Expression})
	}
	return &admissionv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AKSEnforcerOptOut: "true"}},
		Webhooks: []admissionv1.MutatingWebhook{{
			Name:         WebhookName,
			ClientConfig: clientConfig,
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			// An outage must never block pod creation: the pod is then created as it came,
			// counted in apiserver_admission_webhook_fail_open_count and reported by poolctl audit.
			FailurePolicy:           &ignore,
			MatchPolicy:             &equivalent,
			NamespaceSelector:       namespaces,
			ObjectSelector:          ObjectSelector(),
			MatchConditions:         conditions,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      &ifNeeded,
			// Pod creation waits for the webhook; a slow one fails open quickly.
			TimeoutSeconds: ptr.To[int32](5),
		}},
	}
}
