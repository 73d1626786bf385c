// Package kubesim runs what a cluster has beside the apiserver and the scheduler, in process
// against an embedded control plane: the upstream ReplicaSet and disruption controllers, and a
// kubelet stand-in. The simulator and the integration tests share it.
package kubesim

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/controller/disruption"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
)

// replicaSetBurst is kube-controller-manager's default burst of pod creations per sync
// (--concurrent-replicaset-syncs aside): pods come in its slow-start batches (1, 2, 4, 8, ...).
const replicaSetBurst = 500

// StartReplicaSetController runs the upstream ReplicaSet controller
// (k8s.io/kubernetes/pkg/controller/replicaset) until ctx ends, so pods are created and
// scaled down by its own rules.
func StartReplicaSetController(ctx context.Context, cp *controlplane.ControlPlane) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx))
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	rsc := replicaset.NewReplicaSetController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), cp.Client, replicaSetBurst)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go rsc.Run(ctx, 5)
}

// StartDisruptionController runs the upstream disruption controller
// (k8s.io/kubernetes/pkg/controller/disruption) until ctx ends, so PodDisruptionBudgets get the
// status (disruptionsAllowed) the Eviction API decides by. It is set up as
// k8s.io/kubernetes/test/integration/util InitDisruptionController sets it up.
func StartDisruptionController(ctx context.Context, cp *controlplane.ControlPlane) error {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx))
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(cp.Client.Discovery()))
	// scale.NewForConfig sets fields of the config it is given: a copy, as InitDisruptionController
	// makes, since the scheduler and its plugins read cp.Config at the same time.
	scaleClient, err := scale.NewForConfig(rest.CopyConfig(cp.Config), mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cp.Client.Discovery()))
	if err != nil {
		return fmt.Errorf("disruption controller: %w", err)
	}
	dc := disruption.NewDisruptionController(ctx, factory.Core().V1().Pods(), factory.Policy().V1().PodDisruptionBudgets(),
		factory.Core().V1().ReplicationControllers(), factory.Apps().V1().ReplicaSets(), factory.Apps().V1().Deployments(),
		factory.Apps().V1().StatefulSets(), cp.Client, mapper, scaleClient, cp.Client.Discovery())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go dc.Run(ctx)
	return nil
}

// KubeletOptions tune the kubelet stand-in.
type KubeletOptions struct {
	// ReadyAfter is how long a bound pod takes to become Running and Ready (its image pulled,
	// its readiness probe passed); 0 makes it Ready at once.
	ReadyAfter time.Duration
	// Logf receives the errors it cannot act on (nil: klog).
	Logf func(format string, args ...any)
}

// StartKubelet plays every node's kubelet until ctx ends: a bound pod gets phase Running and a
// Ready condition ReadyAfter after it was seen bound, as the kubelet reports once its containers
// run, so the ReplicaSet controller ranks it and the disruption controller counts it healthy; a
// pod deleted with a grace period is removed at once, as a pause container exits on SIGTERM.
func StartKubelet(ctx context.Context, cs kubernetes.Interface, opts KubeletOptions) error {
	if opts.Logf == nil {
		opts.Logf = func(format string, args ...any) { klog.Infof(format, args...) }
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	informer := factory.Core().V1().Pods().Informer()
	queue := make(chan *v1.Pod, 10000)
	enqueue := func(pod *v1.Pod) {
		select {
		case queue <- pod:
		case <-ctx.Done():
		}
	}
	handle := func(obj any) {
		pod, ok := obj.(*v1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		switch {
		case pod.DeletionTimestamp != nil:
			enqueue(pod)
		case !podutil.IsPodReady(pod):
			if opts.ReadyAfter <= 0 {
				enqueue(pod)
				return
			}
			// runPod checks the pod again: a pod seen twice is started once.
			time.AfterFunc(opts.ReadyAfter, func() { enqueue(pod) })
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: handle, UpdateFunc: func(_, obj any) { handle(obj) }}); err != nil {
		return fmt.Errorf("kubelet: watching pods: %w", err)
	}
	factory.Start(ctx.Done())
	for range 4 {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case pod := <-queue:
					runPod(ctx, cs, pod, opts.Logf)
				}
			}
		}()
	}
	return nil
}

func runPod(ctx context.Context, cs kubernetes.Interface, pod *v1.Pod, logf func(string, ...any)) {
	pods := cs.CoreV1().Pods(pod.Namespace)
	if pod.DeletionTimestamp != nil {
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			logf("kubelet: removing %s/%s: %v", pod.Namespace, pod.Name, err)
		}
		return
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil || current.UID != pod.UID || current.DeletionTimestamp != nil || podutil.IsPodReady(current) {
			return err
		}
		now := metav1.Now()
		current.Status.Phase = v1.PodRunning
		current.Status.StartTime = &now
		current.Status.Conditions = append(current.Status.Conditions,
			v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
			v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now})
		_, err = pods.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if err != nil && ctx.Err() == nil {
		logf("kubelet: starting %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}
