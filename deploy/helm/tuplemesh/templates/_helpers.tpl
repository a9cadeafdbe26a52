{{/* Full name: release-chart, trimmed to 52 characters (StatefulSet pod names add a suffix). */}}
{{- define "tuplemesh.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tuplemesh.headless" -}}
{{- printf "%s-headless" (include "tuplemesh.fullname" .) -}}
{{- end -}}

{{- define "tuplemesh.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tuplemesh.labels" -}}
{{ include "tuplemesh.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "tuplemesh.serviceAccountName" -}}
{{- default (include "tuplemesh.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Static peers: the pods' stable DNS names, in ordinal order. */}}
{{- define "tuplemesh.staticPeers" -}}
{{- $peers := list -}}
{{- range $i := until (int .Values.workers) -}}
{{- $peers = append $peers (printf "%s-%d.%s.%s.svc:%d" (include "tuplemesh.fullname" $) $i (include "tuplemesh.headless" $) $.Release.Namespace (int $.Values.ports.transfer)) -}}
{{- end -}}
{{- join "," $peers -}}
{{- end -}}

{{- define "tuplemesh.config" -}}
{{- $base := dict "messaging.transport" .Values.transport "worker.bind.host" "0.0.0.0" "metrics.bind.host" "0.0.0.0" "metrics.enabled" .Values.metrics.enabled "metrics.port" (int .Values.ports.metrics) "zmq.port.offset" (int .Values.ports.zmqOffset) -}}
{{- if .Values.tls.enabled -}}
{{- $_ := set $base "tls.enabled" true -}}
{{- $_ := set $base "tls.cert.file" "/etc/tuplemesh/tls/tls.crt" -}}
{{- $_ := set $base "tls.key.file" "/etc/tuplemesh/tls/tls.key" -}}
{{- $_ := set $base "tls.ca.file" "/etc/tuplemesh/tls/ca.crt" -}}
{{- end -}}
{{- toYaml (merge (deepCopy .Values.config) $base) -}}
{{- end -}}
