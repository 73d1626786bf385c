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

{{- define "pool-scheduler.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end -}}

{{/* Object names: the scheduler's comes from values; the labelers' follow the manifests. */}}
{{- define "pool-scheduler.schedulerName" -}}{{ .Values.scheduler.name }}{{- end -}}
{{- define "pool-scheduler.controllerName" -}}pool-labeler{{- end -}}
{{- define "pool-scheduler.domainName" -}}pool-labeler-domain{{- end -}}

{{/* The one NodePoolLabelSet namespace of the scheduler and the labeler (which reads it from the
scheduler's configuration): null means the release namespace, "" every namespace. */}}
{{- define "pool-scheduler.labelSetNamespace" -}}
{{- $ns := index .Values.scheduler.plugins.nodePoolReady.args "labelSetNamespace" -}}
{{- if kindIs "invalid" $ns }}{{ .Release.Namespace }}{{ else }}{{ $ns }}{{ end -}}
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
