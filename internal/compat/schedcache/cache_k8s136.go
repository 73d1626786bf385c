//go:build k8s136

// Package schedcache builds kube-scheduler's own node cache, whose constructor differs between
// release lines, for tests that need the snapshot exactly as the scheduler maintains it.
package schedcache

import (
	"context"

	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// New returns an empty scheduler cache, with the scheduler's metrics registered (the cache
// updates them).
func New(ctx context.Context) cache.Cache {
	metrics.Register()
	return cache.New(ctx, nil, false)
}
