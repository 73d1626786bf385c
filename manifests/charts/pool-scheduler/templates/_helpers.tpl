{{/* Labels on every object. */}}
{{- define "pool-scheduler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/part-of: pool-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The release lines (docs/compatibility.md): a line's Kubernetes minor -> the cluster minors it
serves. kube-scheduler may be one minor older than kube-apiserver, never newer, so each line serves
its own minor and the next. TestHelmChartLines checks this table, Chart.yaml's kubeVersion and
image.digests against the lines the repository builds (hack/versions.env, lines/). */}}
{{- define "pool-scheduler.lines" -}}
{"1.34": ["1.34", "1.35"], "1.36": ["1.36", "1.37"]}
{{- end -}}

{{/* The release line that runs: image.line, else the line serving the cluster's minor
(.Capabilities.KubeVersion, which carries provider suffixes such as v1.35.4-eks-1a2b3c); a cluster
no line serves is refused. */}}
{{- define "pool-scheduler.line" -}}
{{- $lines := include "pool-scheduler.lines" . | fromJson -}}
{{- $names := keys $lines | sortAlpha -}}
{{- $served := list -}}
{{- range $names }}{{ $served = append $served (printf "%s (Kubernetes %s)" . (get $lines . | join ", ")) }}{{ end -}}
{{- with .Values.image.line -}}
{{- if not (hasKey $lines .) }}{{ fail (printf "image.line %q: there is no such release line; the lines are %s (docs/compatibility.md)" . (join "; " $served)) }}{{ end -}}
{{- . -}}
{{- else -}}
{{- $v := semver .Capabilities.KubeVersion.Version -}}
{{- $minor := printf "%d.%d" $v.Major $v.Minor -}}
{{- $line := "" -}}
{{- range $names }}{{ if has $minor (get $lines .) }}{{ $line = . }}{{ end }}{{ end -}}
{{- if not $line }}{{ fail (printf "Kubernetes %s: no pool-scheduler release line serves this cluster (kube-scheduler may be at most one minor older than kube-apiserver, never newer); the lines are %s (docs/compatibility.md)" .Capabilities.KubeVersion.Version (join "; " $served)) }}{{ end -}}
{{- $line -}}
{{- end -}}
{{- end -}}

{{/* The image of the running line: repository:<appVersion>-k8s<line>[@digest], or repository:tag
when image.tag is set. */}}
{{- define "pool-scheduler.image" -}}
{{- $line := include "pool-scheduler.line" . -}}
{{- if .Values.image.tag -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Chart.AppVersion }}-k8s{{ $line }}{{ with index .Values.image.digests $line }}@{{ . }}{{ end }}
{{- end -}}
{{- end -}}

{{/* Object names: the scheduler's comes from values; the labelers' follow the manifests. */}}
{{- define "pool-scheduler.schedulerName" -}}{{ .Values.scheduler.name }}{{- end -}}
{{- define "pool-scheduler.controllerName" -}}pool-labeler{{- end -}}
{{- define "pool-scheduler.domainName" -}}pool-labeler-domain{{- end -}}

{{/* The NodePoolLabelSet namespaces of the scheduler and the labeler (which reads them from the
scheduler's configuration), as a JSON list: labelSets.namespaces, [] meaning the release
namespace; labelSets.allNamespaces renders [] (every namespace). The 0.x value
scheduler.plugins.nodePoolReady.args.labelSetNamespace is refused with the new spelling. */}}
{{- define "pool-scheduler.labelSetNamespaces" -}}
{{- $old := index .Values.scheduler.plugins.nodePoolReady.args "labelSetNamespace" -}}
{{- if not (kindIs "invalid" $old) -}}
{{- if eq $old "" -}}
{{- fail "scheduler.plugins.nodePoolReady.args.labelSetNamespace is replaced: to read every namespace set labelSets.allNamespaces=true" -}}
{{- else -}}
{{- fail (printf "scheduler.plugins.nodePoolReady.args.labelSetNamespace is replaced by labelSets.namespaces: --set 'labelSets.namespaces={%s}'" $old) -}}
{{- end -}}
{{- end -}}
{{- $l := .Values.labelSets -}}
{{- if and $l.allNamespaces $l.namespaces -}}
{{- fail "labelSets: set namespaces or allNamespaces, not both" -}}
{{- end -}}
{{- if $l.allNamespaces -}}[]
{{- else if $l.namespaces -}}{{ $l.namespaces | uniq | toJson }}
{{- else -}}{{ list .Release.Namespace | toJson }}
{{- end -}}
{{- end -}}

{{/* A PodDisruptionBudget spec body: exactly one of minAvailable and maxUnavailable (null or absent: unset). */}}
{{- define "pool-scheduler.pdbBudget" -}}
{{- $min := index . "minAvailable" -}}
{{- $max := index . "maxUnavailable" -}}
{{- if and (not (kindIs "invalid" $max)) (not (kindIs "invalid" $min)) -}}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both (set the other to null)" -}}
{{- end -}}
{{- if not (kindIs "invalid" $max) }}
maxUnavailable: {{ $max }}
{{- else }}
minAvailable: {{ $min | default 1 }}
{{- end }}
{{- end -}}

