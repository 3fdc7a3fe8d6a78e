{{/*
Where each service stands in the pipeline, as the console's WatchedService has it (the
services' default topics; a pipeline with other topic names sets console.config's
FLUXGATE_CONSOLE_SERVICES itself). groupFrom: the service's setting naming its group, whose
default is fluxgate-<chart>. In the pipeline's order, which is the page's. The aggregator is
at its Service in either mode (in sparkApplication mode, the Service on its driver).
*/}}
{{- define "fluxgate.umbrella.watchable" -}}
- {name: mqtt-proxy, role: gateway, outputs: [sensors.readings, sensors.deadletter]}
- {name: coap-ingest, role: gateway, outputs: [sensors.readings, sensors.deadletter]}
- {name: aggregator, role: processor, groupFrom: FLUXGATE_AGG_PROGRESS_GROUP, inputs: [sensors.readings],
   outputs: [temperatures.aggregated, temperatures.late, sensors.deadletter]}
- {name: device-status, role: processor, groupFrom: FLUXGATE_STATUS_STATUS__APP_ID, inputs: [sensors.readings],
   outputs: [devices.status]}
- {name: es-persister, role: persister, store: elasticsearch, groupFrom: FLUXGATE_ES_SINK__GROUP_ID,
   inputs: [temperatures.aggregated], outputs: [persisters.deadletter]}
- {name: scylla-persister, role: persister, store: scylla, groupFrom: FLUXGATE_SCYLLA_SINK__GROUP_ID,
   inputs: [temperatures.aggregated], outputs: [persisters.deadletter]}
- {name: hazelcast-persister, role: persister, store: hazelcast, groupFrom: FLUXGATE_HZ_SINK__GROUP_ID,
   inputs: [temperatures.aggregated], outputs: [persisters.deadletter]}
{{- end -}}

{{/*
Each enabled service's base URLs: every pod of a StatefulSet (it has a headless Service)
by its stable DNS name, so each instance is asked on its own; otherwise (a Deployment, or
a StatefulSet KEDA scales) the Service, which answers from one pod per ask.
*/}}
{{- define "fluxgate.umbrella.urls" -}}
{{- $full := include "fluxgate.fullname" .chart -}}
{{- $v := .chart.Values -}}
{{- $urls := list -}}
{{- if and (has .name (list "mqtt-proxy" "coap-ingest" "device-status")) (not ($v.autoscaling | default dict).enabled) -}}
{{- range $i := until (int $v.replicaCount) -}}
{{- $urls = append $urls (printf "http://%s-%d.%s-headless.%s.svc:%v" $full $i $full $.namespace $v.httpPort) -}}
{{- end -}}
{{- else -}}
{{- $urls = append $urls (printf "http://%s.%s.svc:%v" $full .namespace $v.httpPort) -}}
{{- end -}}
{{- toJson $urls -}}
{{- end -}}

{{/* A setting of a service's config as a list, whether given as YAML or as a JSON string. */}}
{{- define "fluxgate.umbrella.listSetting" -}}
{{- if kindIs "string" . }}{{ . }}{{ else }}{{ toJson . }}{{ end -}}
{{- end -}}

{{/*
The console's settings from the other enabled charts: FLUXGATE_CONSOLE_SERVICES, and each
store its persister writes, reached as that persister reaches it (a persister left out:
its store not shown). Store passwords come from the same Secret keys as the persisters'.
*/}}
{{- define "fluxgate.umbrella.consoleConfig" -}}
{{- $p := "FLUXGATE_CONSOLE_" -}}
{{- $config := dict -}}
{{- $services := list -}}
{{- range $placed := include "fluxgate.umbrella.watchable" . | fromYamlArray -}}
{{- $chart := index $.Subcharts $placed.name -}}
{{- if $chart -}}
{{- $urls := include "fluxgate.umbrella.urls" (dict "chart" $chart "name" $placed.name "namespace" $.Release.Namespace) | fromJsonArray -}}
{{- $service := merge (dict "urls" $urls) (omit $placed "groupFrom") -}}
{{- with $placed.groupFrom -}}
{{- $_ := set $service "group" (index $chart.Values.config . | default (printf "fluxgate-%s" $placed.name)) -}}
{{- end -}}
{{- $services = append $services $service -}}
{{- end -}}
{{- end -}}
{{- $_ := set $config (printf "%sSERVICES" $p) $services -}}
{{- $copied := dict
  "es-persister" (dict "FLUXGATE_ES_ELASTICSEARCH__HOSTS" "ELASTICSEARCH__HOSTS")
  "scylla-persister" (dict "FLUXGATE_SCYLLA_SCYLLA__CONTACT_POINTS" "SCYLLA__CONTACT_POINTS" "FLUXGATE_SCYLLA_SCYLLA__PORT" "SCYLLA__PORT"
                           "FLUXGATE_SCYLLA_SCYLLA__LOCAL_DATACENTER" "SCYLLA__LOCAL_DATACENTER" "FLUXGATE_SCYLLA_SCYLLA__USERNAME" "SCYLLA__USERNAME")
  "hazelcast-persister" (dict "FLUXGATE_HZ_HAZELCAST__MEMBERS" "HAZELCAST__MEMBERS" "FLUXGATE_HZ_HAZELCAST__CLUSTER_NAME" "HAZELCAST__CLUSTER_NAME"
                              "FLUXGATE_HZ_HAZELCAST__USERNAME" "HAZELCAST__USERNAME" "FLUXGATE_HZ_SINK__KCQL" "HAZELCAST__KCQL") -}}
{{- /* A store whose persister is left out: empty, which the console reads as "not shown". */ -}}
{{- $absent := dict "es-persister" (dict "ELASTICSEARCH_URL" "") "scylla-persister" (dict "SCYLLA__CONTACT_POINTS" list)
  "hazelcast-persister" (dict "HAZELCAST__MEMBERS" list) -}}
{{- range $name, $settings := $copied -}}
{{- $chart := index $.Subcharts $name -}}
{{- range $to, $value := ternary (dict) (index $absent $name) (not (empty $chart)) -}}
{{- $_ := set $config (printf "%s%s" $p $to) $value -}}
{{- end -}}
{{- range $from, $to := $settings -}}
{{- if and $chart (hasKey $chart.Values.config $from) }}{{ $_ := set $config (printf "%s%s" $p $to) (index $chart.Values.config $from) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- /* The console asks one Elasticsearch URL: the persister's first node. */ -}}
{{- with pluck (printf "%sELASTICSEARCH__HOSTS" $p) $config | first -}}
{{- $_ := set $config (printf "%sELASTICSEARCH_URL" $p) (include "fluxgate.umbrella.listSetting" . | fromJsonArray | first) -}}
{{- $_ := unset $config (printf "%sELASTICSEARCH__HOSTS" $p) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}
