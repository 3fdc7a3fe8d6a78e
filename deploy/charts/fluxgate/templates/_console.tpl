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
What the console takes over from each persister, reaching its store as the persister does:
the settings under prefix (the console's own under to, the same field names: one group in
fluxgate_core.store_access), the files among them (their volumes mounted on the console
too), the secret ones (read from the persister's Secret key), and what the console reads
as "not shown" when the persister is left out.
*/}}
{{- define "fluxgate.umbrella.storeSettings" -}}
es-persister:
  prefix: FLUXGATE_ES_ELASTICSEARCH__
  to: ELASTICSEARCH__
  copied: [HOSTS, USERNAME, CA_CERTS, VERIFY_CERTS]
  files: [CA_CERTS]
  secrets: [API_KEY, PASSWORD]
  absent: {HOSTS: []}
scylla-persister:
  prefix: FLUXGATE_SCYLLA_SCYLLA__
  to: SCYLLA__
  copied: [CONTACT_POINTS, PORT, LOCAL_DATACENTER, USERNAME, TLS, TLS_CA_FILE, TLS_CHECK_HOSTNAME]
  files: [TLS_CA_FILE]
  secrets: [PASSWORD]
  absent: {CONTACT_POINTS: []}
hazelcast-persister:
  prefix: FLUXGATE_HZ_HAZELCAST__
  to: HAZELCAST__
  copied: [MEMBERS, CLUSTER_NAME, USERNAME, SSL_ENABLED, SSL_CAFILE, SSL_CERTFILE, SSL_KEYFILE]
  files: [SSL_CAFILE, SSL_CERTFILE, SSL_KEYFILE]
  secrets: [PASSWORD, SSL_PASSWORD]
  absent: {MEMBERS: []}
  extra: {FLUXGATE_HZ_SINK__KCQL: HAZELCAST__KCQL}
{{- end -}}

{{/*
The console's settings from the other enabled charts: FLUXGATE_CONSOLE_SERVICES, and each
store its persister writes, reached as that persister reaches it (a persister left out:
its store not shown). Its secrets and certificate volumes: fluxgate.umbrella.consoleStoreAccess.
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
{{- range $name, $store := include "fluxgate.umbrella.storeSettings" . | fromYaml -}}
{{- $chart := index $.Subcharts $name -}}
{{- if not $chart -}}
{{- range $field, $value := $store.absent }}{{ $_ := set $config (printf "%s%s%s" $p $store.to $field) $value }}{{ end -}}
{{- else -}}
{{- $copied := $store.extra | default dict -}}
{{- range $field := $store.copied }}{{ $_ := set $copied (printf "%s%s" $store.prefix $field) (printf "%s%s" $store.to $field) }}{{ end -}}
{{- range $from, $to := $copied -}}
{{- if hasKey $chart.Values.config $from }}{{ $_ := set $config (printf "%s%s" $p $to) (index $chart.Values.config $from) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/*
The rest of what the console needs to reach each store as its persister does:
secrets: the console's secret settings, each read from the Secret and key the persister's
  is read from (its {secret, key}, or its key in its existingSecret, else the global one);
files: the same for the secret file settings (secrets.files: PASSWORD_FILE);
volumes, mounts: the persister's extraVolumes mounted where its TLS files are (the
  console's settings name the same paths), renamed <persister>-<name> to stay apart.
*/}}
{{- define "fluxgate.umbrella.consoleStoreAccess" -}}
{{- $secrets := dict -}}
{{- $secretFiles := dict -}}
{{- $volumes := dict -}}
{{- $mounts := list -}}
{{- range $name, $store := include "fluxgate.umbrella.storeSettings" . | fromYaml -}}
{{- with index $.Subcharts $name -}}
{{- $v := .Values -}}
{{- $secret := $v.secrets.existingSecret | default ($v.global | default dict).existingSecret -}}
{{- range $field := $store.secrets -}}
{{- $ref := index $v.secrets.keys (printf "%s%s" $store.prefix $field) -}}
{{- $to := printf "FLUXGATE_CONSOLE_%s%s" $store.to $field -}}
{{- if kindIs "map" $ref }}{{ $_ := set $secrets $to $ref }}
{{- else if and $ref $secret }}{{ $_ := set $secrets $to (dict "secret" $secret "key" $ref) }}{{ end -}}
{{- with index ($v.secrets.files | default dict) (printf "%s%s_FILE" $store.prefix $field) -}}
{{- $toFile := printf "%s_FILE" $to -}}
{{- if kindIs "map" . }}{{ $_ := set $secretFiles $toFile . }}
{{- else if $secret }}{{ $_ := set $secretFiles $toFile (dict "secret" $secret "key" .) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $files := list -}}
{{- range $field := $store.files }}{{ with index $v.config (printf "%s%s" $store.prefix $field) }}{{ $files = append $files . }}{{ end }}{{ end -}}
{{- range $mount := $v.extraVolumeMounts | default list -}}
{{- $dir := printf "%s/" (trimSuffix "/" $mount.mountPath) -}}
{{- $holds := false -}}
{{- range $file := $files }}{{ if or (eq $file $mount.mountPath) (hasPrefix $dir $file) }}{{ $holds = true }}{{ end }}{{ end -}}
{{- if $holds -}}
{{- $renamed := printf "%s-%s" $name $mount.name -}}
{{- $mounts = append $mounts (merge (dict "name" $renamed) (omit $mount "name")) -}}
{{- range $volume := $v.extraVolumes | default list -}}
{{- if eq $volume.name $mount.name }}{{ $_ := set $volumes $renamed (merge (dict "name" $renamed) (omit $volume "name")) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $listed := list -}}
{{- range $renamed := keys $volumes | sortAlpha }}{{ $listed = append $listed (index $volumes $renamed) }}{{ end -}}
{{- toYaml (dict "secrets" $secrets "files" $secretFiles "volumes" $listed "mounts" $mounts) -}}
{{- end -}}