{{/* A list of strings as CEL string literals, comma-separated: 'a', 'b'. */}}
{{- define "pool-scheduler.celStrings" -}}
{{- $out := list -}}
{{- range . }}{{ $out = append $out (printf "'%s'" (. | replace "\\" "\\\\" | replace "'" "\\'")) }}{{ end -}}
{{ join ", " $out }}
{{- end -}}

{{/* pkg/admission.MatchConditions: no DaemonSet pods, no bound pods, no mirror pods, only the default scheduler's and ours. */}}
{{- define "pool-scheduler.admissionMatchConditions" -}}
- name: not-daemonset
  expression: '!has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists(r, r.kind == "DaemonSet" && r.apiVersion.startsWith("apps/") && has(r.controller) && r.controller)'
- name: not-bound
  expression: '!has(object.spec.nodeName) || object.spec.nodeName == ""'
- name: not-mirror
  expression: '!has(object.metadata.annotations) || !("kubernetes.io/config.mirror" in object.metadata.annotations)'
- name: default-or-ours
  expression: {{ printf "!has(object.spec.schedulerName) || object.spec.schedulerName in [\"\", \"default-scheduler\", %s]" (include "pool-scheduler.schedulerName" . | quote) | quote }}
{{- end -}}

{{/* pkg/admission.NamespaceSelector: the opt-in label, minus admission.excludedNamespaces and
     the release namespace (the scheduler must never be given to itself). */}}
{{- define "pool-scheduler.admissionNamespaceSelector" -}}
{{- if has .Release.Namespace .Values.admission.namespaces -}}
{{- fail (printf "admission.namespaces lists the release namespace %s: pool-scheduler's own pods would be handed to pool-scheduler, and could never be scheduled again once its replicas were gone (the admission path always leaves its own namespace out)" .Release.Namespace) -}}
{{- end -}}
matchLabels:
  pool-scheduler.io/enabled: "true"
matchExpressions:
- {key: kubernetes.io/metadata.name, operator: NotIn, values: {{ toJson (append .Values.admission.excludedNamespaces .Release.Namespace | uniq | sortAlpha) }}}
{{- end -}}

{{/* pkg/admission.ObjectSelector: a pod labelled pool-scheduler.io/enabled=false opts out. */}}
{{- define "pool-scheduler.admissionObjectSelector" -}}
matchExpressions:
- {key: pool-scheduler.io/enabled, operator: NotIn, values: ["false"]}
{{- end -}}

{{/* A list of strings as CEL string literals in a list, sorted and unique: ["a", "b"]. */}}
{{- define "pool-scheduler.celList" -}}
{{- $out := list -}}
{{- range (. | uniq | sortAlpha) }}{{ $out = append $out (. | quote) }}{{ end -}}
[{{ join ", " $out }}]
{{- end -}}

{{/* pkg/admission's systemPodCEL: pool.SystemPolicy.IsSystemPod in CEL. */}}
{{- define "pool-scheduler.systemPodCEL" -}}
{{- $g := .Values.scheduler.plugins.systemPoolGuard.args -}}
request.namespace in {{ include "pool-scheduler.celList" $g.systemNamespaces }} ||
(has(object.spec.priorityClassName) && object.spec.priorityClassName in {{ include "pool-scheduler.celList" $g.systemPriorityClasses }}) ||
(has(object.spec.tolerations) && object.spec.tolerations.exists(t, has(t.key) && t.key in {{ include "pool-scheduler.celList" $g.systemTolerationKeys }}))
{{- if $g.daemonSetPodsAreSystemPods }} ||
(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller && r.kind == "DaemonSet" && r.apiVersion.startsWith("apps/")))
{{- end }}
{{- end -}}

