{{/*
A persister: a Deployment of consumer-group members (FLUXGATE_<X>_SINK__GROUP_ID, default
fluxgate-<chart>) with its ConfigMap, Service, PodDisruptionBudget, PodMonitor and, with
autoscaling.enabled, a KEDA ScaledObject on the group's lag: on the topic the configured KCQL
reads (FLUXGATE_<X>_SINK__KCQL), on kafka.topic without one, and on every topic the group
reads when the KCQL reads several.
*/}}
{{- define "fluxgate.groupMemberDeployment" -}}
{{- include "fluxgate.applyDefaults" . -}}
{{- $group := index .Values.config (printf "%sSINK__GROUP_ID" .Values.envPrefix) | default (printf "fluxgate-%s" .Chart.Name) }}
{{- $kcql := index .Values.config (printf "%sSINK__KCQL" .Values.envPrefix) | default "" }}
{{- $sources := list }}
{{- range regexFindAll "(?i)\\bFROM\\s+[^\\s;]+" $kcql -1 }}
{{- $sources = append $sources (regexReplaceAll "(?i)^FROM\\s+" . "" | trimAll "`") }}
{{- end }}
{{- $topic := .Values.kafka.topic }}
{{- if $sources }}{{ $topic = eq (len (uniq $sources)) 1 | ternary (first $sources) "" }}{{ end }}
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
{{ include "fluxgate.scaledObject" (dict "ctx" . "kind" "Deployment" "group" $group "topic" $topic) }}
{{- end -}}
