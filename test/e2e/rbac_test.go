package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/domainlabeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// forbidden matches what the binaries log when the apiserver refuses a request.
// An admission policy's refusal reads "... denied request: ...".
var forbidden = regexp.MustCompile(`(?i)forbidden|cannot (get|list|watch|create|update|patch|delete) resource|denied request`)

// TestLeastPrivilege starts kube-apiserver with the Node and RBAC authorizers (the RBAC
// bootstrap policy provides system:kube-scheduler and system:volume-scheduler), applies exactly
// the Namespaces, ServiceAccounts, RBAC objects and admission policy of the kustomizations in
// manifests/scheduler and manifests/labeler, and runs bin/pool-scheduler (shipped config, leader
// election, delegated authentication/authorization for its HTTPS endpoint as in a pod),
// bin/pool-labeler in controller mode and in domain mode, each with a TokenRequest token of its
// ServiceAccount (the domain labeler's bound to a pod on its node, as a projected token is).
// Leader election, labelling, scheduling and events work with no request refused; writes
// outside each role are refused, and the admission policy keeps the domain labeler to its own
// node and its own labels, and the labeler controller to the labels it manages. The webhook's
// and the certificate keeper's ServiceAccounts, RBAC and policy (manifests/admission/webhook) are
// added at the end: the keeper may change the webhook configuration's caBundle and nothing else.
func TestLeastPrivilege(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t, "--authorization-mode=Node,RBAC")
	admin := cp.Client
	objs := append(util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "scheduler")),
		util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "labeler"))...)
	applied := util.ApplyAccessObjects(tCtx, t, cp, objs)
	t.Logf("applied from manifests/: %v", applied)

	const ns = "pool-scheduler"
	schedCfg, schedKubeconfig := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-scheduler", nil)
	labelerCfg, labelerKubeconfig := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-labeler", nil)
	sched, labelerClient := clientFor(t, schedCfg), clientFor(t, labelerCfg)

	// What each identity needs, granted by the manifests (and the bootstrap roles they bind).
	// Waiting for these also makes sure the authorizer has seen the new bindings before the
	// binaries start.
	waitAllowed(tCtx, t, sched, "pool-scheduler", []authorizationv1.ResourceAttributes{
		{Verb: "watch", Resource: "pods"},
		{Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "default"},
		{Verb: "list", Group: "labels.banzaicloud.io", Resource: "nodepoollabelsets"},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: "pool-scheduler"},
		{Verb: "create", Group: "events.k8s.io", Resource: "events", Namespace: "default"},
		{Verb: "get", Resource: "configmaps", Namespace: "kube-system", Name: "extension-apiserver-authentication"},
		{Verb: "update", Resource: "persistentvolumes"},
		{Verb: "update", Resource: "persistentvolumeclaims", Namespace: "default"},
	})
	waitAllowed(tCtx, t, labelerClient, "pool-labeler", []authorizationv1.ResourceAttributes{
		{Verb: "patch", Resource: "nodes"},
		{Verb: "watch", Group: "labels.banzaicloud.io", Resource: "nodepoollabelsets"},
		{Verb: "patch", Group: "labels.banzaicloud.io", Resource: "nodepoollabelsets", Subresource: "status", Namespace: ns},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: "pool-labeler"},
		{Verb: "create", Resource: "events", Namespace: "default"},
	})

	want := map[string]string{"example.com/tier": "gold"}
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, "spot", want))
	for i := 0; i < 3; i++ {
		// Zone and region labels: from Kubernetes 1.35 the API server adds them to each binding
		// (PodTopologyLabelsAdmission) before the scheduler's pod-writes policy reads it.
		util.CreateNode(tCtx, t, admin, util.Node(fmt.Sprintf("spot-%d", i), map[string]string{poolKey: "spot",
			v1.LabelTopologyZone: fmt.Sprintf("westeurope-%d", i+1), v1.LabelTopologyRegion: "westeurope"}).Obj())
	}

	// /metrics as shipped (HTTPS, every scrape checked by the apiserver), with a certificate of
	// the test's, so the scrapes below verify it.
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", util.FreePort(t))
	metricsCertDir, metricsCA := servingCert(t)
	// Both run the shipped configuration as installed: NodePoolLabelSets of the release namespace.
	shippedConfig, err := os.ReadFile(util.ShippedConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	schedConfigPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(schedConfigPath, shippedConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	labelerProc := util.StartProcess(t, util.LabelerBinary(t), "controller", "--kubeconfig="+labelerKubeconfig,
		"--scheduler-config="+schedConfigPath, "--leader-elect-namespace="+ns, "--metrics-bind-address="+metricsAddr, "--metrics-cert-dir="+metricsCertDir,
		"--health-probe-bind-address=0", "-v=2")
	doc := util.ShippedConfigFor(t, cp)
	util.PluginArgsDoc(t, doc, "NodePoolReady")["labelSetNamespaces"] = []any{ns}
	doc["clientConnection"].(map[string]any)["kubeconfig"] = schedKubeconfig
	// In a pod, kube-scheduler uses its in-cluster credentials for delegated authentication and
	// authorization of /metrics; outside a pod it needs them named.
	schedProc := util.StartSchedulerBinary(t, doc, "--authentication-kubeconfig="+schedKubeconfig, "--authorization-kubeconfig="+schedKubeconfig)

	util.WaitForLeaseHolder(tCtx, t, admin, ns, "pool-scheduler", "", 60*time.Second)
	util.WaitForLeaseHolder(tCtx, t, admin, ns, "pool-labeler", "", 60*time.Second)

	checkMetricsAuth(tCtx, t, cp, "https://"+metricsAddr+"/metrics", metricsCA)
	util.RequireNoHTTP2(t, metricsAddr)

	user := util.CreateNamespace(tCtx, t, admin, "rbac")
	for i := 0; i < 6; i++ {
		util.CreatePod(tCtx, t, admin, util.Pod(user, fmt.Sprintf("p-%d", i)).Obj())
	}
	list := util.WaitAllBound(tCtx, t, admin, user, 6, 60*time.Second)
	for _, p := range list {
		node, err := admin.CoreV1().Nodes().Get(tCtx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasAll(node.Labels, want) {
			t.Errorf("pod %s on %s, which lacks the pool's labels: %v", p.Name, node.Name, node.Labels)
		}
	}
	// Events: the scheduler's Scheduled events (events.k8s.io).
	err = wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := admin.EventsV1().Events(user).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		n := 0
		for _, e := range events.Items {
			if e.Reason == "Scheduled" {
				n++
			}
		}
		return n == 6, nil
	})
	if err != nil {
		t.Errorf("the scheduler's Scheduled events did not all arrive: %v", err)
	}

	// VolumeBinding under the scheduler's own role and admission policy: it binds a free local
	// PersistentVolume to a WaitForFirstConsumer claim (claimRef) and marks a claim to provision
	// with its node (selected-node). No PV controller runs, so the pods stay in PreBind.
	waitVolumeBinding(tCtx, t, admin, user)

	// Bindings under pool-scheduler-pod-writes: a ReplicaSet's replicas still bind with the
	// deletion cost DomainSpread chose (the annotation the policy allows).
	waitBoundWithCost(tCtx, t, cp, user)
	// Its other status writes pass too: PodScheduled False and the nominated node on a
	// preemptor, DisruptionTarget on its victim.
	waitPreemption(tCtx, t, admin, user)
	// A pod no scheduler here binds, for the refused bindings below.
	held := util.CreatePod(tCtx, t, admin, util.Pod(user, "held").SchedulerName("another-scheduler").Obj())
	bindHeld := func(annotations, labels map[string]string) func(context.Context) error {
		return func(ctx context.Context) error {
			return sched.CoreV1().Pods(user).Bind(ctx, &v1.Binding{
				ObjectMeta: metav1.ObjectMeta{Namespace: user, Name: held.Name, UID: held.UID, Annotations: annotations, Labels: labels},
				Target:     v1.ObjectReference{Kind: "Node", Name: "spot-0"},
			}, metav1.CreateOptions{})
		}
	}
	podStatusPatch := func(body string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := sched.CoreV1().Pods(user).Patch(ctx, "p-0", types.MergePatchType, []byte(body), metav1.PatchOptions{}, "status")
			return err
		}
	}

	// Domain mode: a DaemonSet pod's token is bound to the pod, which names its node.
	util.CreateNode(tCtx, t, admin, util.Node("az-0", nil).Obj())
	util.CreateNode(tCtx, t, admin, util.Node("az-1", nil).Obj())
	domainPod := util.CreatePod(tCtx, t, admin, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-labeler-domain-az-0"},
		Spec: v1.PodSpec{
			ServiceAccountName: "pool-labeler-domain",
			NodeName:           "az-0",
			Containers:         []v1.Container{{Name: "domain", Image: "ghcr.io/pool-scheduler/pool-scheduler:v0.1.0"}},
		},
	})
	domainCfg, domainKubeconfig := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-labeler-domain", domainPod)
	domain := clientFor(t, domainCfg)
	waitAllowed(tCtx, t, domain, "pool-labeler-domain", []authorizationv1.ResourceAttributes{{Verb: "patch", Resource: "nodes"}})
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"location":"westeurope","name":"aks-nodepool1-0","platformFaultDomain":"1","platformUpdateDomain":"3","vmSize":"Standard_D2s_v3"}`)
	}))
	t.Cleanup(imds.Close)
	domainProc := util.StartProcess(t, util.LabelerBinary(t), "domain", "--kubeconfig="+domainKubeconfig,
		"--node-name=az-0", "--imds-endpoint="+imds.URL, "--on-not-azure=fail", "--attempts=2", "-v=2")
	err = wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := admin.CoreV1().Nodes().Get(ctx, "az-0", metav1.GetOptions{})
		return err == nil && n.Labels[configv1.UpdateDomainLabelKey] == "3" && n.Labels[configv1.FaultDomainLabelKey] == "1", nil
	})
	if err != nil {
		t.Fatalf("domain labeler did not label its node az-0: %s", domainProc.Output())
	}
	ownEvent := checkDomainLabelerEvents(tCtx, t, admin, domain)

	// Refused writes.
	labelPatch := []byte(`{"metadata":{"labels":{"example.com/owned":"yes"}}}`)
	finalizerPatch := []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`)
	ownerPatch := []byte(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"` + user + `","uid":"6f0b5a8e-2f1d-4c51-9e0a-0d7c8f1b2a3c"}]}}`)
	refusals := []struct {
		name    string
		do      func(context.Context) error
		want    func(error) bool
		message string
	}{
		{"scheduler patches a pod's labels", func(ctx context.Context) error {
			_, err := sched.CoreV1().Pods(user).Patch(ctx, "p-0", types.MergePatchType, labelPatch, metav1.PatchOptions{})
			return err
		}, apierrors.IsForbidden, ""},
		{"scheduler deletes a node", func(ctx context.Context) error {
			return sched.CoreV1().Nodes().Delete(ctx, "spot-0", metav1.DeleteOptions{})
		}, apierrors.IsForbidden, ""},
		{"scheduler patches a NodePoolLabelSet", func(ctx context.Context) error {
			_, err := dynamicFor(t, schedCfg).Resource(labelsv1alpha1.Resource).Namespace(ns).Patch(ctx, "spot", types.MergePatchType, []byte(`{"spec":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
			return err
		}, apierrors.IsForbidden, ""},
		{"scheduler updates the default scheduler's Lease", func(ctx context.Context) error {
			l, err := admin.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler"}}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("admin creating the Lease: %w", err)
			}
			l.Spec.HolderIdentity = ptr.To("pool-scheduler")
			_, err = sched.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
			return err
		}, apierrors.IsForbidden, ""},
		{"scheduler creates a Lease outside its namespace", func(ctx context.Context) error {
			_, err := sched.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}}, metav1.CreateOptions{})
			return err
		}, apierrors.IsForbidden, ""},
		// DRA extended resources' claims: the 1.36 line's overlay grants them, as upstream
		// does from 1.36; the base role (applied here) does not.
		{"scheduler creates a ResourceClaim", func(ctx context.Context) error {
			_, err := sched.ResourceV1().ResourceClaims(user).Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "stolen"}}, metav1.CreateOptions{})
			return err
		}, apierrors.IsForbidden, ""},
		{"scheduler deletes a ResourceClaim", func(ctx context.Context) error {
			return sched.ResourceV1().ResourceClaims(user).Delete(ctx, "data", metav1.DeleteOptions{})
		}, apierrors.IsForbidden, ""},
		{"scheduler patches a PersistentVolume", func(ctx context.Context) error {
			_, err := sched.CoreV1().PersistentVolumes().Patch(ctx, "local-pv", types.MergePatchType, []byte(`{"spec":{"persistentVolumeReclaimPolicy":"Delete"}}`), metav1.PatchOptions{})
			return err
		}, apierrors.IsForbidden, ""},
		{"scheduler changes a PersistentVolume's reclaim policy", updatePV(sched, "local-pv", func(pv *v1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimDelete
		}), anyError, "pool-scheduler may only bind a PersistentVolume (set its claimRef), not change the rest of its spec"},
		{"scheduler re-binds a bound PersistentVolume to another claim", updatePV(sched, "local-pv", func(pv *v1.PersistentVolume) {
			pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: "stolen"}
		}), anyError, "pool-scheduler may only bind a free PersistentVolume or one pre-bound to the claim"},
		{"scheduler labels a PersistentVolume", updatePV(sched, "local-pv", func(pv *v1.PersistentVolume) {
			pv.Labels = map[string]string{"example.com/owned": "yes"}
		}), anyError, "pool-scheduler may not change labels, finalizers or ownerReferences of volumes and claims"},
		{"scheduler annotates a claim", func(ctx context.Context) error {
			pvc, err := sched.CoreV1().PersistentVolumeClaims(user).Get(ctx, "data", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get: %w", err)
			}
			metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, "example.com/note", "x")
			_, err = sched.CoreV1().PersistentVolumeClaims(user).Update(ctx, pvc, metav1.UpdateOptions{})
			return err
		}, anyError, "pool-scheduler may change no annotation but volume.kubernetes.io/selected-node"},
		// What the API server copies from a Binding onto the pod, and pod metadata through
		// pods/status: pool-scheduler-pod-writes.
		{"scheduler binds a pod with another annotation", bindHeld(map[string]string{"example.com/note": "x"}, nil),
			anyError, "pool-scheduler may bind with no annotation but " + spread.DeletionCostAnnotation},
		{"scheduler binds a pod with a deletion cost that is not an integer", bindHeld(map[string]string{spread.DeletionCostAnnotation: "high"}, nil),
			anyError, "pool-scheduler's pod-deletion-cost must be a 32-bit integer"},
		{"scheduler binds a pod with a label", bindHeld(nil, map[string]string{"app": "stolen"}),
			anyError, "pool-scheduler may bind with no label but the node's topology labels"},
		{"scheduler binds a pod with a deletion cost beyond 32 bits", bindHeld(map[string]string{spread.DeletionCostAnnotation: "9999999999"}, nil),
			anyError, "pool-scheduler's pod-deletion-cost must be a 32-bit integer"},
		{"scheduler binds a pod with a topology label to a target of no kind", func(ctx context.Context) error {
			return sched.CoreV1().Pods(user).Bind(ctx, &v1.Binding{
				ObjectMeta: metav1.ObjectMeta{Namespace: user, Name: held.Name, UID: held.UID, Labels: map[string]string{v1.LabelTopologyZone: "forged-zone"}},
				Target:     v1.ObjectReference{Name: "spot-0"},
			}, metav1.CreateOptions{})
		}, anyError, "pool-scheduler may bind with labels only to a target of kind Node"},
		{"scheduler binds a pod through the legacy bindings resource", func(ctx context.Context) error {
			return sched.CoreV1().RESTClient().Post().Namespace(user).Resource("bindings").Body(&v1.Binding{
				ObjectMeta: metav1.ObjectMeta{Namespace: user, Name: held.Name, UID: held.UID,
					Labels: map[string]string{v1.LabelTopologyZone: "forged-zone"}},
				Target: v1.ObjectReference{Kind: "Node", Name: "spot-0"},
			}).Do(ctx).Error()
		}, apierrors.IsForbidden, ""},
		{"scheduler relabels a pod through its status", podStatusPatch(`{"metadata":{"labels":{"example.com/owned":"yes"}}}`),
			anyError, "pool-scheduler may not change a pod's labels, annotations or finalizers through its status"},
		{"scheduler annotates a pod through its status", podStatusPatch(`{"metadata":{"annotations":{"example.com/note":"x"}}}`),
			anyError, "pool-scheduler may not change a pod's labels, annotations or finalizers through its status"},
		{"scheduler marks a pod Failed", podStatusPatch(`{"status":{"phase":"Failed"}}`),
			anyError, "pool-scheduler may not change a pod's phase"},
		// The kubelet's conditions: a forged Ready puts a pod behind a Service.
		{"scheduler marks a pod Ready through its status", func(ctx context.Context) error {
			_, err := sched.CoreV1().Pods(user).Patch(ctx, "p-0", types.StrategicMergePatchType,
				[]byte(`{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"ContainersReady","status":"True"}]}}`), metav1.PatchOptions{}, "status")
			return err
		}, anyError, "pool-scheduler may not change a pod's conditions but PodScheduled and DisruptionTarget"},
		{"scheduler rewrites a pod's IP", podStatusPatch(`{"status":{"podIP":"10.0.0.66","podIPs":[{"ip":"10.0.0.66"}]}}`),
			anyError, "pool-scheduler may not change a pod's IPs, start time, reason, message, resources or container statuses"},
		{"labeler deletes a node", func(ctx context.Context) error {
			return labelerClient.CoreV1().Nodes().Delete(ctx, "spot-0", metav1.DeleteOptions{})
		}, apierrors.IsForbidden, ""},
		{"labeler creates a pod", func(ctx context.Context) error {
			_, err := labelerClient.CoreV1().Pods(user).Create(ctx, util.Pod(user, "evil").Obj(), metav1.CreateOptions{})
			return err
		}, apierrors.IsForbidden, ""},
		// Its only write to NodePoolLabelSets, their status, is bound to labelSetNamespaces.
		{"labeler writes the status of a NodePoolLabelSet outside labelSetNamespaces", func(ctx context.Context) error {
			if err := util.ApplyLabelSet(ctx, cp, util.LabelSet(user, "spot", want)); err != nil {
				return fmt.Errorf("admin creating the set: %w", err)
			}
			_, err := dynamic.NewForConfigOrDie(labelerCfg).Resource(labelsv1alpha1.Resource).Namespace(user).
				Patch(ctx, "spot", types.MergePatchType, []byte(`{"status":{"state":"Synced"}}`), metav1.PatchOptions{}, "status")
			return err
		}, apierrors.IsForbidden, ""},
		// The labeler controller's admission policy: only labels it manages, and that record.
		{"labeler sets a label it does not manage", nodePatch(labelerClient, "spot-0", labelPatch),
			anyError, "may only change labels listed in its managed-labels annotation, not example.com/owned"},
		{"labeler moves a node to another pool, declaring the pool label managed", nodePatch(labelerClient, "spot-0",
			[]byte(`{"metadata":{"labels":{"`+poolKey+`":"other"},"annotations":{"nodepool.banzaicloud.io/managed-labels":"[\"example.com/tier\",\"`+poolKey+`\"]"}}}`)),
			anyError, "the labeler may not change pool-identity labels: " + poolKey},
		// Whatever the write declares managed: the domain labeler's labels, reserved labels, the
		// labels that mark system nodes.
		{"labeler sets the domain labeler's label, declaring it managed", nodePatch(labelerClient, "spot-0",
			[]byte(`{"metadata":{"labels":{"`+configv1.UpdateDomainLabelKey+`":"9"},"annotations":{"nodepool.banzaicloud.io/managed-labels":"[\"example.com/tier\",\"`+configv1.UpdateDomainLabelKey+`\"]"}}}`)),
			anyError, "the labeler may not change labels the domain labeler writes: " + configv1.UpdateDomainLabelKey},
		{"labeler sets a reserved label, declaring it managed", nodePatch(labelerClient, "spot-0",
			[]byte(`{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":"true"},"annotations":{"nodepool.banzaicloud.io/managed-labels":"[\"example.com/tier\",\"node.kubernetes.io/exclude-from-external-load-balancers\"]"}}}`)),
			anyError, "the labeler may not change labels of the reserved kubernetes.io and k8s.io domains, nor those that take a node out of load balancers: node.kubernetes.io/exclude-from-external-load-balancers"},
		// cloud-provider-azure keeps such nodes out of every load balancer's backend pool.
		{"labeler marks a node unmanaged by Azure, declaring it managed", nodePatch(labelerClient, "spot-0",
			[]byte(`{"metadata":{"labels":{"kubernetes.azure.com/managed":"false"},"annotations":{"nodepool.banzaicloud.io/managed-labels":"[\"example.com/tier\",\"kubernetes.azure.com/managed\"]"}}}`)),
			anyError, "nor those that take a node out of load balancers: kubernetes.azure.com/managed"},
		{"labeler moves a node to another resource group, declaring it managed", nodePatch(labelerClient, "spot-0",
			[]byte(`{"metadata":{"labels":{"kubernetes.azure.com/resource-group":"elsewhere"},"annotations":{"nodepool.banzaicloud.io/managed-labels":"[\"example.com/tier\",\"kubernetes.azure.com/resource-group\"]"}}}`)),
			anyError, "nor those that take a node out of load balancers: kubernetes.azure.com/resource-group"},
		{"labeler makes a node a control-plane node, declaring it managed", nodePatch(labelerClient, "spot-0",
			[]byte(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""},"annotations":{"nodepool.banzaicloud.io/managed-labels":"[\"example.com/tier\",\"node-role.kubernetes.io/control-plane\"]"}}}`)),
			anyError, "nor those that take a node out of load balancers: node-role.kubernetes.io/control-plane"},
		{"labeler rewrites the kubelet's hostname label, declaring it managed", nodePatch(labelerClient, "spot-0",
			[]byte(`{"metadata":{"labels":{"kubernetes.io/hostname":"spot-1"},"annotations":{"nodepool.banzaicloud.io/managed-labels":"[\"example.com/tier\",\"kubernetes.io/hostname\"]"}}}`)),
			anyError, "the labeler may not change labels of the reserved kubernetes.io and k8s.io domains, nor those that take a node out of load balancers: kubernetes.io/hostname"},
		{"labeler turns a node into a system node, declaring the label managed", nodePatch(labelerClient, "spot-0",
			[]byte(`{"metadata":{"labels":{"`+configv1.AKSModeLabelKey+`":"system"},"annotations":{"nodepool.banzaicloud.io/managed-labels":"[\"example.com/tier\",\"`+configv1.AKSModeLabelKey+`\"]"}}}`)),
			anyError, "the labeler may not change the labels that mark system nodes: " + configv1.AKSModeLabelKey},
		{"labeler taints a node", nodePatch(labelerClient, "spot-0", []byte(`{"spec":{"taints":[{"key":"example.com/evict","effect":"NoExecute"}]}}`)),
			anyError, "the labeler may remove only the startup taint " + pool.StartupTaintKey},
		// #46: of a node's taints, it may lift the startup taint and nothing else.
		{"labeler removes a taint other than the startup taint", func(ctx context.Context) error {
			if err := taintedNode(ctx, admin, "tainted-0"); err != nil {
				return err
			}
			return nodePatch(labelerClient, "tainted-0", []byte(`{"spec":{"taints":[{"key":"`+pool.StartupTaintKey+`","effect":"NoSchedule"}]}}`))(ctx)
		}, anyError, "the labeler may remove only the startup taint " + pool.StartupTaintKey},
		{"labeler adds a taint beside lifting the startup taint", func(ctx context.Context) error {
			if err := taintedNode(ctx, admin, "tainted-0"); err != nil {
				return err
			}
			return nodePatch(labelerClient, "tainted-0", []byte(`{"spec":{"taints":[{"key":"example.com/other","effect":"NoSchedule"},{"key":"example.com/evict","effect":"NoExecute"}]}}`))(ctx)
		}, anyError, "the labeler may remove only the startup taint " + pool.StartupTaintKey},
		{"labeler cordons a node", nodePatch(labelerClient, "spot-0", []byte(`{"spec":{"unschedulable":true}}`)),
			anyError, "the labeler may not change the node's spec"},
		{"labeler sets another annotation", nodePatch(labelerClient, "spot-0", []byte(`{"metadata":{"annotations":{"example.com/note":"x"}}}`)),
			anyError, "may not change annotations other than nodepool.banzaicloud.io/managed-labels"},
		{"labeler adds a finalizer", nodePatch(labelerClient, "spot-0", finalizerPatch),
			anyError, "the labeler may not change the node's finalizers or ownerReferences"},
		{"labeler adds an ownerReference", nodePatch(labelerClient, "spot-0", ownerPatch),
			anyError, "the labeler may not change the node's finalizers or ownerReferences"},
		// #46: it may patch node status (the condition PoolLabelsApplied), and nothing else of it.
		{"labeler writes node status beyond its condition", func(ctx context.Context) error {
			_, err := labelerClient.CoreV1().Nodes().Patch(ctx, "spot-0", types.MergePatchType, []byte(`{"status":{"capacity":{"pods":"1"}}}`), metav1.PatchOptions{}, "status")
			return err
		}, anyError, "the labeler may change only the node condition " + pool.ConditionPoolLabelsApplied},
		{"labeler changes another node condition", func(ctx context.Context) error {
			_, err := labelerClient.CoreV1().Nodes().Patch(ctx, "spot-0", types.StrategicMergePatchType, []byte(`{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`), metav1.PatchOptions{}, "status")
			return err
		}, anyError, "the labeler may change only the node condition " + pool.ConditionPoolLabelsApplied},
		{"labeler sets its condition on a node of no pool", func(ctx context.Context) error {
			_, err := labelerClient.CoreV1().Nodes().Patch(ctx, "az-1", types.StrategicMergePatchType, []byte(`{"status":{"conditions":[{"type":"`+pool.ConditionPoolLabelsApplied+`","status":"True"}]}}`), metav1.PatchOptions{}, "status")
			return err
		}, anyError, "only on a node of a pool"},
		{"domain labeler labels another node", func(ctx context.Context) error {
			_, err := domain.CoreV1().Nodes().Patch(ctx, "az-1", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"topology.pool-scheduler.io/update-domain":"3"}}}`), metav1.PatchOptions{})
			return err
		}, anyError, "may only label the node its pod runs on"},
		{"domain labeler sets another label on its node", func(ctx context.Context) error {
			_, err := domain.CoreV1().Nodes().Patch(ctx, "az-0", types.MergePatchType, labelPatch, metav1.PatchOptions{})
			return err
		}, anyError, "may only change its own domain labels"},
		{"domain labeler changes its node's spec", func(ctx context.Context) error {
			_, err := domain.CoreV1().Nodes().Patch(ctx, "az-0", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
			return err
		}, anyError, "may not change the node's spec"},
		{"domain labeler rewrites the managed-labels annotation", nodePatch(domain, "az-0",
			[]byte(`{"metadata":{"annotations":{"nodepool.banzaicloud.io/managed-labels":"[\"example.com/tier\"]"}}}`)),
			anyError, "the domain labeler may not change the node's annotations"},
		{"domain labeler adds a finalizer", nodePatch(domain, "az-0", finalizerPatch),
			anyError, "the domain labeler may not change the node's finalizers or ownerReferences"},
		{"domain labeler adds an ownerReference", nodePatch(domain, "az-0", ownerPatch),
			anyError, "the domain labeler may not change the node's finalizers or ownerReferences"},
		{"domain labeler writes node status", func(ctx context.Context) error {
			_, err := domain.CoreV1().Nodes().Patch(ctx, "az-0", types.MergePatchType, []byte(`{"status":{"capacity":{"pods":"1"}}}`), metav1.PatchOptions{}, "status")
			return err
		}, apierrors.IsForbidden, ""},
		{"domain labeler deletes its node", func(ctx context.Context) error {
			return domain.CoreV1().Nodes().Delete(ctx, "az-0", metav1.DeleteOptions{})
		}, apierrors.IsForbidden, ""},
		// Its events: only in namespace default (RBAC), only about its own node (the policy).
		{"domain labeler writes an event about another node", func(ctx context.Context) error {
			_, err := domain.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, nodeEvent(metav1.NamespaceDefault, "az-1"), metav1.CreateOptions{})
			return err
		}, anyError, "the domain labeler may only write events about the node its pod runs on"},
		{"domain labeler writes an event in its own namespace", func(ctx context.Context) error {
			_, err := domain.CoreV1().Events(ns).Create(ctx, nodeEvent(ns, "az-0"), metav1.CreateOptions{})
			return err
		}, apierrors.IsForbidden, ""},
		{"domain labeler writes an event about its node with another reason", func(ctx context.Context) error {
			ev := nodeEvent(metav1.NamespaceDefault, "az-0")
			ev.Reason, ev.Type = "NodeNotReady", v1.EventTypeNormal
			_, err := domain.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
			return err
		}, anyError, "the domain labeler may only write its own events"},
		{"domain labeler writes an event about its node under another source", func(ctx context.Context) error {
			ev := nodeEvent(metav1.NamespaceDefault, "az-0")
			ev.Source.Component = "kubelet"
			_, err := domain.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
			return err
		}, anyError, "the domain labeler's events must name it as their source"},
		// core/v1 lets an update rewrite involvedObject, reason, type and message: the policy
		// reads the old Event too, so no Event in default but its own about its node is its to
		// patch, not even another labeler pod's.
		{"domain labeler takes over another node's labeler event, pointing it at its node", takeOverEvent(admin, domain,
			nodeEvent(metav1.NamespaceDefault, "az-1"), `{"involvedObject":{"name":"az-0"},"message":"stolen"}`),
			anyError, "the domain labeler may only update its own events about the node its pod runs on"},
		{"domain labeler rewrites another node's NodeNotReady event into its own", takeOverEvent(admin, domain, &v1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: "az-1."},
			InvolvedObject: v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "az-1"},
			Reason:         "NodeNotReady", Message: "Node az-1 status is now: NodeNotReady", Type: v1.EventTypeNormal,
			Source: v1.EventSource{Component: "node-controller"}, Count: 1,
		}, `{"involvedObject":{"name":"az-0"},"reason":"`+domainlabeler.ReasonMetadataUnreachable+`","type":"Warning","source":{"component":"`+domainEventSource+`"},"message":"stolen"}`),
			anyError, "the domain labeler may only update its own events about the node its pod runs on"},
		{"domain labeler changes its own event's reason", func(ctx context.Context) error {
			if ownEvent == nil {
				return errors.New("no event of its own to patch (see above)")
			}
			_, err := domain.CoreV1().Events(metav1.NamespaceDefault).Patch(ctx, ownEvent.Name, types.MergePatchType,
				[]byte(`{"reason":"`+domainlabeler.ReasonMetadataReachable+`","type":"Normal"}`), metav1.PatchOptions{})
			return err
		}, anyError, "the domain labeler may not change what an event is about"},
	}
	for _, r := range refusals {
		err := r.do(tCtx)
		switch {
		case err == nil:
			t.Errorf("%s: allowed, want refused", r.name)
		case !r.want(err) || !strings.Contains(err.Error(), r.message):
			t.Errorf("%s: %v, want refused (%q)", r.name, err, r.message)
		default:
			t.Logf("%s: refused: %v", r.name, err)
		}
	}
	// Defence in depth: were the domain labeler granted nodes/status (its shipped role does not,
	// see the refusals above), its admission policy would still refuse status writes; the
	// controller's role grants it, and its policy bounds it to one condition (#46).
	grantNodeStatus(tCtx, t, admin, ns, "pool-labeler-domain")
	waitAllowed(tCtx, t, domain, "pool-labeler-domain", []authorizationv1.ResourceAttributes{{Verb: "patch", Resource: "nodes", Subresource: "status"}})
	for who, c := range map[string]struct {
		cs   kubernetes.Interface
		node string
		want string
	}{
		"labeler":        {labelerClient, "spot-0", "the labeler may change only the node condition " + pool.ConditionPoolLabelsApplied},
		"domain labeler": {domain, "az-0", "the domain labeler may not write node status"},
	} {
		_, err := c.cs.CoreV1().Nodes().Patch(tCtx, c.node, types.MergePatchType, []byte(`{"status":{"capacity":{"pods":"1"}}}`), metav1.PatchOptions{}, "status")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s writing node status with RBAC allowing it: %v, want refused by its admission policy (%q)", who, err, c.want)
		}
	}
	// NodeStatus.declaredFeatures (1.36, NodeDeclaredFeatures beta and on): every scheduler's
	// filter and the nodedeclaredfeatures admission plugin read it.
	if version.KubernetesLine() >= "1.36" {
		_, err := labelerClient.CoreV1().Nodes().Patch(tCtx, "spot-0", types.MergePatchType, []byte(`{"status":{"declaredFeatures":["Forged"]}}`), metav1.PatchOptions{}, "status")
		if want := "the labeler may change only the node condition " + pool.ConditionPoolLabelsApplied; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("labeler forging a node's declared features: %v, want refused by its admission policy (%q)", err, want)
		}
	}

	// It may lift the startup taint from a node of a pool, leaving the others (#46).
	if err := nodePatch(labelerClient, "tainted-0", []byte(`{"spec":{"taints":[{"key":"example.com/other","effect":"NoSchedule"}]}}`))(tCtx); err != nil {
		t.Errorf("labeler lifting the startup taint: %v", err)
	}
	// The labeler may still remove a label it manages, dropping it from the annotation in the
	// same write (the policy reads the annotation before and after).
	if err := nodePatch(labelerClient, "spot-2", []byte(`{"metadata":{"labels":{"example.com/tier":null},"annotations":{"nodepool.banzaicloud.io/managed-labels":"[]"}}}`))(tCtx); err != nil {
		t.Errorf("labeler removing a label it manages: %v", err)
	}
	// It may set an isolation label (node-restriction.kubernetes.io/: kubelets may not set those on
	// themselves, so an operator's NodePoolLabelSet does) declared managed in the same write.
	if err := nodePatch(labelerClient, "spot-1", []byte(`{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"spot"},"annotations":{"nodepool.banzaicloud.io/managed-labels":"[\"example.com/tier\",\"node-restriction.kubernetes.io/pool\"]"}}}`))(tCtx); err != nil {
		t.Errorf("labeler setting a node-restriction.kubernetes.io/ label it declares managed: %v", err)
	}
	// The domain labeler may still change its own domain label (the policy is not a blanket deny).
	if _, err := domain.CoreV1().Nodes().Patch(tCtx, "az-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"topology.pool-scheduler.io/update-domain":"4"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("domain labeler changing its own update-domain label: %v", err)
	}

	// #35: the spread keeper (manifests/spread) may write the pod-deletion-cost annotation and nothing else.
	checkSpreadKeeperWrites(tCtx, t, cp)

	// The certificate keeper (manifests/admission/webhook) may change only the webhook configuration's caBundle.
	checkWebhookConfigurationWrites(tCtx, t, cp, applied)

	// #34: the certificate keeper alone reads the metrics CA's key; the serving identities cannot.
	checkCertKeeper(tCtx, t, cp)

	for name, p := range map[string]*util.SchedulerProcess{"pool-scheduler": schedProc, "pool-labeler controller": labelerProc, "pool-labeler domain": domainProc} {
		if exited, err := p.Wait(0); exited {
			t.Errorf("%s exited: %v\n%s", name, err, p.Output())
		}
		if m := forbidden.FindAllString(p.Output(), -1); len(m) > 0 {
			t.Errorf("%s had requests refused:\n%s", name, grepLinesRe(p.Output(), forbidden, 10))
		}
	}
}