{{/* pkg/admission.AvoidSystemNodes for one alternative, as a JSON list of requirements; fails
     for a systemNodeSelector of more than one requirement (the webhook handles those). */}}
{{- define "pool-scheduler.avoidSystemRequirements" -}}
{{- $g := .Values.scheduler.plugins.systemPoolGuard.args -}}
{{- $reqs := list -}}
{{- with $g.systemPools }}
{{- $pools := . | uniq | sortAlpha -}}
{{- range $g.poolLabelKeys }}{{ $reqs = append $reqs (dict "key" . "operator" "NotIn" "values" $pools) }}{{ end -}}
{{- end }}
{{- $sel := $g.systemNodeSelector -}}
{{- if kindIs "invalid" $sel }}{{ $sel = dict "matchLabels" (dict "kubernetes.azure.com/mode" "system") }}{{ end -}}
{{- $neg := list -}}
{{- $ml := get $sel "matchLabels" | default dict -}}
{{- range (keys $ml | sortAlpha) }}{{ $neg = append $neg (dict "key" . "operator" "NotIn" "values" (list (get $ml .))) }}{{ end -}}
{{- $ops := dict "In" "NotIn" "NotIn" "In" "Exists" "DoesNotExist" "DoesNotExist" "Exists" -}}
{{- range (get $sel "matchExpressions" | default list) }}
{{- $e := dict "key" .key "operator" (get $ops .operator) -}}
{{- with .values }}{{ $_ := set $e "values" (. | uniq | sortAlpha) }}{{ end -}}
{{- $neg = append $neg $e -}}
{{- end }}
{{- if gt (len $neg) 1 }}
{{- fail "admission.mode=policy: the MutatingAdmissionPolicy handles a systemNodeSelector of at most one requirement; use admission.mode=webhook, or admission.systemNodeAffinity=false" }}
{{- end }}
{{- toJson (concat $reqs $neg) -}}
{{- end -}}

{{/* The Secret with the /metrics serving certificate (tls.crt, tls.key, ca.crt) when the
ServiceMonitor is enabled: monitoring.serviceMonitor.tlsSecretName, or the one the certificate
keeper writes (templates/metrics-tls.yaml); empty when monitoring is off. */}}
{{- define "pool-scheduler.metricsTLSSecret" -}}
{{- if .Values.monitoring.serviceMonitor.enabled -}}
{{- .Values.monitoring.serviceMonitor.tlsSecretName | default (printf "%s-metrics-serving" (include "pool-scheduler.schedulerName" .)) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the metrics CA and its key, which only the certificate keeper
(templates/metrics-tls.yaml, pool-labeler certs) reads and writes; mounted by no pod. Empty with
monitoring.serviceMonitor.tlsSecretName (your own certificate) or without monitoring. */}}
{{- define "pool-scheduler.metricsCASecret" -}}
{{- if and .Values.monitoring.serviceMonitor.enabled (not .Values.monitoring.serviceMonitor.tlsSecretName) -}}
{{- printf "%s-metrics-ca-key" (include "pool-scheduler.schedulerName" .) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the webhook's CA and its key (admission.mode webhook without cert-manager),
which only the certificate keeper reads and writes; empty otherwise. */}}
{{- define "pool-scheduler.webhookCASecret" -}}
{{- if and (eq .Values.admission.mode "webhook") (not .Values.admission.webhook.certManager.enabled) -}}
{{- printf "%s-webhook-ca-key" (include "pool-scheduler.schedulerName" .) -}}
{{- end -}}
{{- end -}}

{{/* The volume metrics-tls of the pods serving /metrics: the serving certificate and key of
pool-scheduler.metricsTLSSecret and nothing else (ca.crt is for the scrapers). Without subPath, so
the kubelet updates the files when the certificate is renewed and the servers reload them
(kube-scheduler's dynamic serving certificate, controller-runtime's certwatcher). The items are
required: the kubelet keeps the pod waiting (ContainerCreating, "references non-existent secret
key") until the keeper has written both. */}}
{{- define "pool-scheduler.metricsTLSVolume" -}}
{{- with include "pool-scheduler.metricsTLSSecret" . }}
- name: metrics-tls
  secret:
    secretName: {{ . }}
    items:
    - {key: tls.crt, path: tls.crt}
    - {key: tls.key, path: tls.key}
{{- end }}
{{- end -}}

{{- /* topologySpreadConstraints of a Deployment's pod template: (dict "constraints" list "name"
  app.kubernetes.io/name "root" $). A constraint without labelSelector gets one matching the
  Deployment's own pods (the labels of its selector), so it counts its own replicas only. */}}
{{- define "pool-scheduler.spreadConstraints" -}}
{{- with .constraints }}
topologySpreadConstraints:
{{- range . }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" $.name "app.kubernetes.io/instance" $.root.Release.Name)) }}
{{- end }}
- {{ toYaml $c | nindent 2 | trim }}
{{- end }}
{{- end }}
{{- end -}}

{{/* A pod's placement from its component's values (docs/operations.md, "Where the product's own
pods run"): nodeSelector, affinity and tolerations as given (values.yaml's defaults: the system
pool preferred, CriticalAddonsOnly tolerated), then the tolerations in extra that the list does not
already hold by key (the labeler's own startup taint). Keys a user set to null are skipped.
(dict "values" <component values> "extra" <list of tolerations>) */}}
{{- define "pool-scheduler.placement" -}}
{{- with get .values "nodeSelector" }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with get .values "affinity" }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $tolerations := get .values "tolerations" | default list }}
{{- $keys := list }}
{{- range $tolerations }}{{ $keys = append $keys (get . "key" | default "") }}{{ end }}
{{- range get . "extra" | default list }}
{{- if not (has .key $keys) }}{{ $tolerations = append $tolerations . }}{{ end }}
{{- end }}
{{- with $tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
