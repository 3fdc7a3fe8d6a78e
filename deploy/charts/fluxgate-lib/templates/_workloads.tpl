{{/*
Deployment and StatefulSet around "fluxgate.podTemplate". Call with a dict: "ctx" (the
chart's context) and optionally "extraEnv", "volumes", "volumeMounts" (passed to the pod
template), "strategy" (Deployment), "volumeClaimTemplates" (StatefulSet).
With values.autoscaling.enabled the replica count is KEDA's, not the chart's.
*/}}
{{- define "fluxgate.deployment" -}}
{{- $v := .ctx.Values -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "fluxgate.fullname" .ctx }}
  labels:
    {{- include "fluxgate.labels" .ctx | nindent 4 }}
spec:
  {{- if not (($v.autoscaling | default dict).enabled) }}
  replicas: {{ $v.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  {{- with .strategy }}
  strategy: {{ toYaml . | nindent 4 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "fluxgate.selectorLabels" .ctx | nindent 6 }}
  template:
    {{- include "fluxgate.podTemplate" . | nindent 4 }}
{{- end -}}

{{- define "fluxgate.statefulset" -}}
{{- $v := .ctx.Values -}}
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ include "fluxgate.fullname" .ctx }}
  labels:
    {{- include "fluxgate.labels" .ctx | nindent 4 }}
spec:
  {{- if not (($v.autoscaling | default dict).enabled) }}
  replicas: {{ $v.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  serviceName: {{ include "fluxgate.fullname" .ctx }}-headless
  podManagementPolicy: {{ $v.podManagementPolicy | default "OrderedReady" }}
  selector:
    matchLabels:
      {{- include "fluxgate.selectorLabels" .ctx | nindent 6 }}
  template:
    {{- include "fluxgate.podTemplate" . | nindent 4 }}
  {{- with .volumeClaimTemplates }}
  volumeClaimTemplates: {{ toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/*
A service whose pods need a stable index or name (coap-ingest's member, mqtt-proxy's client
id, device-status's advertised host): its ConfigMap, Service, headless Service,
"fluxgate.statefulset", PodDisruptionBudget and PodMonitor. Called with the dict
"fluxgate.statefulset" takes.
*/}}
{{- define "fluxgate.statefulService" -}}
{{ include "fluxgate.configmap" .ctx }}
---
{{ include "fluxgate.service" .ctx }}
---
{{ include "fluxgate.headlessService" .ctx }}
---
{{ include "fluxgate.statefulset" . }}
---
{{ include "fluxgate.pdb" .ctx }}
---
{{ include "fluxgate.podMonitor" .ctx }}
{{- end -}}