func anyError(err error) bool { return err != nil }

// checkDomainLabelerEvents runs the domain mode's own code with the domain labeler's token on
// its node, now an Azure VM (spec.providerID) whose metadata endpoint does not answer: under the
// shipped Role (namespace default) and events policy it writes its InstanceMetadataUnreachable
// warning and updates it on the next probe (create, then patch). It returns that Event.
func checkDomainLabelerEvents(ctx context.Context, t *testing.T, admin, domain kubernetes.Interface) *v1.Event {
	t.Helper()
	util.PatchNode(ctx, t, admin, "az-0", `{"spec":{"providerID":"azure:///subscriptions/s/resourceGroups/mc/providers/Microsoft.Compute/virtualMachineScaleSets/aks-vmss/virtualMachines/0"}}`)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- domainlabeler.RunDomainMode(runCtx, domain, domainlabeler.DomainOptions{
			NodeName: "az-0", Endpoint: "http://127.0.0.1:1/metadata/instance/compute",
			UpdateDomainKey: configv1.UpdateDomainLabelKey, FaultDomainKey: configv1.FaultDomainLabelKey,
			RequestTimeout: time.Second, Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 2},
			ReprobeInterval: 50 * time.Millisecond,
		}, time.Hour)
	}()
	var events []v1.Event
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=az-0,reason=" + domainlabeler.ReasonMetadataUnreachable})
		if err != nil {
			return false, nil
		}
		events = list.Items
		return len(events) == 1 && events[0].Count >= 2, nil
	})
	cancel()
	// The outcome is the Event. Cancelled, RunDomainMode returns the last completed probe
	// round's verdict (ErrMetadataUnreachable here), never the cut-short round's "giving up".
	if rerr := <-done; rerr != nil && !errors.Is(rerr, domainlabeler.ErrMetadataUnreachable) {
		t.Errorf("domain mode on an Azure node with no endpoint, cancelled, returned %v, want ErrMetadataUnreachable (or nil)", rerr)
	}
	if err != nil {
		t.Errorf("the domain labeler's %s event was not written and updated under its own RBAC and policy (its log has the refusal): %v", domainlabeler.ReasonMetadataUnreachable, events)
		return nil
	}
	ev := &events[0]
	if ev.Type != v1.EventTypeWarning || ev.InvolvedObject.Kind != "Node" || ev.Source.Component != domainEventSource {
		t.Errorf("the domain labeler's event: type %q, about %s %s, source %q; want a Warning about Node az-0 from %s",
			ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Source.Component, domainEventSource)
	}
	return ev
}

