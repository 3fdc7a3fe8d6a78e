{{/* The objects around a workload: its Service, PodDisruptionBudget, PodMonitor and KEDA ScaledObject. */}}
{{- define "fluxgate.service" -}}
{{ include "fluxgate.serviceOn" (dict "ctx" . "selector" (include "fluxgate.selectorLabels" . | fromYaml) "targetPort" "http") }}
{{- end -}}

{{/*
The Service on the HTTP port of the pods .selector (labels) picks, in a dict with the chart's
context as .ctx; .targetPort is the pods' port, by name or, where their spec cannot name it
(the Spark operator's driver), by number.
*/}}
{{- define "fluxgate.serviceOn" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "fluxgate.fullname" .ctx }}
  labels:
    {{- include "fluxgate.labels" .ctx | nindent 4 }}
spec:
  type: {{ .ctx.Values.service.type }}
  selector:
    {{- toYaml .selector | nindent 4 }}
  ports:
    - name: http
      port: {{ .ctx.Values.httpPort }}
      targetPort: {{ .targetPort }}
      protocol: TCP
{{- end -}}

{{/* A headless Service: the stable DNS name of each StatefulSet pod (<pod>.<service>). */}}
{{- define "fluxgate.headlessService" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "fluxgate.fullname" . }}-headless
  labels:
    {{- include "fluxgate.labels" . | nindent 4 }}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    {{- include "fluxgate.selectorLabels" . | nindent 4 }}
  ports:
    - name: http
      port: {{ .Values.httpPort }}
      targetPort: http
      protocol: TCP
{{- end -}}

{{- define "fluxgate.pdb" -}}
{{- if .Values.podDisruptionBudget.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "fluxgate.fullname" . }}
  labels:
    {{- include "fluxgate.labels" . | nindent 4 }}
spec:
  maxUnavailable: {{ .Values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "fluxgate.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}

{{- define "fluxgate.podMonitor" -}}
{{- if .Values.podMonitor.enabled }}
{{- include "fluxgate.monitorMeta" (dict "ctx" . "kind" "PodMonitor") }}
spec:
  selector:
    matchLabels:
      {{- include "fluxgate.selectorLabels" . | nindent 6 }}
  podMetricsEndpoints:
    - {{- include "fluxgate.metricsEndpoint" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/*
With podMonitor.enabled, a ServiceMonitor on the chart's Service instead: for pods whose spec
cannot declare the HTTP port (the Spark operator's driver), since Prometheus makes pod targets
only of declared container ports, while a Service's endpoints carry its targetPort.
*/}}
{{- define "fluxgate.serviceMonitor" -}}
{{- if .Values.podMonitor.enabled }}
{{- include "fluxgate.monitorMeta" (dict "ctx" . "kind" "ServiceMonitor") }}
spec:
  selector:
    matchLabels:
      {{- include "fluxgate.selectorLabels" . | nindent 6 }}
  endpoints:
    - {{- include "fluxgate.metricsEndpoint" . | nindent 6 }}
{{- end }}
{{- end -}}

{{- define "fluxgate.monitorMeta" -}}
apiVersion: monitoring.coreos.com/v1
kind: {{ .kind }}
metadata:
  name: {{ include "fluxgate.fullname" .ctx }}
  labels:
    {{- include "fluxgate.labels" .ctx | nindent 4 }}
    {{- with .ctx.Values.podMonitor.labels }}{{ toYaml . | nindent 4 }}{{ end }}
{{- end -}}

{{/* /metrics on the port named http: the pod's container port, or the Service's port. */}}
{{- define "fluxgate.metricsEndpoint" -}}
port: http
path: /metrics
interval: {{ .Values.podMonitor.interval }}
scrapeTimeout: {{ .Values.podMonitor.scrapeTimeout }}
# What the alerts (the umbrella's files/prometheus-rules.yaml) match each service's series by.
relabelings:
  - targetLabel: fluxgate_service
    replacement: {{ .Chart.Name }}
{{- end -}}

{{/*
Scaling on consumer lag (KEDA's kafka scaler) for a member of a consumer group: never
more members than the topic has partitions, since a member beyond that gets none.
Call with dict "ctx" . "kind" Deployment|StatefulSet "group" <consumer group> "topic" <topic>.
*/}}
{{- define "fluxgate.scaledObject" -}}
{{- $v := .ctx.Values -}}
{{- if $v.autoscaling.enabled }}
{{- if gt (int $v.autoscaling.maxReplicas) (int $v.kafka.partitions) }}
{{- fail (printf "autoscaling.maxReplicas (%v) is above kafka.partitions (%v): a consumer group member beyond the topic's partition count gets no partition" $v.autoscaling.maxReplicas $v.kafka.partitions) }}
{{- end }}
{{- $g := $v.global | default dict }}
{{- $bootstrap := $v.autoscaling.bootstrapServers | default (($g.kafka | default dict).bootstrapServers) }}
{{- if not $bootstrap }}{{ fail "autoscaling: set global.kafka.bootstrapServers (or autoscaling.bootstrapServers) for the lag scaler" }}{{ end }}
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {{ include "fluxgate.fullname" .ctx }}
  labels:
    {{- include "fluxgate.labels" .ctx | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: {{ .kind }}
    name: {{ include "fluxgate.fullname" .ctx }}
  minReplicaCount: {{ $v.autoscaling.minReplicas }}
  maxReplicaCount: {{ $v.autoscaling.maxReplicas }}
  pollingInterval: {{ $v.autoscaling.pollingInterval }}
  cooldownPeriod: {{ $v.autoscaling.cooldownPeriod }}
  triggers:
    - type: kafka
      metadata:
        bootstrapServers: {{ $bootstrap | quote }}
        consumerGroup: {{ .group | quote }}
        {{- with .topic }}
        topic: {{ . | quote }}
        {{- end }}
        lagThreshold: {{ $v.autoscaling.lagThreshold | quote }}
        offsetResetPolicy: earliest
        allowIdleConsumers: "false"
      {{- with $v.autoscaling.authenticationRef }}
      authenticationRef:
        name: {{ . }}
      {{- end }}
{{- end }}
{{- end -}}
