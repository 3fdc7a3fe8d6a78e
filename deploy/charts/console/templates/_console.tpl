{{/*
The console's objects: ConfigMap, Service (health and metrics on httpPort, the page on
webPort), Deployment, PodDisruptionBudget and PodMonitor. Called by this chart's template,
and by the umbrella chart with .Values.derivedConfig filled in from its other charts (a
subchart cannot see its siblings' values): settings under config win over derived ones,
derived ones over the chart's own defaults.
*/}}
{{- define "fluxgate.console.objects" -}}
{{- include "fluxgate.applyDefaults" . -}}
{{- if ne (int .Values.replicaCount) 1 -}}
{{- fail "replicaCount must be 1: every console asks every service, Kafka and store on its own, and a second one behind the Service shows a page of its own (see the chart's README)" -}}
{{- end -}}
{{- $p := .Values.envPrefix -}}
{{- /* The page on every address of the pod: the Settings' default (127.0.0.1) would reach nothing from the Service.
It answers to the loopback names (port-forward) and the Service's own (Kafka UI and the like reading /connect). */ -}}
{{- $full := include "fluxgate.fullname" . -}}
{{- $svc := printf "%s.%s.svc" $full .Release.Namespace -}}
{{- $hosts := list "127.0.0.1" "localhost" "[::1]" $full (printf "%s.%s" $full .Release.Namespace) $svc (printf "%s.cluster.local" $svc) -}}
{{- $own := dict (printf "%sSERVICES" $p) (list) (printf "%sWEB__PORT" $p) (toString .Values.webPort) (printf "%sWEB__HOST" $p) "0.0.0.0" (printf "%sWEB__ALLOWED_HOSTS" $p) $hosts -}}
{{- $_ := set .Values "config" (merge (deepCopy .Values.config) (.Values.derivedConfig | default dict) $own) -}}
{{- $web := dict "name" "web" "protocol" "TCP" -}}
{{- $service := include "fluxgate.service" . | fromYaml -}}
{{- $_ := set $service.spec "ports" (append $service.spec.ports (merge (dict "port" .Values.webPort "targetPort" "web") $web)) -}}
{{- $deployment := include "fluxgate.deployment" (dict "ctx" .) | fromYaml -}}
{{- $container := first $deployment.spec.template.spec.containers -}}
{{- $_ := set $container "ports" (append $container.ports (merge (dict "containerPort" .Values.webPort) $web)) -}}
{{ include "fluxgate.configmap" . }}
---
{{ toYaml $service }}
---
{{ toYaml $deployment }}
---
{{ include "fluxgate.pdb" . }}
---
{{ include "fluxgate.podMonitor" . }}
{{- end -}}
