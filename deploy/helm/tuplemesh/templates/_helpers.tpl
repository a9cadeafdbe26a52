{{/* Chart name, or nameOverride: the app.kubernetes.io/name label and the base of the full name. */}}
{{- define "tuplemesh.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: fullnameOverride, else release-name, trimmed to 52 characters (StatefulSet pod
names and controller revisions add suffixes and must stay within 63). */}}
{{- define "tuplemesh.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "tuplemesh.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tuplemesh.headless" -}}
{{- printf "%s-headless" (include "tuplemesh.fullname" .) -}}
{{- end -}}

{{- define "tuplemesh.gateway" -}}
{{- printf "%s-gateway" (include "tuplemesh.fullname" .) -}}
{{- end -}}

{{- define "tuplemesh.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tuplemesh.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tuplemesh.labels" -}}
{{ include "tuplemesh.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The pods' labels: podLabels under the chart's own (the chart's win, so the selector holds). */}}
{{- define "tuplemesh.podLabels" -}}
{{- toYaml (merge (include "tuplemesh.labels" . | fromYaml) (deepCopy .Values.podLabels)) -}}
{{- end -}}

{{- define "tuplemesh.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tuplemesh.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image reference: there is no default repository, the user names their own image. */}}
{{- define "tuplemesh.image" -}}
{{- $repository := required "image.repository is required: the image with tuplemesh and your topology installed (build deploy/Dockerfile, push it to your registry, then --set image.repository=REGISTRY/NAME)" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Static peers: the pods' stable DNS names, in ordinal order. */}}
{{- define "tuplemesh.staticPeers" -}}
{{- $peers := list -}}
{{- range $i := until (int .Values.workers) -}}
{{- $peers = append $peers (printf "%s-%d.%s.%s.svc:%d" (include "tuplemesh.fullname" $) $i (include "tuplemesh.headless" $) $.Release.Namespace (int $.Values.ports.transfer)) -}}
{{- end -}}
{{- join "," $peers -}}
{{- end -}}

{{/* Where the sqlite state store keeps its file (a volume: the root filesystem is read-only). */}}
{{- define "tuplemesh.stateDir" -}}
/var/lib/tuplemesh/state
{{- end -}}

{{- define "tuplemesh.config" -}}
{{- $base := dict "messaging.transport" .Values.transport "worker.bind.host" "0.0.0.0" "metrics.bind.host" "0.0.0.0" "metrics.enabled" .Values.metrics.enabled "metrics.port" (int .Values.ports.metrics) "zmq.port.offset" (int .Values.ports.zmqOffset) -}}
{{- if .Values.tls.enabled -}}
{{- $_ := set $base "tls.enabled" true -}}
{{- $_ := set $base "tls.cert.file" "/etc/tuplemesh/tls/tls.crt" -}}
{{- $_ := set $base "tls.key.file" "/etc/tuplemesh/tls/tls.key" -}}
{{- $_ := set $base "tls.ca.file" "/etc/tuplemesh/tls/ca.crt" -}}
{{- end -}}
{{- with .Values.meshSecret.maxSkewSeconds -}}
{{- $_ := set $base "mesh.secret.max.skew.secs" (int .) -}}
{{- end -}}
{{- with .Values.meshSecret.replayCacheEntries -}}
{{- $_ := set $base "mesh.secret.replay.cache.entries" (int .) -}}
{{- end -}}
{{- toYaml (merge (deepCopy .Values.config) $base) -}}
{{- end -}}

{{/* Values that cannot work together fail the render with what to change. */}}
{{- define "tuplemesh.validate" -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) }}
{{- fail "tls.enabled needs tls.secretName: the name of a kubernetes.io/tls Secret with ca.crt, tls.crt, tls.key" }}
{{- end }}
{{- if and .Values.topology.source (not (hasPrefix (printf "%s:" .Values.topology.moduleName) .Values.topology.target)) }}
{{- fail (printf "topology.source is mounted as module %q, so topology.target must start with %q" .Values.topology.moduleName (printf "%s:" .Values.topology.moduleName)) }}
{{- end }}
{{- range $key, $secretValue := dict "admin.token" "admin.existingSecret" "topology.state.redis.password" "state.redis.existingSecret" "mesh.secret" "meshSecret.existingSecret" }}
{{- if hasKey $.Values.config $key }}
{{- fail (printf "config.%s would put a secret into a ConfigMap: put it in a Secret and name that Secret in %s" $key $secretValue) }}
{{- end }}
{{- end }}
{{- /* one place for each: the meshSecret value, or config (where the value is 0) */}}
{{- if and .Values.meshSecret.maxSkewSeconds (hasKey .Values.config "mesh.secret.max.skew.secs") }}
{{- fail "config.mesh.secret.max.skew.secs and meshSecret.maxSkewSeconds are both set: set meshSecret.maxSkewSeconds only" }}
{{- end }}
{{- if and .Values.meshSecret.replayCacheEntries (hasKey .Values.config "mesh.secret.replay.cache.entries") }}
{{- fail "config.mesh.secret.replay.cache.entries and meshSecret.replayCacheEntries are both set: set meshSecret.replayCacheEntries only" }}
{{- end }}
{{- /* every pod reads the one ConfigMap, and each pod has CPUs of its own: a list for all of
them would stop each pod whose cpuset lacks it */}}
{{- if hasKey .Values.config "worker.cpus" }}
{{- fail "config.worker.cpus would pin every pod to the same CPUs: leave it out and give the pods whole CPUs (resources requests equal to limits, e.g. cpu: 2) on nodes with the static CPU manager policy" }}
{{- end }}
{{- /* The chart owns where the store is (the sqlite file must be on its volume: the root
filesystem is read-only), so these keys have one place: the state values. */}}
{{- range $key, $value := dict "topology.state.backend" "state.backend" "topology.state.sqlite.path" "state.backend sqlite (the chart mounts the file's volume)" "topology.state.redis.url" "state.redis.url" }}
{{- if hasKey $.Values.config $key }}
{{- fail (printf "config.%s is set by the chart: use %s" $key $value) }}
{{- end }}
{{- end }}
{{- if eq .Values.state.backend "sqlite" }}
{{- if gt (int .Values.workers) 1 }}
{{- fail (printf "state.backend sqlite keeps the checkpoints in a file inside each pod, which serves one worker only (workers: 1); %d workers need a store every pod reaches: state.backend redis" (int .Values.workers)) }}
{{- end }}
{{- end }}
{{- if eq .Values.state.backend "redis" }}
{{- if not .Values.state.redis.url }}
{{- fail "state.backend redis needs state.redis.url: redis://HOST:PORT/DB (the password goes in a Secret named by state.redis.existingSecret)" }}
{{- end }}
{{- if regexMatch "^[a-z]+://[^/@]*:[^/@]*@" .Values.state.redis.url }}
{{- fail "state.redis.url carries a password: keep it in a Secret named by state.redis.existingSecret (key state.redis.existingSecretPasswordKey) and give the URL without it" }}
{{- end }}
{{- end }}
{{- $own := list "TUPLEMESH_INDEX" "TUPLEMESH_WORKERS" "TUPLEMESH_PORT" "TUPLEMESH_CONFIG" "TUPLEMESH_DISCOVERY" "TUPLEMESH_DISCOVERY_SERVICE" "TUPLEMESH_DISCOVERY_NAMESPACE" "TUPLEMESH_STATEFULSET" "TUPLEMESH_PEERS" "TUPLEMESH_ADMIN_TOKEN" "TUPLEMESH_TOPOLOGY_STATE_BACKEND" "TUPLEMESH_TOPOLOGY_STATE_SQLITE_PATH" "TUPLEMESH_TOPOLOGY_STATE_REDIS_URL" "TUPLEMESH_TOPOLOGY_STATE_REDIS_PASSWORD" }}
{{- range .Values.extraEnv }}
{{- if has .name $own }}
{{- fail (printf "extraEnv sets %s, which the chart sets itself: use the chart's value for it (workers, ports, discovery, admin, state)" .name) }}
{{- end }}
{{- end }}
{{- end -}}