// domainEventSource is the source.component of the domain labeler's Events (pkg/labeler), which
// its events policy requires.
const domainEventSource = "pool-labeler-domain"

// nodeEvent is an event about a node, written into namespace, as the domain labeler writes them.
func nodeEvent(namespace, node string) *v1.Event {
	now := metav1.Now()
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: namespace, GenerateName: node + "."},
		InvolvedObject: v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node},
		Reason:         domainlabeler.ReasonMetadataUnreachable, Message: "test", Type: v1.EventTypeWarning,
		Source:         v1.EventSource{Component: domainEventSource, Host: node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
}

// takeOverEvent creates (as admin) an event in default about another node, then patches it with
// the domain labeler's token to point at its own node az-0 (and the rest of patch).
func takeOverEvent(admin, domain kubernetes.Interface, ev *v1.Event, patch string) func(context.Context) error {
	return func(ctx context.Context) error {
		created, err := admin.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("admin creating the event: %w", err)
		}
		_, err = domain.CoreV1().Events(metav1.NamespaceDefault).Patch(ctx, created.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
}

// grantNodeStatus binds a ClusterRole allowing patch on nodes/status to the ServiceAccounts.
func grantNodeStatus(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns string, serviceAccounts ...string) {
	t.Helper()
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-node-status"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-node-status"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-node-status"},
	}
	for _, sa := range serviceAccounts {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa})
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// updatePV gets a PersistentVolume with the client, changes it and updates it.
func updatePV(cs kubernetes.Interface, name string, change func(*v1.PersistentVolume)) func(context.Context) error {
	return func(ctx context.Context) error {
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		change(pv)
		_, err = cs.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
		return err
	}
}

