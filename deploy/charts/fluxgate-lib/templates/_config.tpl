{{/* The shared connection values (global.kafka, global.registry) as the settings of .Values.envPrefix, and JSON logs. */}}
{{- define "fluxgate.globalSettings" -}}
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
{{- $_ := set $env (printf "%sLOG__JSON_OUTPUT" $p) "true" -}}
{{- toYaml $env -}}
{{- end -}}

{{/*
The service's settings, as the environment its Settings class reads: every key is a
FLUXGATE_<SERVICE>_* name (values.envPrefix), nothing renamed. Built from the shared
connection values (global.kafka, global.registry: one place for every service), the
HTTP port, then .Values.config, which wins.
*/}}
{{- define "fluxgate.settings" -}}
{{- $p := .Values.envPrefix -}}
{{- $env := include "fluxgate.globalSettings" . | fromYaml -}}
{{- $_ := set $env (printf "%sHTTP__PORT" $p) (toString .Values.httpPort) -}}
{{- range $key, $value := .Values.config -}}
{{- if not (hasPrefix $p $key) -}}
{{- fail (printf "config.%s: every setting of this service starts with %s (see docs/settings.md)" $key $p) -}}
{{- end -}}
{{- $_ := set $env $key (include "fluxgate.envValue" $value) -}}
{{- end -}}
{{- range $name, $_ := (.Values.secrets | default dict).files -}}
{{- if hasKey ($.Values.config | default dict) $name -}}
{{- fail (printf "config.%s: also under secrets.files; set the file either way, not both" $name) -}}
{{- end -}}
{{- $_ := set $env $name (printf "%s/%s" (include "fluxgate.secretFilesDir" $) $name) -}}
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
{{- $files := .Values.secrets.files | default dict -}}
{{- range $name, $ref := .Values.secrets.keys }}
{{- if not (hasKey $files (printf "%s_FILE" $name)) }}{{/* its file setting is given instead: the Settings take one of them */}}
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
{{- end -}}

{{/*
Secret file settings (values.secrets.files: each `..._FILE` setting whose secret sibling the
Settings read from a file instead, e.g. KAFKA__SASL_PASSWORD_FILE): the key of
secrets.existingSecret (else global.existingSecret) or {secret, key} projected into one
read-only volume as a file named by the setting, and the setting pointing at it. A projected
Secret is updated in place when the Secret changes, and the services read the file at each
connection, so a rotated password is picked up without a restart.
*/}}
{{- define "fluxgate.secretFilesDir" -}}/var/run/secrets/fluxgate{{- end -}}

{{- define "fluxgate.secretFilesVolume" -}}
{{- $g := .Values.global | default dict -}}
{{- $default := .Values.secrets.existingSecret | default $g.existingSecret -}}
{{- with .Values.secrets.files }}
- name: secret-files
  projected:
    defaultMode: 0440
    sources:
      {{- range $name, $ref := . }}
      {{- $secret := $default -}}
      {{- $key := $ref -}}
      {{- if kindIs "map" $ref -}}
      {{- $secret = $ref.secret -}}
      {{- $key = $ref.key -}}
      {{- end -}}
      {{- if not $secret -}}
      {{- fail (printf "secrets.files.%s: no Secret to read %s from (secrets.existingSecret, global.existingSecret or {secret, key})" $name $key) -}}
      {{- end }}
      - secret:
          name: {{ $secret }}
          items:
            - key: {{ $key }}
              path: {{ $name }}
      {{- end }}
{{- end -}}
{{- end -}}

{{- define "fluxgate.secretFilesMount" -}}
{{- if .Values.secrets.files }}
- name: secret-files
  mountPath: {{ include "fluxgate.secretFilesDir" . }}
  readOnly: true
{{- end -}}
{{- end -}}

{{/* One environment value: strings as they are, whole numbers without an exponent, lists and maps as JSON (as the Settings parse them). */}}
{{- define "fluxgate.envValue" -}}
{{- if kindIs "string" . -}}{{ . }}
{{- else if and (kindIs "float64" .) (eq (floor .) .) -}}{{ int64 . }}
{{- else -}}{{ toJson . }}
{{- end -}}
{{- end -}}
