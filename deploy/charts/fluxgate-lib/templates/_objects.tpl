{{/* The objects around a workload: its Service, PodDisruptionBudget, PodMonitor and KEDA ScaledObject. */}}
{{- define "fluxgate.service" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "fluxgate.fullname" . }}
  labels:
    {{- include "fluxgate.labels" . | nindent 4 }}
spec:
  type: {{ .Values.service.type }}
  selector:
    {{- include "fluxgate.selectorLabels" . | nindent 4 }}
  ports:
    - name: http
      port: {{ .Values.httpPort }}
      targetPort: http
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
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{ include "fluxgate.fullname" . }}
  labels:
    {{- include "fluxgate.labels" . | nindent 4 }}
    {{- with .Values.podMonitor.labels }}{{ toYaml . | nindent 4 }}{{ end }}
spec:
  selector:
    matchLabels:
      {{- include "fluxgate.selectorLabels" . | nindent 6 }}
  podMetricsEndpoints:
    - port: http
      path: /metrics
      interval: {{ .Values.podMonitor.interval }}
      scrapeTimeout: {{ .Values.podMonitor.scrapeTimeout }}
{{- end }}
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