// waitBoundWithCost creates a ReplicaSet of two replicas (the upstream ReplicaSet controller
// runs in process) and waits until pool-scheduler has bound both with their deletion costs: the
// bindings that carry the annotation pass the scheduler's pod-writes policy.
func waitBoundWithCost(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, ns string) {
	t.Helper()
	util.StartReplicaSetController(t, cp)
	if _, err := cp.Client.AppsV1().ReplicaSets(ns).Create(ctx, util.ReplicaSet(ns, "web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods *v1.PodList
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		pods, err = cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, nil
		}
		withCost := 0
		for _, p := range pods.Items {
			if _, ok := p.Annotations[spread.DeletionCostAnnotation]; ok && p.Spec.NodeName != "" {
				withCost++
			}
		}
		if withCost == 2 {
			t.Logf("bound with their deletion costs: %v", podSummary(pods))
		}
		return withCost == 2, nil
	})
	if err != nil {
		t.Fatalf("the ReplicaSet's replicas were not both bound with a deletion cost: %v", podSummary(pods))
	}
}

// waitPreemption fills spot-2 with a low-priority pod and creates a high-priority one that fits
// only there: the scheduler marks the preemptor unschedulable and nominates spot-2 for it, marks
// the victim with DisruptionTarget and deletes it (no kubelet here finishes the deletion), all
// through writes the pod-writes policy allows.
func waitPreemption(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns string) {
	t.Helper()
	for name, value := range map[string]int32{"rbac-low": 10, "rbac-high": 1000} {
		if _, err := admin.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pinned := func(name, class string) *v1.Pod {
		p := util.Pod(ns, name).Req(map[v1.ResourceName]string{v1.ResourceCPU: "6"}).
			NodeSelector(map[string]string{v1.LabelHostname: "spot-2"}).Obj()
		p.Spec.PriorityClassName = class
		return p
	}
	util.CreatePod(ctx, t, admin, pinned("victim", "rbac-low"))
	util.WaitForPodBound(ctx, t, admin, ns, "victim", 60*time.Second)
	util.CreatePod(ctx, t, admin, pinned("preemptor", "rbac-high"))
	victim, preemptor := &v1.Pod{}, &v1.Pod{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		v, err := admin.CoreV1().Pods(ns).Get(ctx, "victim", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		p, err := admin.CoreV1().Pods(ns).Get(ctx, "preemptor", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		victim, preemptor = v, p
		_, marked := podCondition(victim, v1.DisruptionTarget)
		scheduled, _ := podCondition(preemptor, v1.PodScheduled)
		return marked && victim.DeletionTimestamp != nil && scheduled == v1.ConditionFalse &&
			preemptor.Status.NominatedNodeName == "spot-2", nil
	})
	if err != nil {
		t.Fatalf("the preemption's status writes did not all land: victim %+v deleting=%v; preemptor %+v nominated=%q",
			victim.Status.Conditions, victim.DeletionTimestamp != nil, preemptor.Status.Conditions, preemptor.Status.NominatedNodeName)
	}
}

// podCondition returns the status of a pod's condition, and whether it has one.
func podCondition(p *v1.Pod, typ v1.PodConditionType) (v1.ConditionStatus, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status, true
		}
	}
	return "", false
}

