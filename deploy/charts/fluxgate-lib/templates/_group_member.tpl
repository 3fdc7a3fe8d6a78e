{{/*
A persister: a Deployment of consumer-group members (FLUXGATE_<X>_SINK__GROUP_ID, default
fluxgate-<chart>) with its ConfigMap, Service, PodDisruptionBudget, PodMonitor and, with
autoscaling.enabled, a KEDA ScaledObject on the group's lag on kafka.topic.
*/}}
{{- define "fluxgate.groupMemberDeployment" -}}
{{- include "fluxgate.applyDefaults" . -}}
{{- $group := index .Values.config (printf "%sSINK__GROUP_ID" .Values.envPrefix) | default (printf "fluxgate-%s" .Chart.Name) }}
{{ include "fluxgate.configmap" . }}
---
{{ include "fluxgate.service" . }}
---
{{ include "fluxgate.deployment" (dict "ctx" .) }}
---
{{ include "fluxgate.pdb" . }}
---
{{ include "fluxgate.podMonitor" . }}
---
{{ include "fluxgate.scaledObject" (dict "ctx" . "kind" "Deployment" "group" $group "topic" .Values.kafka.topic) }}
{{- end -}}
