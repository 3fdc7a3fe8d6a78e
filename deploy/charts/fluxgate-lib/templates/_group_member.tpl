{{/*
A persister: a Deployment of consumer-group members (FLUXGATE_<X>_SINK__GROUP_ID, default
fluxgate-<chart>) with its ConfigMap, Service, PodDisruptionBudget, PodMonitor and, with
autoscaling.enabled, a KEDA ScaledObject on the group's lag: on the topic the configured KCQL
reads (FLUXGATE_<X>_SINK__KCQL), on kafka.topic without one, and on every topic the group
reads when the KCQL reads several. Each member is static, named by its pod ("fluxgate.staticMemberEnv").
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
{{ include "fluxgate.deployment" (dict "ctx" . "extraEnv" (include "fluxgate.staticMemberEnv" . | fromJsonArray)) }}
---
{{ include "fluxgate.pdb" . }}
---
{{ include "fluxgate.podMonitor" . }}
---
{{ include "fluxgate.scaledObject" (dict "ctx" . "kind" "Deployment" "group" $group "topic" $topic) }}
{{- end -}}

{{/*
A consumer-group member's static identity (KIP-345), as a JSON list of env entries: its
<PREFIX>KAFKA__GROUP_INSTANCE_ID is the pod's name, so a container that crashed or was
killed and restarts in the same pod takes its partitions back at once instead of the
group waiting out its session. A static member never leaves the group, not even on
SIGTERM: a pod removed for good (scale-down, a Deployment's rollout, which names its new
pods afresh) holds its partitions until session.timeout.ms (librdkafka's 45 s, device-status's
FLUXGATE_STATUS_STATUS__SESSION_TIMEOUT_S). kafka.staticMembership: false turns it off;
a GROUP_INSTANCE_ID under config wins.
*/}}
{{- define "fluxgate.staticMemberEnv" -}}
{{- $name := printf "%sKAFKA__GROUP_INSTANCE_ID" .Values.envPrefix -}}
{{- if and .Values.kafka.staticMembership (not (hasKey .Values.config $name)) -}}
{{- toJson (list (dict "name" $name "value" "$(POD_NAME)")) -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}