// podSummary names each pod with its node and deletion cost.
func podSummary(pods *v1.PodList) []string {
	if pods == nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, fmt.Sprintf("%s@%s cost=%q zone=%q", p.Name, p.Spec.NodeName, p.Annotations[spread.DeletionCostAnnotation], p.Labels[v1.LabelTopologyZone]))
	}
	return out
}

// waitVolumeBinding creates a local PersistentVolume on spot-1 with a WaitForFirstConsumer
// claim, a claim of a provisioning WaitForFirstConsumer class, and a pool-scheduler pod for
// each, and waits for the scheduler's VolumeBinding to bind the volume to its claim and to mark
// the other claim with the chosen node.
func waitVolumeBinding(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns string) {
	t.Helper()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	for name, provisioner := range map[string]string{"local": "kubernetes.io/no-provisioner", "provisioned": "example.com/provisioner"} {
		if _, err := admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &wffc,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	size := resource.MustParse("1Gi")
	pv, err := admin.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "local-pv"},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: size},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			StorageClassName:              "local",
			PersistentVolumeSource:        v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/mnt/disk"}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{"spot-1"}}},
			}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the PV controller (not running here) does to a new volume; VolumeBinding binds only
	// Available ones.
	pv.Status.Phase = v1.VolumeAvailable
	if _, err := admin.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for claim, class := range map[string]string{"data": "local", "provisioned": "provisioned"} {
		if _, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim},
			Spec: v1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(class),
				AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: size}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		util.CreatePod(ctx, t, admin, util.Pod(ns, "uses-"+claim).PVC(claim).Obj())
	}
	var pvc *v1.PersistentVolumeClaim
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if pv, err = admin.CoreV1().PersistentVolumes().Get(ctx, "local-pv", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		if pvc, err = admin.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "provisioned", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		return pv.Spec.ClaimRef != nil && pvc.Annotations["volume.kubernetes.io/selected-node"] != "", nil
	})
	if err != nil {
		t.Fatalf("VolumeBinding did not bind local-pv (claimRef %v) or select a node for the provisioned claim (annotations %v): %v", pv.Spec.ClaimRef, pvc.Annotations, err)
	}
	if pv.Spec.ClaimRef.Namespace != ns || pv.Spec.ClaimRef.Name != "data" {
		t.Errorf("local-pv bound to %s/%s, want %s/data", pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name, ns)
	}
	t.Logf("VolumeBinding bound local-pv to %s/data and selected node %s for the provisioned claim", ns, pvc.Annotations["volume.kubernetes.io/selected-node"])
}

