{{/*
The service's settings, as the environment its Settings class reads: every key is a
FLUXGATE_<SERVICE>_* name (values.envPrefix), nothing renamed. Built from the shared
connection values (global.kafka, global.registry: one place for every service), the
HTTP port, then .Values.config, which wins.
*/}}
{{- define "fluxgate.settings" -}}
{{- $p := .Values.envPrefix -}}
{{- $g := .Values.global | default dict -}}
{{- $kafka := $g.kafka | default dict -}}
{{- $registry := $g.registry | default dict -}}
{{- $env := dict -}}
{{- with $kafka.bootstrapServers }}{{ $_ := set $env (printf "%sKAFKA__BOOTSTRAP_SERVERS" $p) . }}{{ end -}}
{{- with $kafka.securityProtocol }}{{ $_ := set $env (printf "%sKAFKA__SECURITY_PROTOCOL" $p) . }}{{ end -}}
{{- with $kafka.saslMechanism }}{{ $_ := set $env (printf "%sKAFKA__SASL_MECHANISM" $p) . }}{{ end -}}
{{- with $kafka.saslUsername }}{{ $_ := set $env (printf "%sKAFKA__SASL_USERNAME" $p) . }}{{ end -}}
{{- with $kafka.sslCaLocation }}{{ $_ := set $env (printf "%sKAFKA__SSL_CA_LOCATION" $p) . }}{{ end -}}
{{- with $registry.url }}{{ $_ := set $env (printf "%sREGISTRY__URL" $p) . }}{{ end -}}
{{- $_ := set $env (printf "%sHTTP__PORT" $p) (toString .Values.httpPort) -}}
{{- $_ := set $env (printf "%sLOG__JSON_OUTPUT" $p) "true" -}}
{{- range $key, $value := .Values.config -}}
{{- if not (hasPrefix $p $key) -}}
{{- fail (printf "config.%s: every setting of this service starts with %s (see docs/settings.md)" $key $p) -}}
{{- end -}}
{{- $_ := set $env $key (include "fluxgate.envValue" $value) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{- define "fluxgate.configmap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "fluxgate.fullname" . }}
  labels:
    {{- include "fluxgate.labels" . | nindent 4 }}
data:
  {{- include "fluxgate.settings" . | nindent 2 }}
{{- end -}}

{{/*
Secrets come from Secrets the user manages: each of the service's secret settings
(values.secrets.keys) is read, when present, from a key of values.secrets.existingSecret
(else global.existingSecret), or from {secret, key} given for it (an operator's own
Secret, e.g. Strimzi's KafkaUser or ECK's elastic user). Nothing is read without a Secret.
*/}}
{{- define "fluxgate.secretEnv" -}}
{{- $g := .Values.global | default dict -}}
{{- $default := .Values.secrets.existingSecret | default $g.existingSecret -}}
{{- range $name, $ref := .Values.secrets.keys }}
{{- $secret := $default -}}
{{- $key := $ref -}}
{{- if kindIs "map" $ref -}}
{{- $secret = $ref.secret -}}
{{- $key = $ref.key -}}
{{- end -}}
{{- if $secret }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
      optional: true
{{- end -}}
{{- end -}}
{{- end -}}

{{/* One environment value: strings as they are, whole numbers without an exponent, lists and maps as JSON (as the Settings parse them). */}}
{{- define "fluxgate.envValue" -}}
{{- if kindIs "string" . -}}{{ . }}
{{- else if and (kindIs "float64" .) (eq (floor .) .) -}}{{ int64 . }}
{{- else -}}{{ toJson . }}
{{- end -}}
{{- end -}}
