// Package webhook serves pool-scheduler's admission path as a mutating admission webhook
// (pool-labeler webhook): admission.Mutator behind controller-runtime's webhook server. It keeps
// no certificate of its own: it serves the one in --cert-dir, which the certificate keeper
// (pkg/certkeeper, pool-labeler certs --webhook-dns-name) or cert-manager writes and renews.
package webhook

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"gomodules.xyz/jsonpatch/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	admissionpkg "github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

var (
	webhookRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_scheduler_webhook_requests_total",
		Help: "Pod admission requests the webhook answered, by result (mutated, unchanged, error). Errors let the pod through unchanged.",
	}, []string{"result"})
	webhookMutations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_scheduler_webhook_mutations_total",
		Help: "Changes the webhook made to new pods, by field (schedulerName, nodeAffinity).",
	}, []string{"field"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(webhookRequests, webhookMutations)
}

// serveMutations registers the Handler at admission.WebhookPath.
func serveMutations(server webhook.Server, m *admissionpkg.Mutator, scheme *runtime.Scheme, judge *handoff.Judge) {
	server.Register(admissionpkg.WebhookPath, &webhook.Admission{Handler: &Handler{Mutator: m, Decoder: admission.NewDecoder(scheme), Handoff: judge}})
}

// Handler is the mutating webhook: it applies admission.Mutator to pods being created.
type Handler struct {
	Mutator *admissionpkg.Mutator
	Decoder admission.Decoder
	// Handoff says whether pods are handed to pool-scheduler (Mutate), or keep the default
	// scheduler (MutateDegraded). nil: always handed over.
	Handoff *handoff.Judge
}

var _ admission.Handler = &Handler{}

// Handle answers one admission request. A request it cannot read is allowed unchanged (and
// counted): the webhook never blocks pod creation, as its failurePolicy Ignore does not.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	logger := klog.FromContext(ctx).WithValues("namespace", req.Namespace, "name", req.Name, "uid", req.UID)
	pod := &v1.Pod{}
	if err := h.Decoder.Decode(req, pod); err != nil {
		webhookRequests.WithLabelValues("error").Inc()
		logger.Error(err, "Cannot decode the pod; allowing it unchanged")
		return admission.Allowed("pool-scheduler: undecodable pod left unchanged")
	}
	// IsSystemPod judges the namespace, which a create may leave to the URL.
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	hadAffinity, hadNodeAffinity := pod.Spec.Affinity != nil, pod.Spec.Affinity != nil && pod.Spec.Affinity.NodeAffinity != nil
	// An empty map counts as none: kube-apiserver applies the patch to its own encoding of the
	// pod, which omits empty annotations, so a path into them would not apply.
	hadAnnotations := len(pod.Annotations) > 0
	var res admissionpkg.Result
	handOver := true
	if h.Handoff != nil {
		handOver, _ = h.Handoff.Evaluate(ctx)
	}
	if handOver {
		res = h.Mutator.Mutate(pod)
	} else {
		res = h.Mutator.MutateDegraded(pod)
	}
	if !res.Changed() {
		webhookRequests.WithLabelValues("unchanged").Inc()
		return admission.Allowed("")
	}
	webhookRequests.WithLabelValues("mutated").Inc()
	if res.SchedulerName {
		webhookMutations.WithLabelValues("schedulerName").Inc()
	}
	if res.NodeAffinity {
		webhookMutations.WithLabelValues("nodeAffinity").Inc()
	}
	if res.TopologySpread {
		webhookMutations.WithLabelValues("topologySpreadConstraints").Inc()
	}
	logger.V(4).Info("Mutated pod", "schedulerName", res.SchedulerName, "nodeAffinity", res.NodeAffinity, "topologySpread", res.TopologySpread)
	return admission.Patched("", patchOps(pod, res, hadAnnotations, hadAffinity, hadNodeAffinity)...)
}

// patchOps writes exactly the fields Mutate changed. A diff of the whole re-encoded pod would
// remove every field this build's API types do not know (a newer kube-apiserver's, within the
// version-skew policy): "add" sets a member whether or not it exists (RFC 6902).
func patchOps(pod *v1.Pod, res admissionpkg.Result, hadAnnotations, hadAffinity, hadNodeAffinity bool) []jsonpatch.JsonPatchOperation {
	var ops []jsonpatch.JsonPatchOperation
	if res.SchedulerName {
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/schedulerName", pod.Spec.SchedulerName))
		// The marker goes with the name, in the same patch: no write of its own.
		marker := pod.Annotations[profile.HandedOverAnnotation]
		if hadAnnotations {
			ops = append(ops, jsonpatch.NewOperation("add", "/metadata/annotations/"+jsonPointerEscape(profile.HandedOverAnnotation), marker))
		} else {
			ops = append(ops, jsonpatch.NewOperation("add", "/metadata/annotations", map[string]string{profile.HandedOverAnnotation: marker}))
		}
	}
	if res.NodeAffinity {
		required := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		switch {
		case !hadAffinity:
			ops = append(ops, jsonpatch.NewOperation("add", "/spec/affinity",
				map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": required}}))
		case !hadNodeAffinity:
			ops = append(ops, jsonpatch.NewOperation("add", "/spec/affinity/nodeAffinity",
				map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": required}))
		default:
			ops = append(ops, jsonpatch.NewOperation("add", "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution", required))
		}
	}
	if res.TopologySpread {
		// Added only to a pod that had none.
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/topologySpreadConstraints", pod.Spec.TopologySpreadConstraints))
	}
	return ops
}

// jsonPointerEscape escapes a map key for a JSON Pointer (RFC 6901): "~" as "~0", "/" as "~1".
func jsonPointerEscape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