// taintedNode creates (once) a node of pool "spot" with another taint and the startup taint.
func taintedNode(ctx context.Context, admin kubernetes.Interface, name string) error {
	n := util.Node(name, map[string]string{poolKey: "spot"}).Taints([]v1.Taint{
		{Key: "example.com/other", Effect: v1.TaintEffectNoSchedule}, {Key: pool.StartupTaintKey, Effect: v1.TaintEffectNoSchedule}}).Obj()
	if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("admin creating %s: %w", name, err)
	}
	return nil
}

// nodePatch is a JSON merge patch of a node by the client's identity.
func nodePatch(cs kubernetes.Interface, node string, patch []byte) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
}

func dynamicFor(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// waitAllowed waits until a SelfSubjectAccessReview allows each of attrs for the client's identity.
func waitAllowed(ctx context.Context, t *testing.T, cs kubernetes.Interface, who string, attrs []authorizationv1.ResourceAttributes) {
	t.Helper()
	for _, a := range attrs {
		a := a
		var reason string
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a},
			}, metav1.CreateOptions{})
			if err != nil {
				reason = err.Error()
				return false, nil
			}
			reason = r.Status.Reason
			return r.Status.Allowed, nil
		})
		if err != nil {
			t.Fatalf("%s may not %s %s/%s %s in %q (%s): the manifests do not grant it", who, a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace, reason)
		}
	}
}

