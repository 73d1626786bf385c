//go:build !k8s136

package framework

// The 1.34 line: the plugin API lives in k8s.io/kubernetes/pkg/scheduler/framework.
import k8sfw "k8s.io/kubernetes/pkg/scheduler/framework"

type (
	Plugin              = k8sfw.Plugin
	Handle              = k8sfw.Handle
	SharedLister        = k8sfw.SharedLister
	NodeInfoLister      = k8sfw.NodeInfoLister
	EnqueueExtensions   = k8sfw.EnqueueExtensions
	PreFilterPlugin     = k8sfw.PreFilterPlugin
	PreFilterExtensions = k8sfw.PreFilterExtensions
	PreFilterResult     = k8sfw.PreFilterResult
	FilterPlugin        = k8sfw.FilterPlugin
	PostFilterPlugin    = k8sfw.PostFilterPlugin
	PostFilterResult    = k8sfw.PostFilterResult
	NodeToStatusReader  = k8sfw.NodeToStatusReader
	PreScorePlugin      = k8sfw.PreScorePlugin
	ScorePlugin         = k8sfw.ScorePlugin
	ScoreExtensions     = k8sfw.ScoreExtensions
	NodeScore           = k8sfw.NodeScore
	NodeScoreList       = k8sfw.NodeScoreList
	ReservePlugin       = k8sfw.ReservePlugin
	BindPlugin          = k8sfw.BindPlugin
)

// MaxNodeScore is the highest score a Score plugin may give a node (after NormalizeScore).
const MaxNodeScore = k8sfw.MaxNodeScore