func grepLinesRe(s string, re *regexp.Regexp, max int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if re.MatchString(l) {
			out = append(out, l)
			if len(out) == max {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// servingCert writes a self-signed certificate for 127.0.0.1 into a directory as tls.crt and
// tls.key (the names pool-labeler's --metrics-cert-dir reads) and returns the directory and a
// pool that trusts it.
func servingCert(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return dir, pool
}

// checkMetricsAuth: the labeler's /metrics refuses a scrape without a token (401) and one by a
// ServiceAccount without get on /metrics (403), and serves one that has it; the labeler asks the
// apiserver with the rights its shipped ClusterRole gives it (TokenReview, SubjectAccessReview).
func checkMetricsAuth(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, url string, roots *x509.CertPool) {
	t.Helper()
	admin := cp.Client
	const ns = "monitoring"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"prometheus", "nobody"} {
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	promCfg, _ := util.ServiceAccountConfig(ctx, t, cp, ns, "prometheus", nil)
	nobodyCfg, _ := util.ServiceAccountConfig(ctx, t, cp, ns, "nobody", nil)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	scrape := func(ctx context.Context, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	// The authorized scrape first: it waits for the server to listen and for the new binding.
	var code int
	var body string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		code, body, err = scrape(ctx, promCfg.BearerToken)
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil || !strings.Contains(body, "pool_labeler_node_patch_errors_total") {
		t.Fatalf("scrape with get on /metrics: HTTP %d, want 200 with the labeler's metrics: %v\n%.300s", code, err, body)
	}
	for _, tt := range []struct {
		name  string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a ServiceAccount without get on /metrics", nobodyCfg.BearerToken, http.StatusForbidden},
		// The apiserver's TokenReview reports an error for a token it cannot parse, which
		// controller-runtime's filter answers with 500: refused all the same (0: any refusal).
		{"an invalid token", "not-a-token", 0},
	} {
		code, body, err := scrape(ctx, tt.token)
		switch {
		case err != nil:
			t.Errorf("scrape with %s: %v", tt.name, err)
		case tt.want == 0 && code < 400, tt.want != 0 && code != tt.want:
			t.Errorf("scrape with %s: HTTP %d, want %d (0: any refusal)\n%.300s", tt.name, code, tt.want, body)
		}
	}
}
